"""Answers: who may answer (responders, authority, policies as config), the reply service, expiry
decisions and the audit record.
"""
