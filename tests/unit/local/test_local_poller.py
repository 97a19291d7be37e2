"""The local event source mapping, against an in-memory SQS fake (no network)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest

from agent_wait_cli.local.poller import InboxPoller

if TYPE_CHECKING:
    from wait_service.runs.sqs_events import BatchResult


class FakeSqs:
    """Just enough of an SQS client: visible messages, receives and batch deletes."""

    def __init__(self, bodies: list[dict[str, Any]]) -> None:
        self.messages = [
            {
                "MessageId": f"m{i}",
                "ReceiptHandle": f"h{i}",
                "Body": json.dumps(body),
                "Attributes": {"ApproximateReceiveCount": "1", "MessageGroupId": body.get("thread_id", "g")},
            }
            for i, body in enumerate(bodies)
        ]
        self.receives: list[dict[str, Any]] = []
        self.deleted: list[str] = []

    def receive_message(self, **kwargs: Any) -> dict[str, Any]:
        self.receives.append(kwargs)
        batch = [m for m in self.messages if m["ReceiptHandle"] not in self.deleted][
            : kwargs["MaxNumberOfMessages"]
        ]
        return {"Messages": batch} if batch else {}

    def delete_message_batch(self, QueueUrl: str, Entries: list[dict[str, str]]) -> dict[str, Any]:  # noqa: N803
        self.deleted.extend(entry["ReceiptHandle"] for entry in Entries)
        return {"Successful": [{"Id": e["Id"]} for e in Entries], "Failed": []}


def _poller(sqs: FakeSqs, handler: Any, **kwargs: Any) -> InboxPoller:
    return InboxPoller(sqs, "url", "arn:aws:sqs:us-east-1:1:inbox.fifo", "us-east-1", handler, **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize("entry", [{"itemIdentifier": "zzz"}, {"itemIdentifier": ""}, {}])
def test_a_failure_naming_no_received_message_keeps_the_whole_batch(entry: dict[str, Any]) -> None:
    sqs = FakeSqs([{"thread_id": "t1"}, {"thread_id": "t2"}])

    outcome = _poller(sqs, lambda e, c: {"batchItemFailures": [entry]}).poll_once()

    # Lambda's rule: it cannot tell which message was meant, so it deletes none.
    assert outcome is not None and outcome.failed == ["m0", "m1"]
    assert sqs.deleted == []


def test_batch_is_one_sqs_event_and_successes_are_deleted() -> None:
    sqs = FakeSqs([{"thread_id": "t1", "input": {}}, {"thread_id": "t2", "input": {}}])
    events: list[dict[str, Any]] = []

    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        events.append(event)
        return {"batchItemFailures": [{"itemIdentifier": "m1"}]}

    outcome = _poller(sqs, handler).poll_once()

    assert outcome is not None
    assert [r["messageId"] for r in events[0]["Records"]] == ["m0", "m1"]
    assert events[0]["Records"][0]["eventSource"] == "aws:sqs"
    assert events[0]["Records"][0]["eventSourceARN"] == "arn:aws:sqs:us-east-1:1:inbox.fifo"
    assert sqs.deleted == ["h0"]
    assert outcome.failed == ["m1"]
    # Short polls only (the local moto serves one request at a time), the queue's own visibility.
    assert sqs.receives[0]["WaitTimeSeconds"] == 0
    assert "VisibilityTimeout" not in sqs.receives[0]
    assert sqs.receives[0]["MaxNumberOfMessages"] == 10


def test_raising_handler_returns_the_whole_batch() -> None:
    sqs = FakeSqs([{"thread_id": "t1"}, {"thread_id": "t2"}])

    def handler(event: dict[str, Any], context: Any) -> None:
        raise RuntimeError("graph crashed")

    outcome = _poller(sqs, handler).poll_once()

    assert outcome is not None and isinstance(outcome.error, RuntimeError)
    assert sqs.deleted == []
    assert len(outcome.failed) == 2


def test_empty_queue_gives_none_and_watchers_see_each_batch() -> None:
    sqs = FakeSqs([{"thread_id": "t1"}])
    received: list[list[Any]] = []
    batches: list[BatchResult] = []
    poller = _poller(sqs, lambda e, c: None, on_receive=received.append, on_batch=batches.append)

    first = poller.poll_once()
    second = poller.poll_once()

    assert first is not None and second is None
    assert len(received) == 1 and len(batches) == 1
    assert batches[0].succeeded == ["m0"]


def test_a_raising_watcher_never_stops_the_poller() -> None:
    sqs = FakeSqs([{"thread_id": "t1"}])

    def bad_watcher(value: Any) -> None:
        raise ValueError("watcher bug")

    outcome = _poller(sqs, lambda e, c: None, on_batch=bad_watcher).poll_once()

    assert outcome is not None and sqs.deleted == ["h0"]


def test_run_sleeps_between_empty_polls_and_stops() -> None:
    sqs = FakeSqs([])
    sleeps: list[float] = []
    poller: InboxPoller

    def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        if len(sleeps) == 3:
            poller.stop(timeout=0)

    poller = _poller(sqs, lambda e, c: None, sleep=sleep, idle_sleep=0.25)
    poller.run()

    assert sleeps == [0.25, 0.25, 0.25]
    assert len(sqs.receives) == 3


def test_batch_size_is_bounded_like_the_event_source_mapping() -> None:
    with pytest.raises(ValueError, match="batch_size"):
        _poller(FakeSqs([]), lambda e, c: None, batch_size=11)


def test_each_invocation_gets_a_fresh_context_and_empty_polls_build_none() -> None:
    sqs = FakeSqs([{"thread_id": "t1"}])
    made: list[object] = []
    seen: list[object] = []

    def make_context() -> object:
        made.append(object())
        return made[-1]

    poller = _poller(sqs, lambda e, c: seen.append(c), context_factory=make_context)
    poller.poll_once()
    poller.poll_once()

    assert len(made) == 1 and seen == made


class WakingSqs(FakeSqs):
    """Empty at first; ``send`` makes a message visible the way the local stack does (then wakes)."""

    def __init__(self) -> None:
        super().__init__([])
        self.on_receive: Any = None

    def receive_message(self, **kwargs: Any) -> dict[str, Any]:
        answer = super().receive_message(**kwargs)
        if self.on_receive is not None:
            self.on_receive(len(self.receives))
        return answer

    def send(self, body: dict[str, Any]) -> None:
        i = len(self.messages)
        self.messages.append(
            {
                "MessageId": f"m{i}",
                "ReceiptHandle": f"h{i}",
                "Body": json.dumps(body),
                "Attributes": {"ApproximateReceiveCount": "1", "MessageGroupId": "g"},
            }
        )


@pytest.mark.parametrize("during_receive", [False, True])
def test_wake_ends_the_idle_wait_so_a_sent_message_is_handled_at_once(during_receive: bool) -> None:
    # The idle wait is an hour: the message can only be handled within the bound below if the
    # wake-up ends it, including a wake-up that lands while the empty receive is still in flight.
    import threading

    sqs = WakingSqs()
    handled = threading.Event()
    poller = _poller(sqs, lambda e, c: handled.set(), idle_sleep=3600)
    first_receive_done = threading.Event()

    def on_receive(count: int) -> None:
        if count == 1:
            if during_receive:
                sqs.send({"thread_id": "t1"})
                poller.wake()
            first_receive_done.set()

    sqs.on_receive = on_receive
    poller.start()
    try:
        assert first_receive_done.wait(30)
        if not during_receive:
            sqs.send({"thread_id": "t1"})
            poller.wake()
        assert handled.wait(30)
    finally:
        poller.stop(timeout=30)
    assert sqs.deleted == ["h0"]
