"""One printed line per thing that happens on the local stack.

The lines come from what the stack itself sees, never from the handlers' logs:

- ``run started`` / ``resuming``: the poller received a start or resume message from the inbox;
- ``poison``: the poller received a body that is no message at all (the runner consumes it);
- ``question raised``, ``run done``, ``run failed``: after a batch, the thread's ledger item says
  ``interrupted`` (with question ids not seen before), ``done`` or ``failed``;
- ``resumed``: a resume message was handled (and deleted from the inbox);
- each of these prints once: a replayed resume (refused by the runner) and a batch that leaves a
  thread as it was print nothing again;
- ``retrying``: a message failed and stays in the inbox for redelivery;
- ``dead-lettered``: a message failed its last receive (``maxReceiveCount``): the queue moves it
  to the DLQ instead of delivering it again;
- ``answered``: the gateway answered a ``POST /questions/{id}/reply`` with 202. The dispatcher
  may enqueue the resume (from the ledger's stream) before the gateway has answered, so the poller
  can receive it first: its ``resuming`` line waits (a few seconds at most) for the reply's exchange
  to end, and a thread's lines read in the order things happened;
- ``expired``, ``escalated``, ``reminded``: a question's timer fired and did that (``timer``
  lines say when it did nothing, or failed);
- ``event``: the dispatcher published a resolution event (``type=wait.answered`` ...
  ``thread.failed``) to the topic and the outbox, for a change of the ledger's stream; these lines
  end with ``function=<dispatcher function name>``.

Every line is one line: values are JSON on one line, cut to a length. The lines the runner's
work causes end with ``function=<runner function name>``, as a Lambda's log lines name it.
Tracebacks never come here: the stack sends the handlers' logs to a file.

Reading the ledger rather than the subscriber queue leaves that queue to the people and tests that
want to see the envelope as a subscriber does.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

    from agent_wait_cli.local.gateway import Exchange
    from wait_service.runs.sqs_events import BatchResult

ItemReader = Callable[[str], Mapping[str, Any] | None]
REPLY_PATH = re.compile(r"^/questions/(?P<question_id>[^/]+)/reply/?$")
MAX_VALUE_CHARS = 160
# How long a ``resuming`` line waits for the reply that sent it to be answered (and printed).
REPLY_WAIT_SECONDS = 5.0


def _now() -> datetime:
    return datetime.now(UTC)


def compact(value: Any, limit: int = MAX_VALUE_CHARS) -> str:
    """JSON on one line, cut to ``limit`` characters.

    Examples
    --------
    >>> compact({"b": 1, "a": [1, 2]})
    '{"b": 1, "a": [1, 2]}'
    >>> compact("x" * 10, limit=5)
    '"xxx…'
    """
    text = value if isinstance(value, str) and value.startswith(("{", "[")) else None
    if text is None:
        text = json.dumps(value, default=str, ensure_ascii=False)
    return cut(text, limit)


def cut(text: str, limit: int = MAX_VALUE_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def describe_question(question: Any) -> str:
    """``issue_refund(customer='c-17', amount=40)`` for a wait question, JSON for anything else.

    Examples
    --------
    >>> describe_question({"function": "issue_refund", "args": {"customer": "c-17", "amount": 40}})
    "issue_refund(customer='c-17', amount=40)"
    >>> describe_question("What is the order number?")
    '"What is the order number?"'
    """
    if isinstance(question, Mapping) and isinstance(question.get("function"), str):
        args = question.get("args") or {}
        if isinstance(args, Mapping):
            rendered = ", ".join(f"{key}={value!r}" for key, value in args.items())
            return cut(f"{question['function']}({rendered})")
    return compact(question)


class EventLog:
    """Turns what the gateway and the poller see into event lines.

    Parameters
    ----------
    write:
        Receives each line (``print`` with flush in the CLI, a list's ``append`` in tests).
    thread_item, question_item:
        Read the ledger's thread item by thread id and question item by question id.
    now:
        Clock for the line's time stamp.
    runner:
        The runner's function name, added to the lines of the runner's work.
    max_receive_count:
        The inbox's ``maxReceiveCount``: a message failing this receive is dead-lettered.

    Examples
    --------
    >>> lines: list[str] = []
    >>> clock = lambda: datetime(2026, 1, 1, tzinfo=UTC)
    >>> log = EventLog(lines.append, lambda t: None, lambda q: None, now=clock)
    >>> log.emit("run started", thread="t-1")
    >>> lines
    ['00:00:00  run started      thread=t-1']
    """

    def __init__(
        self,
        write: Callable[[str], None],
        thread_item: ItemReader,
        question_item: ItemReader,
        *,
        now: Callable[[], datetime] = _now,
        runner: str = "",
        max_receive_count: int | None = None,
    ) -> None:
        self._write = write
        self._runner = runner
        self._max_receive_count = max_receive_count
        self._thread_item = thread_item
        self._question_item = question_item
        self._now = now
        self._lock = threading.Lock()
        self._seen_questions: set[str] = set()
        # Each event prints once: a replayed resume the runner refuses, or a batch that leaves a
        # thread as it was, repeats none of the lines already printed.
        self._resuming: set[str] = set()
        self._resumed: set[str] = set()
        self._thread_states: dict[str, tuple[Any, ...]] = {}
        # Replies the api is handling, by question id: their resumes print after their answers.
        self._replying: dict[str, int] = {}
        self._replied = threading.Condition()

    def emit(self, what: str, **fields: str) -> None:
        parts = " ".join(f"{key}={_one_line(value)}" for key, value in fields.items() if value)
        line = f"{self._now():%H:%M:%S}  {what:<15}  {parts}".rstrip()
        with self._lock:
            self._write(line)

    def _runner_line(self, what: str, **fields: str) -> None:
        self.emit(what, **fields, function=self._runner)

    # -- the ledger's stream ------------------------------------------------------------------

    def published(self, records: list[dict[str, Any]], *, function: str = "") -> None:
        """After the dispatcher handled a batch of the ledger's stream: one ``event`` line per
        resolution event it published (``wait.answered`` ... ``thread.failed``), read from the same
        transitions the dispatcher reads."""
        from wait_service.stream.ledger_stream import LedgerChange
        from wait_service.stream.resolution_events import events_of

        for record in records:
            try:
                change = LedgerChange.from_record(record)
            except ValueError:
                continue
            for event in events_of(change):
                self.emit(
                    "event",
                    type=event.type,
                    thread=event.thread_id,
                    question=getattr(event, "question_id", None) or "",
                    dedupe_key=event.dedupe_key,
                    function=function,
                )

    # -- poller -------------------------------------------------------------------------------

    def received(self, messages: list[Any]) -> None:
        """Before the runner sees a batch: one line per message."""
        for message in messages:
            body = _body(message)
            if not isinstance(body.get("thread_id"), str):
                # Not a message the runner can run: it consumes it as poison.
                self._runner_line("poison", bytes=str(len(message.get("Body") or "")))
                continue
            thread_id = str(body.get("thread_id", "?"))
            if body.get("question_id"):
                question_id = str(body["question_id"])
                if question_id in self._resuming:
                    continue
                self._resuming.add(question_id)
                self._await_reply(question_id)
                self._runner_line("resuming", thread=thread_id, question=question_id)
            else:
                self._runner_line("run started", thread=thread_id, input=compact(body.get("input")))

    def batch_done(self, outcome: BatchResult) -> None:
        """After the runner handled a batch: resumes, failures and each thread's new state."""
        threads: list[str] = []
        for message in outcome.succeeded_messages():
            body = _body(message)
            if not isinstance(body.get("thread_id"), str):
                continue  # poison, already printed
            thread_id = str(body.get("thread_id", "?"))
            if body.get("question_id"):
                question_id = str(body["question_id"])
                if question_id not in self._resumed:
                    self._resumed.add(question_id)
                    self._runner_line("resumed", thread=thread_id, question=question_id)
            if thread_id not in threads:
                threads.append(thread_id)
        for message in outcome.failed_messages():
            body = _body(message)
            thread_id = str(body.get("thread_id", "?"))
            count = str((message.get("Attributes") or {}).get("ApproximateReceiveCount", "?"))
            reason = _describe(outcome.error) if outcome.error else "reported failed"
            last = (
                self._max_receive_count is not None
                and count.isdigit()
                and int(count) >= self._max_receive_count
            )
            self._runner_line(
                "dead-lettered" if last else "retrying",
                thread=thread_id,
                receive=count,
                error=compact(reason),
            )
            if last and thread_id not in threads:
                # The run ends here: its thread's last state (failed, from the runner) is a line too.
                threads.append(thread_id)
        for thread_id in threads:
            self._thread_state(thread_id)

    def _thread_state(self, thread_id: str) -> None:
        item = self._thread_item(thread_id)
        if item is None:
            return
        status = item.get("run_status")
        if status in ("done", "failed"):
            state = (status, item.get("updated_at"), compact(item.get("output")), compact(item.get("error")))
            if self._thread_states.get(thread_id) == state:
                return
            self._thread_states[thread_id] = state
        if status == "interrupted":
            for question_id in item.get("pending") or []:
                if question_id in self._seen_questions:
                    continue
                self._seen_questions.add(question_id)
                question = self._question_item(str(question_id)) or {}
                self._runner_line(
                    "question raised",
                    thread=thread_id,
                    question=str(question_id),
                    asks=describe_question(question.get("question")),
                )
        elif status == "done":
            self._runner_line("run done", thread=thread_id, output=compact(item.get("output")))
        elif status == "failed":
            self._runner_line("run failed", thread=thread_id, error=compact(item.get("error")))

    # -- clock --------------------------------------------------------------------------------

    def timer(self, timer: Any, result: Any) -> None:
        """After the clock fired a question timer: what it did to the question."""
        timer = timer if isinstance(timer, Mapping) else {}
        question_id = str(timer.get("question_id", "?"))
        if isinstance(result, Exception):
            self.emit(
                "timer failed", question=question_id, error=compact(f"{type(result).__name__}: {result}")
            )
            return
        outcome = str(result.get("outcome", "?")) if isinstance(result, Mapping) else "?"
        if outcome in ("expired", "escalated", "reminded"):
            question = self._question_item(question_id) or {}
            detail = {
                "expired": lambda: {"answer": compact(question.get("answer"))},
                "escalated": lambda: {"rung": str(question.get("escalation", "?"))},
                "reminded": lambda: {"reminder": str(timer.get("n", "?"))},
            }[outcome]()
            self.emit(outcome, thread=str(question.get("thread_id", "")), question=question_id, **detail)
        elif outcome not in ("decided", "closed", "stale"):
            self.emit("timer", question=question_id, outcome=outcome)

    # -- gateway ------------------------------------------------------------------------------

    def reply_started(self, method: str, path: str) -> None:
        """Before the api handles a request: a reply's resume waits for its ``answered`` line."""
        question_id = _reply_question(method, path)
        if question_id is not None:
            with self._replied:
                self._replying[question_id] = self._replying.get(question_id, 0) + 1

    def _await_reply(self, question_id: str) -> None:
        with self._replied:
            self._replied.wait_for(lambda: question_id not in self._replying, REPLY_WAIT_SECONDS)

    def _reply_ended(self, question_id: str) -> None:
        with self._replied:
            left = self._replying.get(question_id, 0) - 1
            if left > 0:
                self._replying[question_id] = left
            else:
                self._replying.pop(question_id, None)
            self._replied.notify_all()

    def exchange(self, exchange: Exchange) -> None:
        """After the gateway answered: a recorded reply is an ``answered`` line."""
        request = exchange.request
        question_id = _reply_question(request.method, request.target.split("?", 1)[0])
        if question_id is None:
            return
        try:
            if exchange.response.status == 202:
                self._answered(exchange, question_id)
        finally:
            self._reply_ended(question_id)

    def _answered(self, exchange: Exchange, question_id: str) -> None:
        request = exchange.request
        try:
            answer = json.loads(request.body or b"{}").get("answer")
        except (ValueError, AttributeError):
            answer = None
        question = self._question_item(question_id) or {}
        self.emit(
            "answered",
            thread=str(question.get("thread_id", "")),
            question=question_id,
            by=exchange.principal or "",
            answer=compact(answer),
        )


def _reply_question(method: str, path: str) -> str | None:
    """The question id of a ``POST /questions/{id}/reply``; ``None`` for any other request."""
    match = REPLY_PATH.match(path)
    return match.group("question_id") if match is not None and method.upper() == "POST" else None


def _describe(error: BaseException) -> str:
    """``Type: message`` of what failed; for a batch whose every record failed, the first record's."""
    children = getattr(error, "child_exceptions", None) or []
    if children and isinstance(children[0], tuple) and len(children[0]) > 1 and children[0][1] is not None:
        error = children[0][1]
    return f"{type(error).__name__}: {error}"


def _one_line(value: str) -> str:
    """A field value with its line breaks escaped, so an event is always one line."""
    return value.replace("\r", "\\r").replace("\n", "\\n")


def _body(message: Mapping[str, Any]) -> dict[str, Any]:
    try:
        body = json.loads(message.get("Body") or "{}")
    except (ValueError, RecursionError):
        # Not a message (the runner consumes it as poison): its line has no thread to name.
        return {}
    return body if isinstance(body, dict) else {}


def plain(value: Any) -> Any:
    """DynamoDB's ``Decimal`` numbers and sets as the JSON values they were written from.

    Examples
    --------
    >>> plain({"amount": Decimal("40"), "rate": Decimal("0.5"), "tags": {"a"}})
    {'amount': 40, 'rate': 0.5, 'tags': ['a']}
    """
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, Mapping):
        return {key: plain(item) for key, item in value.items()}
    if isinstance(value, list | set | tuple):
        return [plain(item) for item in value]
    return value


def ledger_readers(dynamodb: DynamoDBClient, table: str) -> tuple[ItemReader, ItemReader]:
    """Readers for the thread and question items of the ledger (``docs/internals.md``)."""
    from boto3.dynamodb.types import TypeDeserializer

    deserializer = TypeDeserializer()

    def read(key: str) -> Mapping[str, Any] | None:
        item = dynamodb.get_item(TableName=table, Key={"dedupe_key": {"S": key}}, ConsistentRead=True).get(
            "Item"
        )
        if item is None:
            return None
        return {name: plain(deserializer.deserialize(value)) for name, value in item.items()}

    return (
        lambda thread_id: read(f"thread:{thread_id}"),
        lambda question_id: read(f"wait.created:{question_id}"),
    )
