"""Idempotent run starts: ``POST /threads/{thread_id}/runs`` with an ``Idempotency-Key`` header.

A client that retries a start (a timeout, a lost response) sends the same ``Idempotency-Key``; the
first request's response is recorded and any repeat within 24 hours gets it back without starting
another run. The same key with a different body is a client bug: 422 ``idempotency_conflict``.
While the first request is still being handled, a repeat gets 409 ``idempotency_in_progress``.

The records are Powertools idempotency records in the ledger table (partition key ``dedupe_key``,
``run-start#<hash of thread id and key>``), expired by the ledger's TTL attribute: they carry no
``created_at``, so the ledger's indexes never list them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agent_wait.errors import IdempotencyConflictError, IdempotencyInProgressError
from wait_service.runs.starts import RunQueued

if TYPE_CHECKING:
    from collections.abc import Callable

    from aws_lambda_powertools.utilities.idempotency import IdempotencyConfig
    from mypy_boto3_dynamodb import DynamoDBClient
    from pydantic import JsonValue

    from wait_service.resources import TableSpec
    from wait_service.runs.starts import RunService

IDEMPOTENCY_HEADER = "Idempotency-Key"
# Printable ASCII without spaces, as in the IETF Idempotency-Key draft's examples.
IDEMPOTENCY_KEY_PATTERN = r"^[\x21-\x7e]{1,255}$"
IDEMPOTENCY_TTL_SECONDS = 24 * 3600
KEY_PREFIX = "run-start"


class IdempotentStarts:
    """:class:`RunService` starts, replayed for a repeated ``Idempotency-Key``.

    Parameters
    ----------
    runs:
        Starts the run the first time.
    table_name, table:
        The ledger table and its spec (key and TTL attribute names; ``None``: the ledger's).
    dynamodb:
        Client for the records (``None``: a default one).

    Examples
    --------
    >>> starts = IdempotentStarts(runs, "ledger", LEDGER)  # doctest: +SKIP
    >>> starts.start("t-1", {"customer": "c-17", "amount": 40}, key="retry-1")  # doctest: +SKIP
    RunQueued(thread_id='t-1', status='queued')
    """

    def __init__(
        self,
        runs: RunService,
        table_name: str,
        table: TableSpec | None = None,
        dynamodb: DynamoDBClient | None = None,
    ) -> None:
        self.runs = runs
        self._table_name = table_name
        self._table = table
        self._dynamodb = dynamodb
        # Built at the first request with a key: Powertools' idempotency stays out of the api's init.
        self._config: IdempotencyConfig | None = None
        self._start_once: Callable[..., dict[str, Any]] | None = None

    @property
    def config(self) -> IdempotencyConfig:
        if self._config is None:
            self._build()
        assert self._config is not None
        return self._config

    def _build(self) -> Callable[..., dict[str, Any]]:
        from aws_lambda_powertools.utilities.idempotency import (
            DynamoDBPersistenceLayer,
            IdempotencyConfig,
            idempotent_function,
        )

        table = self._table
        if table is None:
            from wait_service.resources import LEDGER

            table = LEDGER
        self._config = config = IdempotencyConfig(
            event_key_jmespath="[thread_id, key]",
            payload_validation_jmespath="input",
            expires_after_seconds=IDEMPOTENCY_TTL_SECONDS,
        )
        persistence = DynamoDBPersistenceLayer(
            self._table_name,
            key_attr=table.partition_key,
            expiry_attr=table.ttl_attribute or "expiration",
            # The ledger's own `status` feeds its by-status index: keep out of it.
            status_attr="idempotency_status",
            in_progress_expiry_attr="idempotency_in_progress_until",
            data_attr="idempotency_response",
            validation_key_attr="idempotency_body_hash",
            boto3_client=self._dynamodb,
        )

        @idempotent_function(
            data_keyword_argument="request",
            persistence_store=persistence,
            config=config,
            key_prefix=KEY_PREFIX,
        )
        def start_once(request: dict[str, Any]) -> dict[str, Any]:
            queued = self.runs.start(
                request["thread_id"], request["input"], started_by=request.get("started_by")
            )
            return {"thread_id": queued.thread_id, "status": queued.status}

        self._start_once = start_once
        return start_once

    def start(
        self,
        thread_id: str,
        input: JsonValue,
        *,
        key: str | None,
        context: Any = None,
        started_by: str | None = None,
    ) -> RunQueued:
        """Start a run; with ``key``, at most once per thread and key within 24 hours.

        ``started_by`` (the caller) is recorded with the run, as :meth:`RunService.start` records it.

        Raises
        ------
        agent_wait.errors.IdempotencyConflictError
            ``key`` was used on this thread with a different input.
        agent_wait.errors.IdempotencyInProgressError
            A request with ``key`` is still being handled.
        agent_wait.errors.ThreadBusyError
            As :meth:`RunService.start`; nothing is recorded, so a retry with the key starts.
        """
        if key is None:
            return self.runs.start(thread_id, input, started_by=started_by)
        from aws_lambda_powertools.utilities.idempotency.exceptions import (
            IdempotencyAlreadyInProgressError,
            IdempotencyValidationError,
        )

        start_once = self._start_once or self._build()
        if context is not None and hasattr(context, "get_remaining_time_in_millis"):
            # A request cut short by the Lambda timeout frees its key instead of holding it 24 h.
            self.config.register_lambda_context(context)
        try:
            request = {"thread_id": thread_id, "key": key, "input": input}
            if started_by is not None:
                request["started_by"] = started_by
            recorded = start_once(request=request)
        except IdempotencyValidationError as exc:
            raise IdempotencyConflictError(
                f"{IDEMPOTENCY_HEADER} {key!r} was used with a different body on this thread",
                thread_id=thread_id,
            ) from exc
        except IdempotencyAlreadyInProgressError as exc:
            raise IdempotencyInProgressError(
                f"a request with {IDEMPOTENCY_HEADER} {key!r} is still being handled; retry shortly",
                thread_id=thread_id,
            ) from exc
        return RunQueued(thread_id=recorded["thread_id"])
