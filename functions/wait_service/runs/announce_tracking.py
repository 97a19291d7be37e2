"""The runner's view of a fan-out: which sinks took each question, and why the ledger refused one."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from botocore.exceptions import ClientError

from agent_wait import BaseAnnounce, CompositeAnnounce
from agent_wait.aws import DynamoDbAnnounce
from agent_wait.errors import AnnounceError, QuestionCollisionError
from wait_service.observability import logger
from wait_service.runs.failures import is_infrastructure_failure
from wait_service.runs.run_outcome import _first_line

if TYPE_CHECKING:
    from collections.abc import Callable
    from concurrent.futures import Executor, Future

    from agent_wait import Envelope


class _Tracking(BaseAnnounce):
    """Announces through ``inner`` and remembers, per question, which sinks took it.

    A composite is tracked child by child, so the lifecycle shows each sink and the runner knows
    whether the ledger itself recorded the question. The ledger comes first: the other sinks
    (topic, outbox, Slack) hear of a question only once the ledger holds it, so nobody is told of
    a question the api cannot open. A question the ledger refuses for good (too large, a value it
    cannot store) is ``unrecordable``, with the reason; one it could not write this time (a
    throttle) reaches no other sink either, and the message is retried.
    """

    name = "tracking"

    def __init__(
        self,
        inner: BaseAnnounce,
        *,
        requested_by: str | None = None,
        arm: Callable[[Envelope], None] | None = None,
        pool: Executor | None = None,
    ) -> None:
        # Recorded on each question item the ledger sink writes: who started the run.
        self.extra = {"requested_by": requested_by} if requested_by is not None else None
        # With `arm` and `pool`: each question's timer is armed on the pool as soon as the ledger
        # holds it, at once with the other sinks, and `armed` waits for it.
        self._arm = arm
        self._pool = pool
        self._arming: dict[str, Future[None]] = {}
        self.published: list[Envelope] = []
        self.sinks: dict[str, dict[str, bool]] = {}
        self.recorded: dict[str, bool] = {}
        self.collisions: dict[str, QuestionCollisionError] = {}
        self.unrecordable: dict[str, str] = {}
        children = inner.children if isinstance(inner, CompositeAnnounce) else [inner]
        # Sinks run concurrently; the lifecycle lists them in the announcers' order.
        self.order = [child.name for child in children]
        self._ledger_sinks = {child.name for child in children if isinstance(child, DynamoDbAnnounce)}
        self._ledgers = [_Recorder(child, self) for child in children if isinstance(child, DynamoDbAnnounce)]
        others = [_Recorder(child, self) for child in children if not isinstance(child, DynamoDbAnnounce)]
        # The other sinks, concurrently, once the ledger holds the question.
        self.inner = CompositeAnnounce(others, name=inner.name) if others else None

    def deliver(self, envelope: Envelope) -> None:
        self.published.append(envelope)
        recorded = True
        for ledger in self._ledgers:
            recorded = ledger.announce(envelope) and recorded
        if recorded and self._arm is not None and self._pool is not None:
            self._arming[envelope.question_id] = self._pool.submit(self._arm, envelope)
        if recorded and self.inner is not None:
            self.inner.announce(envelope)

    def armed(self, envelope: Envelope) -> bool:
        """Wait for the timer armed for ``envelope`` at once with the sinks; raises what arming it
        raised. ``False`` when none was armed that way (no ledger record, or no pool)."""
        arming = self._arming.pop(envelope.question_id, None)
        if arming is None:
            return False
        arming.result()
        return True

    def note(self, sink: str, envelope: Envelope, ok: bool) -> None:
        self.sinks.setdefault(envelope.question_id, {})[sink] = ok
        if sink in self._ledger_sinks:
            self.recorded[envelope.question_id] = ok

    def delivered(self, question_id: str) -> bool:
        results = self.sinks.get(question_id, {})
        return bool(results) and all(results.values())

    def is_recorded(self, question_id: str) -> bool:
        # Without a ledger sink among the announcers (tests), nothing says it is missing.
        return self.recorded.get(question_id, not self._ledger_sinks)


class _Recorder(BaseAnnounce):
    def __init__(self, inner: BaseAnnounce, tracking: _Tracking) -> None:
        self.inner = inner
        self.name = inner.name
        self._tracking = tracking

    def deliver(self, envelope: Envelope) -> None:
        if isinstance(self.inner, DynamoDbAnnounce):
            # The ledger sink says when the id is taken by another question: a collision is not
            # a failure to retry, it is reported on the thread. Nor is a question the ledger
            # refuses for good (too large, a value it cannot store): retrying cannot change it.
            try:
                self.inner.record(envelope, extra=self._tracking.extra)
            except QuestionCollisionError as exc:
                self._tracking.collisions[envelope.question_id] = exc
                ok = False
            except Exception as exc:
                ok = False
                if is_infrastructure_failure(exc):
                    logger.warning(
                        "the ledger could not record the question; the message is retried",
                        extra={"question": envelope.question_id, "error": _first_line(exc)},
                    )
                else:
                    self._tracking.unrecordable[envelope.question_id] = _unrecordable(envelope, exc)
            else:
                ok = True
        else:
            ok = self.inner.announce(envelope)
        self._tracking.note(self.name, envelope, ok)
        if not ok:
            raise AnnounceError(f"{self.name} failed", question_id=envelope.question_id)


# DynamoDB's item size limit, named in the error of a question too large to record.
_ITEM_LIMIT = 400 * 1024


def _unrecordable(envelope: Envelope, exc: BaseException) -> str:
    """Why the ledger refused ``envelope``'s question, with the item's size in bytes."""
    from agent_wait.aws.dynamodb import ledger_put

    try:
        item = ledger_put("ledger", envelope)["Item"]
        size = sum(len(name.encode()) + len(json.dumps(value).encode()) for name, value in item.items())
    except Exception:
        size = len(envelope.to_json().encode())
    cause = _first_line(exc)
    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        cause = f"{error.get('Code', 'ClientError')}: {error.get('Message', '')}".strip()
    too_large = size > _ITEM_LIMIT or "size" in cause.lower()
    what = (
        f"too large ({size:,} bytes; a ledger item holds at most {_ITEM_LIMIT:,})"
        if too_large
        else (f"not storable ({size:,} bytes)")
    )
    return f"question {envelope.question_id} cannot be recorded in the ledger: {what}: {cause}"
