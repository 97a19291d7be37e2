"""Many messages in few calls: SQS's ``SendMessageBatch`` and SNS's ``PublishBatch``, in order.

A batch call takes up to 10 messages of at most 256 KiB together, and costs one request per
64 KiB of payload instead of one per message. :func:`send_in_batches` packs a sequence of messages
into calls sent one after another, and stops at the first call that did not all go:
:class:`PartialDelivery` names every message not known to be delivered, and the caller sends them
again (a FIFO destination drops what it already took, by deduplication id).

Each message group (a thread: ``MessageGroupId``) keeps its order. SQS and SNS report each entry
of a batch on its own, so a group's later message could be taken while an earlier one failed; so a
call holds at most one message of a group, and a group's next message goes in a later call. A
message is sent only after every earlier message of its group was, and nothing is sent after a
failed call. Messages with no group (a standard topic's) go in the first call with room.

Examples
--------
>>> entries = [BatchEntry({"MessageBody": "a1"}, size=1, group="a"),
...            BatchEntry({"MessageBody": "a2"}, size=1, group="a"),
...            BatchEntry({"MessageBody": "b1"}, size=1, group="b")]
>>> calls(entries)
[[0, 2], [1]]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

__all__ = [
    "MAX_BATCH_BYTES",
    "MAX_BATCH_ENTRIES",
    "BatchEntry",
    "PartialDelivery",
    "calls",
    "send_in_batches",
]

# SQS's and SNS's limits on one batch call (SNS: the topic's default MaximumMessageSize).
MAX_BATCH_ENTRIES = 10
MAX_BATCH_BYTES = 256 * 1024


class PartialDelivery(Exception):
    """A batch delivery that stopped before delivering every message.

    ``undelivered`` are the positions (in the sequence given, ascending) of the messages not known
    to be delivered: those SQS or SNS refused, and those of the calls never sent. Every other
    message was delivered. ``errors`` are the failures as reported (``Code: Message``), or the
    exception the call raised.
    """

    def __init__(self, undelivered: Sequence[int], errors: Sequence[str]) -> None:
        self.undelivered = sorted(undelivered)
        self.errors = list(errors)
        super().__init__(f"{len(self.undelivered)} messages not delivered: " + "; ".join(self.errors))


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


def calls(entries: Sequence[BatchEntry]) -> list[list[int]]:
    """The batch calls for ``entries``, in the order to send them: each the positions it holds.

    A call holds at most 10 entries, at most 256 KiB of them (an entry larger than that alone), and
    at most one entry of a message group. Each entry goes into the first call with room that comes
    after the call of its group's previous entry (any call, for an entry with no group).
    """
    planned: list[list[int]] = []
    sizes: list[int] = []
    last: dict[str, int] = {}
    for position, entry in enumerate(entries):
        first = last[entry.group] + 1 if entry.group in last else 0
        for n in range(first, len(planned)):
            if len(planned[n]) < MAX_BATCH_ENTRIES and sizes[n] + entry.size <= MAX_BATCH_BYTES:
                break
        else:
            n = len(planned)
            planned.append([])
            sizes.append(0)
        planned[n].append(position)
        sizes[n] += entry.size
        if entry.group is not None:
            last[entry.group] = n
    return planned


def send_in_batches(entries: Sequence[BatchEntry], call: Callable[[list[Any]], Any]) -> None:
    """Send ``entries`` in batch requests (:func:`calls`) with ``call``, one after another.

    ``call`` gets a call's entries with their batch ``Id`` (the entry's place in the call) and
    returns the service's response (``Failed``: the entries that did not go).

    Raises :class:`PartialDelivery` at the first call that did not all go; no later call is sent.
    """
    planned = calls(entries)
    for n, positions in enumerate(planned):
        request: list[Any] = [{"Id": str(i), **entries[p].fields} for i, p in enumerate(positions)]
        later = [p for rest in planned[n + 1 :] for p in rest]
        try:
            response = call(request)
        except Exception as exc:
            raise PartialDelivery(positions + later, [f"{type(exc).__name__}: {exc}"]) from exc
        failed = (response or {}).get("Failed") or []
        if failed:
            raise PartialDelivery(
                [positions[int(f["Id"])] for f in failed] + later,
                [f"{f.get('Code', 'Failed')}: {f.get('Message', '')}" for f in failed],
            )
