"""The ``agent-wait`` console script (``agent_wait_cli:main``)."""

from agent_wait_cli.commands import main

__all__ = ["main"]
