"""The ``agent-wait`` console script (``agent_wait.cli:main``)."""

from agent_wait.cli.commands import main

__all__ = ["main"]
