"""A Lambda function's init phase without the cyclic garbage collector.

Loading a handler builds a few hundred thousand objects that live as long as the execution
environment (modules, classes, pydantic validators, botocore's models, the service and its
clients) and next to no garbage. The collector, started by allocation counts, walks them again
and again while they are built: about a tenth of the api's import and init, in instructions.

While a handler loads, the collector is off. Once it has loaded, every object that exists is
frozen (:func:`gc.freeze`): left out of every later collection, so the first requests do not pay
for walking them either. Then the collector is on again, for what the requests allocate. The
handful of cycles the init leaves behind stay in memory; they would have lived as long anyway.

This module imports nothing but the standard library: a handler imports it before anything else.
"""

from __future__ import annotations

import gc
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterator


@contextmanager
def loading() -> Iterator[None]:
    """Run a handler's imports and init with the collector off; freeze what they built.

    The collector is on again afterwards (if it was on before), even when the init raised. Only
    the first init of a process freezes.

    Examples
    --------
    >>> import gc
    >>> with loading():
    ...     gc.isenabled()
    False
    >>> gc.isenabled()
    True
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        # Once per process: a Lambda loads one handler. A process that loads handlers again and
        # again (the local stack's tests) would otherwise freeze the garbage each load left behind.
        if gc.get_freeze_count() == 0:
            gc.freeze()
        if was_enabled:
            gc.enable()
