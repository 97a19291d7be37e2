"""Worker threads a process shares for calls made at once: one pool per purpose, made on first use.

A Lambda execution environment runs one invocation at a time, so a small pool per purpose is
enough; the local stack, which runs every function in one process, shares them the same way.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

_pools: dict[str, ThreadPoolExecutor] = {}
_lock = threading.Lock()


def shared_pool(name: str, workers: int) -> ThreadPoolExecutor:
    """The process's pool ``name`` (its threads named after it), with ``workers`` threads at most.

    Examples
    --------
    >>> shared_pool("example", 2) is shared_pool("example", 2)
    True
    """
    with _lock:
        pool = _pools.get(name)
        if pool is None:
            pool = _pools[name] = ThreadPoolExecutor(max_workers=workers, thread_name_prefix=name)
        return pool
