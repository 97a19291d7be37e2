"""A handler's init runs with the garbage collector off, and what it built is frozen."""

from __future__ import annotations

import gc
from typing import TYPE_CHECKING

import pytest

from wait_service.init_phase import loading

if TYPE_CHECKING:
    from collections.abc import Iterator


@pytest.fixture(autouse=True)
def _collector_as_found() -> Iterator[None]:
    enabled = gc.isenabled()
    yield
    gc.unfreeze()
    if enabled:
        gc.enable()
    else:
        gc.disable()


class Built:
    """A container the collector tracks."""


def test_the_collector_is_off_while_loading_and_on_after() -> None:
    gc.enable()
    with loading():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_what_the_init_built_is_frozen_out_of_later_collections() -> None:
    gc.enable()
    gc.unfreeze()
    with loading():
        built = [Built() for _ in range(1000)]
    assert gc.get_freeze_count() >= len(built)
    # A full collection no longer walks them: none of them is in any generation it looks at.
    assert not any(obj is built for obj in gc.get_objects())


def test_only_the_first_init_of_a_process_freezes() -> None:
    gc.unfreeze()
    with loading():
        first = [Built() for _ in range(100)]
    with loading():
        later = [Built() for _ in range(100)]
    assert not any(obj is first for obj in gc.get_objects())
    # A process that loads again (the local stack's tests) leaves the later loads to the collector.
    assert any(obj is later for obj in gc.get_objects())


def test_an_init_that_raises_leaves_the_collector_on() -> None:
    gc.enable()
    with pytest.raises(RuntimeError, match="bad setting"), loading():
        raise RuntimeError("bad setting")
    assert gc.isenabled()


def test_a_collector_turned_off_before_stays_off() -> None:
    gc.disable()
    with loading():
        pass
    assert not gc.isenabled()
