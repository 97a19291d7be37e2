"""The agent-wait CDK app: one construct per concern, composed by :class:`infra.stack.AgentWaitStack`.

This package root imports nothing from ``aws_cdk`` so that ``python -m infra.report`` and the pure
helpers (``infra.constants``, ``infra.config``, ``infra.requirements``) load without the CDK.
"""
