"""The ledger's stream and its consumers: the outbox, resolution events, the audit archive and
analytics.
"""
