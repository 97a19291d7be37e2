"""The keys of an interrupt value that agent-wait reads, in a module that imports nothing.

A ``@wait`` call (and :func:`agent_wait.langchain_hitl` for the middleware's batches) interrupts with
``{"question": ..., WAIT_KEY: <policy>}``; ``SOURCE_KEY`` names the function a question came from.
Kept apart so that every module reading interrupt values can import them without importing
:mod:`agent_wait.wait` and what it depends on.
"""

from __future__ import annotations

__all__ = ["SOURCE_KEY", "WAIT_KEY"]

WAIT_KEY = "__wait__"
SOURCE_KEY = "__source__"
