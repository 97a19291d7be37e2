"""BaseAnnounce, CompositeAnnounce (isolation, concurrency) and the reference InMemoryAnnounce."""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING

from agent_wait import BaseAnnounce, CompositeAnnounce, InMemoryAnnounce
from agent_wait.announce.base import announce_safely
from agent_wait.testing import AnnounceConformance, sample_envelope

if TYPE_CHECKING:
    import pytest

    from agent_wait import Envelope


class _Broken(BaseAnnounce):
    name = "broken"

    def __init__(self) -> None:
        self.attempts = 0

    def deliver(self, envelope: Envelope) -> None:
        self.attempts += 1
        raise ConnectionError("sink down")


class _RaisingAnnounce(InMemoryAnnounce):
    """Breaks the contract: its announce() itself raises."""

    def announce(self, envelope: Envelope) -> bool:
        raise RuntimeError("misbehaving child")


class TestInMemoryAnnounce(AnnounceConformance):
    """The reference implementation passes the suite."""

    def make_announce(self) -> InMemoryAnnounce:
        return InMemoryAnnounce()

    def delivered(self, announce: BaseAnnounce) -> list[Envelope]:
        assert isinstance(announce, InMemoryAnnounce)
        return announce.envelopes

    def make_broken(self) -> BaseAnnounce:
        return _Broken()


class TestCompositeAnnounce(AnnounceConformance):
    def make_announce(self) -> CompositeAnnounce:
        return CompositeAnnounce([InMemoryAnnounce(), InMemoryAnnounce()])

    def delivered(self, announce: BaseAnnounce) -> list[Envelope]:
        assert isinstance(announce, CompositeAnnounce)
        first, second = (
            child.envelopes for child in announce.children if isinstance(child, InMemoryAnnounce)
        )
        assert first == second
        return first

    def make_broken(self) -> BaseAnnounce:
        return CompositeAnnounce([InMemoryAnnounce(), _Broken()])


def test_one_failing_child_never_stops_the_others(caplog: pytest.LogCaptureFixture) -> None:
    """ "CompositeAnnounce (delivers to all children concurrently; one failing child never stops the
    others or the run)"."""
    before, after = InMemoryAnnounce(name="before"), InMemoryAnnounce(name="after")
    broken, raising = _Broken(), _RaisingAnnounce(name="raising")
    composite = CompositeAnnounce([before, broken, raising, after])
    envelope = sample_envelope()

    with caplog.at_level(logging.ERROR, logger="agent_wait"):
        assert composite.announce(envelope) is False

    assert before.envelopes == [envelope] and after.envelopes == [envelope]
    assert broken.attempts == 1
    messages = [r.getMessage() for r in caplog.records]
    assert any("broken" in m for m in messages) and any("raising" in m for m in messages)
    assert "2 of 4 announcers failed: broken, raising" in caplog.text


def test_children_are_delivered_concurrently() -> None:
    """Every child must be inside deliver() at the same time for the barrier to open."""
    barrier = threading.Barrier(3, timeout=10)

    class Rendezvous(InMemoryAnnounce):
        def deliver(self, envelope: Envelope) -> None:
            barrier.wait()
            super().deliver(envelope)

    children = [Rendezvous(name=f"c{i}") for i in range(3)]
    assert CompositeAnnounce(children).announce(sample_envelope()) is True
    assert all(len(child.envelopes) == 1 for child in children)


def test_empty_composite_delivers_nothing_and_succeeds() -> None:
    assert CompositeAnnounce([]).announce(sample_envelope()) is True


def test_base_announce_logs_with_the_question_and_thread(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.ERROR, logger="agent_wait"):
        assert _Broken()(sample_envelope("q-x", "t-x")) is False
    [record] = caplog.records
    assert (record.question_id, record.thread_id, record.announcer) == ("q-x", "t-x", "broken")  # type: ignore[attr-defined]
    assert record.exc_info is not None


def test_announce_safely_logs_a_raising_callable_and_never_raises(caplog: pytest.LogCaptureFixture) -> None:
    """The one "announce, log, never raise" piece publish_interrupts and async @wait share."""

    def explode(envelope: Envelope) -> None:
        raise ConnectionError("sink down")

    with caplog.at_level(logging.ERROR, logger="agent_wait"):
        assert announce_safely(explode, sample_envelope("q-s", "t-s")) is False
    [record] = caplog.records
    assert (record.question_id, record.thread_id) == ("q-s", "t-s")  # type: ignore[attr-defined]
    assert record.exc_info is not None


def test_announce_safely_reports_what_the_announcer_did() -> None:
    sink, seen = InMemoryAnnounce(), list[str]()
    assert announce_safely(sink, sample_envelope("q-ok")) is True
    assert announce_safely(_Broken(), sample_envelope("q-broken")) is False
    assert announce_safely(lambda e: seen.append(e.question_id), sample_envelope("q-plain")) is True
    assert [e.question_id for e in sink.envelopes] == ["q-ok"] and seen == ["q-plain"]
