"""The webhooks the signed synth variant configures (context ``webhooks``).

A module of its own, not the infra ``conftest``: under pytest-xdist a worker may have imported
another folder's ``conftest`` under that name first, and ``from conftest import ...`` would then
read the wrong one.
"""

from __future__ import annotations

SECRETS = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:agent-wait/"

WEBHOOKS = [
    {
        "url": "https://tickets.example.com/hooks/agent-wait",
        "secret_name": "agent-wait/tickets-webhook",
        "types": ["wait.created", "wait.escalated"],
    },
    {
        "url": "https://payments.example.com/agent-wait?team=refunds",
        "secret_name": SECRETS + "payments-webhook-XyZ123",
        "types": ["wait.reminder"],
        "key_id": "payments",
    },
]
