"""Many messages in few calls: SQS's ``SendMessageBatch`` and SNS's ``PublishBatch``, in order.

A batch call takes up to 10 messages of at most 256 KiB together, and costs one request per
64 KiB of payload instead of one per message. :func:`send_in_batches` cuts a sequence of messages
into consecutive runs, one call each, sent one after another, and stops at the first run that
did not all go: every message before the one :class:`PartialDelivery` names was delivered, and
the caller sends again from there (a FIFO destination drops what it already took, by
deduplication id).

A run holds at most one message of each message group. SQS and SNS report each entry of a batch
on its own, so a later entry of a group could be taken while an earlier one of the same group
failed; with one entry per group in a call, and no call after a failed one, a group's messages
arrive in the order given, as when they were sent one by one.

Examples
--------
>>> entries = [BatchEntry({"MessageBody": "a"}, size=1, group="t-1"),
...            BatchEntry({"MessageBody": "b"}, size=1, group="t-1"),
...            BatchEntry({"MessageBody": "c"}, size=1, group="t-2")]
>>> [(start, len(run)) for start, run in runs(entries)]
[(0, 1), (1, 2)]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping, Sequence

__all__ = ["MAX_BATCH_BYTES", "MAX_BATCH_ENTRIES", "BatchEntry", "PartialDelivery", "runs", "send_in_batches"]

# SQS's and SNS's limits on one batch call (SNS: the topic's default MaximumMessageSize).
MAX_BATCH_ENTRIES = 10
MAX_BATCH_BYTES = 256 * 1024


class PartialDelivery(Exception):
    """A batch delivery stopped at ``first_failed``: every message before it was delivered.

    From ``first_failed`` on, some messages may have been delivered and some not; ``errors`` are
    the failures as SQS or SNS reported them (``Code: Message``), or the exception the call
    raised.
    """

    def __init__(self, first_failed: int, errors: Sequence[str]) -> None:
        self.first_failed = first_failed
        self.errors = list(errors)
        super().__init__(
            f"messages from position {first_failed} on not all delivered: " + "; ".join(self.errors)
        )


@dataclass(frozen=True)
class BatchEntry:
    """One message of a batch call: its request fields (without ``Id``), size and message group."""

    fields: Mapping[str, Any]
    size: int
    group: str | None = None

    @classmethod
    def of(cls, fields: Mapping[str, Any], body: str) -> BatchEntry:
        """The entry of a message whose text is ``fields[body]`` (``MessageBody``, ``Message``)."""
        size = len(str(fields[body]).encode()) + attributes_size(fields.get("MessageAttributes"))
        return cls(fields, size, fields.get("MessageGroupId"))


def attributes_size(attributes: Mapping[str, Any] | None) -> int:
    """Bytes message attributes count towards SQS's and SNS's size limits (name, type, value)."""
    total = 0
    for name, value in (attributes or {}).items():
        total += len(name.encode()) + len(str(value.get("DataType", "")).encode())
        total += len(str(value.get("StringValue", "")).encode()) + len(value.get("BinaryValue", b""))
    return total


def runs(entries: Sequence[BatchEntry]) -> Iterator[tuple[int, list[BatchEntry]]]:
    """Consecutive runs of ``entries``, each ``(position of its first, its entries)``: one call each.

    A run ends before an entry that would make it 11 entries, take it past 256 KiB, or hold a
    second entry of one message group. An entry larger than 256 KiB on its own is a run of its
    own (the service refuses it as it would refuse it alone).
    """
    start, size = 0, 0
    run: list[BatchEntry] = []
    groups: set[str] = set()
    for position, entry in enumerate(entries):
        full = len(run) == MAX_BATCH_ENTRIES or size + entry.size > MAX_BATCH_BYTES
        if run and (full or (entry.group is not None and entry.group in groups)):
            yield start, run
            start, run, size, groups = position, [], 0, set()
        run.append(entry)
        size += entry.size
        if entry.group is not None:
            groups.add(entry.group)
    if run:
        yield start, run


def send_in_batches(entries: Sequence[BatchEntry], call: Callable[[list[Any]], Any]) -> None:
    """Send ``entries`` run by run (:func:`runs`) with ``call``, one batch request a run.

    ``call`` gets the run's entries with their batch ``Id`` (the entry's position in the run) and
    returns the service's response (``Failed``: the entries that did not go).

    Raises :class:`PartialDelivery` at the first run that did not all go; no later run is sent.
    """
    for start, run in runs(entries):
        request: list[Any] = [{"Id": str(n), **entry.fields} for n, entry in enumerate(run)]
        try:
            response = call(request)
        except Exception as exc:
            raise PartialDelivery(start, [f"{type(exc).__name__}: {exc}"]) from exc
        failed = (response or {}).get("Failed") or []
        if failed:
            first = min(int(f["Id"]) for f in failed)
            raise PartialDelivery(
                start + first, [f"{f.get('Code', 'Failed')}: {f.get('Message', '')}" for f in failed]
            )
