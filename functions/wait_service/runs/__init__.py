"""Runs: the inbox queue, the runner that runs the graph and announces its questions, checkpointers,
the graph's loading and input schema.
"""
