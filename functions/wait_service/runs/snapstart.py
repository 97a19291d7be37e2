"""SnapStart: what copies of one snapshot must not share.

With SnapStart (CDK context ``snapstart=true``) Lambda runs a function's init phase once per
published version, snapshots the initialized execution environment, and resumes every new
execution environment from that one snapshot. Whatever the init left in memory is then shared by
every copy:

- the ``random`` module's generator state: every copy would draw the same numbers (botocore's
  retry jitter among them), so each copy reseeds it from the kernel right after its restore;
- connections open in the boto3 clients' pools: their TCP state belongs to the environment the
  snapshot was taken in, so every client's pool is emptied before the snapshot and each copy opens
  its own connections at its first call (the clients stay usable; only their pools are cleared).

ULIDs need nothing more: python-ulid takes its 80 random bits from ``os.urandom`` (the kernel's
generator, not Python state frozen in the snapshot), and its monotonic counter only continues an id
from the same millisecond, which no restored copy shares with the init. Credentials need nothing
either: with SnapStart, Lambda hands the SDK refreshable container credentials, not keys in the
environment.

The hooks are registered through the runtime's ``snapshot_restore_py`` (shipped in Lambda's Python
runtimes) and only when the init is a SnapStart one; anywhere else nothing is imported or registered.
"""

from __future__ import annotations

import gc
import random
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

# Lambda's value of AWS_LAMBDA_INITIALIZATION_TYPE while it initializes a version for its snapshot.
SNAP_START_INIT = "snap-start"

__all__ = ["after_restore", "before_snapshot", "register_hooks"]


def before_snapshot(clients: Iterable[Any] | None = None) -> int:
    """Empty the connection pools of ``clients`` (default: every botocore client in the process).

    Returns how many clients were closed. A closed client stays usable: its next call opens a new
    connection.
    """
    if clients is None:
        clients = _every_client()
    closed = 0
    for client in clients:
        client.close()
        closed += 1
    return closed


def _every_client() -> list[Any]:
    """Every botocore client in the process, those the init froze (``wait_service.init_phase``) too.

    The collector lists no frozen object, so they are thawed while the heap is searched, then
    frozen again with what the init built since.
    """
    from botocore.client import BaseClient

    frozen = gc.get_freeze_count() > 0
    gc.unfreeze()
    try:
        return [found for found in gc.get_objects() if isinstance(found, BaseClient)]
    finally:
        if frozen:
            gc.freeze()


def after_restore() -> None:
    """Give this copy of the snapshot randomness of its own."""
    random.seed()


def register_hooks(environ: Mapping[str, str]) -> bool:
    """Register :func:`before_snapshot` and :func:`after_restore` when this is a SnapStart init.

    Returns whether they were registered.

    Examples
    --------
    >>> register_hooks({})
    False
    """
    if environ.get("AWS_LAMBDA_INITIALIZATION_TYPE") != SNAP_START_INIT:
        return False
    try:
        from snapshot_restore_py import (
            register_after_restore,
            register_before_snapshot,
        )
    except ImportError:
        return False
    register_before_snapshot(before_snapshot)
    register_after_restore(after_restore)
    return True
