"""Announcers: where an envelope goes once a question is raised.

:class:`BaseAnnounce` is the interface (implement ``deliver``); :class:`CompositeAnnounce` fans
out to several; :class:`InMemoryAnnounce` is the reference implementation for tests. AWS
announcers live in ``agent_wait.aws`` (extra ``aws``), the webhook in ``agent_wait.webhook``.
"""

from agent_wait.announce.base import BaseAnnounce
from agent_wait.announce.composite import CompositeAnnounce
from agent_wait.announce.memory import InMemoryAnnounce

__all__ = ["BaseAnnounce", "CompositeAnnounce", "InMemoryAnnounce"]
