"""Policies as config: a per-function override of the policy in the agent's code, changed without a deploy.

The store is one DynamoDB table (``wait_service.resources.POLICIES``): the partition is the
function's name (the ``function`` of its questions), the sort key its version, zero-padded. A set
writes version ``n + 1`` with a conditional put, so two sets made from the same version cannot
both win (the loser gets :class:`PolicyConflictError`, 409), and every earlier version stays as
the history of who set what, when.

An override names only the fields it changes; the fields it may name are the :class:`Policy`
model's own, minus :data:`FIXED_BY_CODE` (what the code reads back from the answer, and whether an
answer is bound to its proposal). A new field of the model is overridable the day it exists.

When the runner raises a question, :class:`PolicyOverrides` merges the function's current override
into the code's policy; the question records the version (``policy_version``), which its digest
covers. A question already in the ledger keeps the policy it was raised under.

Examples
--------
>>> check_override({"ttl": 600, "responders": ["ann"]})
{'ttl': 600, 'responders': ['ann']}
>>> from agent_wait.policy import approval
>>> merge(approval(ttl=3600), {"ttl": 600}).ttl
600
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, get_args

from aws_lambda_powertools.metrics import MetricUnit
from botocore.exceptions import ClientError
from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from agent_wait.errors import AgentWaitError, InvalidRequestError
from agent_wait.policy import Policy, PolicyKind
from wait_service.clients import CLIENT_CONFIG
from wait_service.metric_names import POLICY_OVERRIDES_REFUSED, POLICY_STORE_UNREADABLE
from wait_service.observability import logger, metrics

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

    from agent_wait.envelope import Question
    from wait_service.ledger import QuestionRecord

__all__ = [
    "CACHE_SECONDS",
    "FIXED_BY_CODE",
    "PolicyConflictError",
    "PolicyInvalidError",
    "PolicyOverrides",
    "PolicyStore",
    "StoredPolicy",
    "check_override",
    "merge",
    "overridable_fields",
]

# What the code reads back from an answer (its kind and options), and whether an answer must be
# bound to the exact proposal: config may not change what the code expects nor weaken the binding.
FIXED_BY_CODE = frozenset({"kind", "options", "bind"})
# How long the runner keeps a function's override before reading it again: a set reaches new
# questions within this many seconds, and a burst of questions costs one read per function.
CACHE_SECONDS = 30.0
# Sort keys compare as strings: ten digits keep versions in order.
_VERSION_DIGITS = 10


class PolicyInvalidError(InvalidRequestError):
    """An override that does not fit the policy model; ``field`` is ``policy.<name>`` (422)."""

    code = "invalid_policy"


class PolicyConflictError(AgentWaitError):
    """Another set wrote the version this one meant to write (409): read again, then set."""

    code = "policy_conflict"

    def __init__(self, message: str, *, current_version: int | None) -> None:
        super().__init__(message)
        self.current_version = current_version


def overridable_fields() -> tuple[str, ...]:
    """The policy fields an override may set: the model's own, minus :data:`FIXED_BY_CODE`.

    Examples
    --------
    >>> {"ttl", "responders", "on_expiry", "reminders"} <= set(overridable_fields())
    True
    >>> "kind" in overridable_fields()
    False
    """
    return tuple(name for name in Policy.model_fields if name not in FIXED_BY_CODE)


def _override_model() -> type[BaseModel]:
    # Each field as the policy declares it (type, constraints, default), none of its cross-field
    # rules: those are checked once the override is merged into a whole policy.
    fields: dict[str, Any] = {
        name: (info.annotation, info)
        for name, info in Policy.model_fields.items()
        if name not in FIXED_BY_CODE
    }
    return create_model("PolicyOverride", __config__=ConfigDict(extra="forbid"), **fields)


_OVERRIDE = _override_model()
# Whole policies an override is tried on at set time (the code's own is known only at raise time).
_BASES: tuple[dict[str, Any], ...] = tuple(
    {"kind": kind, **({"options": ["a", "b"]} if kind == "decision" else {})} for kind in get_args(PolicyKind)
)


def check_override(override: Any) -> dict[str, Any]:
    """Validate an override; returns it as JSON. Raises :class:`PolicyInvalidError` naming the field.

    Each field is checked as the :class:`Policy` model declares it; then the override must make a
    valid policy of at least one kind (a default answer fits some kind, reminders come before the
    ttl). Against the code's own policy it is checked again when a question is raised.

    Examples
    --------
    >>> try:
    ...     check_override({"ttl": 0})
    ... except PolicyInvalidError as exc:
    ...     print(exc.field)
    policy.ttl
    >>> try:
    ...     check_override({"kind": "text"})
    ... except PolicyInvalidError as exc:
    ...     print(exc.message.split(";")[0])
    policy.kind: fixed by the agent's code
    """
    if not isinstance(override, Mapping):
        raise PolicyInvalidError("policy: an override is a JSON object of policy fields", field="policy")
    try:
        checked = _OVERRIDE.model_validate(dict(override))
    except ValidationError as exc:
        first = exc.errors()[0]
        path = ".".join(str(part) for part in first["loc"])
        field = f"policy.{path}" if path else "policy"
        name = str(first["loc"][0]) if first["loc"] else ""
        if first["type"] == "extra_forbidden":
            why = "fixed by the agent's code" if name in FIXED_BY_CODE else "not a policy field"
            message = f"{field}: {why}; an override may set only: {', '.join(overridable_fields())}"
        else:
            message = f"{field}: {first['msg']}"
        raise PolicyInvalidError(message, field=field) from None
    plain = checked.model_dump(mode="json", exclude_unset=True)
    problem: str | None = None
    for base in _BASES:
        try:
            Policy.model_validate(base | plain)
        except ValidationError as exc:
            problem = problem or _message(exc)
        else:
            return plain
    raise PolicyInvalidError(f"policy: {problem}", field="policy")


def _message(exc: ValidationError) -> str:
    first = exc.errors()[0]
    return str(first["msg"]).removeprefix("Value error, ")


def merge(policy: Policy, override: Mapping[str, Any]) -> Policy:
    """The code's ``policy`` with ``override``'s fields in place of its own (validated as a whole).

    Examples
    --------
    >>> from agent_wait.policy import approval
    >>> merge(approval(ttl=3600, responders=["ann"]), {"responders": ["bob"]}).model_dump()["responders"]
    ['bob']
    """
    return Policy.model_validate(policy.model_dump(mode="json") | dict(override))


@dataclass(frozen=True)
class StoredPolicy:
    """One version of a function's override, as the store holds it."""

    function: str
    version: int
    policy: dict[str, Any]
    set_by: str
    set_at: str

    def to_json(self) -> dict[str, Any]:
        return {
            "function": self.function,
            "version": self.version,
            "policy": self.policy,
            "set_by": self.set_by,
            "set_at": self.set_at,
        }


def _version_key(version: int) -> str:
    return f"{version:0{_VERSION_DIGITS}d}"


def _stored(item: Mapping[str, Any]) -> StoredPolicy:
    return StoredPolicy(
        function=item["function_name"]["S"],
        version=int(item["version"]["S"]),
        policy=json.loads(item["policy"]["S"]),
        set_by=item.get("set_by", {}).get("S", ""),
        set_at=item.get("set_at", {}).get("S", ""),
    )


class PolicyStore:
    """The overrides table: read the current version, list, set a new version.

    Parameters
    ----------
    table_name:
        The table (``<stack>-Policies...`` deployed, ``<prefix>policies`` locally).
    client:
        A boto3 DynamoDB client; ``boto3.client("dynamodb")`` when ``None``.

    Examples
    --------
    >>> store = PolicyStore("agent-wait-policies")  # doctest: +SKIP
    >>> store.set("issue_refund", {"ttl": 600}, set_by="ann", set_at="...").version  # doctest: +SKIP
    1
    """

    def __init__(self, table_name: str, client: DynamoDBClient | None = None) -> None:
        if client is None:
            import boto3

            client = boto3.client("dynamodb", config=CLIENT_CONFIG)
        self.table_name = table_name
        self.client = client

    def current(self, function: str, *, consistent: bool = False) -> StoredPolicy | None:
        """The latest version of ``function``'s override; ``None`` when it has none."""
        found = self.client.query(
            TableName=self.table_name,
            KeyConditionExpression="function_name = :f",
            ExpressionAttributeValues={":f": {"S": function}},
            ScanIndexForward=False,
            Limit=1,
            ConsistentRead=consistent,
        )
        items = found.get("Items") or []
        return _stored(items[0]) if items else None

    def history(self, function: str) -> list[StoredPolicy]:
        """Every version of ``function``'s override, the oldest first."""
        versions: list[StoredPolicy] = []
        kwargs: dict[str, Any] = {
            "TableName": self.table_name,
            "KeyConditionExpression": "function_name = :f",
            "ExpressionAttributeValues": {":f": {"S": function}},
            "ConsistentRead": True,
        }
        while True:
            page = self.client.query(**kwargs)
            versions += [_stored(item) for item in page.get("Items") or []]
            if "LastEvaluatedKey" not in page:
                return versions
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def list(self) -> list[StoredPolicy]:
        """The current version of every function's override, by function name."""
        latest: dict[str, StoredPolicy] = {}
        kwargs: dict[str, Any] = {"TableName": self.table_name, "ConsistentRead": True}
        while True:
            page = self.client.scan(**kwargs)
            for item in page.get("Items") or []:
                stored = _stored(item)
                if stored.function not in latest or latest[stored.function].version < stored.version:
                    latest[stored.function] = stored
            if "LastEvaluatedKey" not in page:
                return [latest[name] for name in sorted(latest)]
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def set(
        self,
        function: str,
        override: Any,
        *,
        set_by: str,
        set_at: str,
        expected_version: int | None = None,
    ) -> StoredPolicy:
        """Validate ``override`` and write it as ``function``'s next version.

        ``expected_version`` is the version the caller read (0: none yet); ``None`` takes the
        current one. Either way the write is conditional on its version being free, so of two sets
        made from the same version one wins and the other raises :class:`PolicyConflictError`.
        Raises :class:`PolicyInvalidError` (nothing written) for an invalid override.
        """
        if not function or len(function) > 256:
            raise PolicyInvalidError("the function name must be 1 to 256 characters", field="function")
        checked = check_override(override)
        current = self.current(function, consistent=True)
        current_version = current.version if current is not None else 0
        if expected_version is not None and expected_version != current_version:
            raise PolicyConflictError(
                f"{function}'s policy is at version {current_version}, not {expected_version}: "
                "show it again, then set",
                current_version=current_version,
            )
        stored = StoredPolicy(
            function=function,
            version=current_version + 1,
            policy=checked,
            set_by=set_by,
            set_at=set_at,
        )
        try:
            self.client.put_item(
                TableName=self.table_name,
                Item={
                    "function_name": {"S": function},
                    "version": {"S": _version_key(stored.version)},
                    "policy": {"S": json.dumps(checked, sort_keys=True, separators=(",", ":"))},
                    "set_by": {"S": set_by},
                    "set_at": {"S": set_at},
                },
                ConditionExpression="attribute_not_exists(function_name)",
            )
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise
            raise PolicyConflictError(
                f"{function}'s policy version {stored.version} was set by someone else meanwhile: "
                "show it again, then set",
                current_version=stored.version,
            ) from None
        logger.info("policy set", extra={"function": function, "version": stored.version, "set_by": set_by})
        return stored


class PolicyOverrides:
    """The runner's view of the store: each question raised gets its function's current override.

    Called with a :class:`~agent_wait.envelope.Question` (``publish_interrupts(override=...)``,
    ``AsyncHost.override``), it returns the question to publish:

    - a question that names no function, or whose function has no override: as it is (its digest
      is the one it always had);
    - a question the ledger already holds (a redelivery republishing it): with the policy and
      version it was raised under, so it keeps its policy and its digest;
    - otherwise: the code's policy merged with the override, ``policy_version`` set.

    The store being unreadable never blocks a question: the last version read is used if there is
    one, else the code's policy, with a warning and the ``PolicyStoreUnreadable`` metric. An
    override that does not fit the code's policy (a default answer of another kind, reminders past
    the code's ttl) is not applied: warning and ``PolicyOverridesRefused``.

    Parameters
    ----------
    store:
        The overrides table.
    find_question:
        Reads a question from the ledger (``Ledger.find_question``).
    cache_seconds:
        How long a read is kept (:data:`CACHE_SECONDS`).
    monotonic:
        The clock of the cache (tests).
    """

    def __init__(
        self,
        store: PolicyStore,
        find_question: Callable[[str], QuestionRecord | None],
        *,
        cache_seconds: float = CACHE_SECONDS,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store = store
        self.find_question = find_question
        self.cache_seconds = cache_seconds
        self._monotonic = monotonic
        self._cache: dict[str, tuple[float, StoredPolicy | None]] = {}
        self._lock = threading.Lock()

    def __call__(self, question: Question) -> Question:
        function = _function_of(question.question)
        if function is None:
            return question
        override = self._current(function)
        if override is None:
            return question
        standing = self.find_question(question.question_id)
        if standing is not None:
            return _as_raised(question, standing)
        try:
            policy = merge(question.policy, override.policy)
        except ValidationError as exc:
            logger.warning(
                "policy override does not fit the code's policy; the question keeps the code's",
                extra={"function": function, "version": override.version, "error": _message(exc)},
            )
            metrics.add_metric(name=POLICY_OVERRIDES_REFUSED, unit=MetricUnit.Count, value=1)
            return question
        return question.model_copy(update={"policy": policy, "policy_version": override.version})

    def _current(self, function: str) -> StoredPolicy | None:
        now = self._monotonic()
        with self._lock:
            cached = self._cache.get(function)
        if cached is not None and now - cached[0] < self.cache_seconds:
            return cached[1]
        try:
            stored = self.store.current(function)
        except Exception as exc:
            # Never block a question on the store: the last version read, else the code's policy.
            fallback = cached[1] if cached is not None else None
            logger.warning(
                "policy store unreadable; the question is raised under "
                + (f"the last version read ({fallback.version})" if fallback else "the code's policy"),
                extra={"function": function, "error": str(exc).splitlines()[0] if str(exc) else repr(exc)},
            )
            metrics.add_metric(name=POLICY_STORE_UNREADABLE, unit=MetricUnit.Count, value=1)
            return fallback
        with self._lock:
            self._cache[function] = (now, stored)
        return stored


def _function_of(question: Any) -> str | None:
    if isinstance(question, Mapping):
        function = question.get("function")
        if isinstance(function, str) and function:
            return function
    return None


def _as_raised(question: Question, standing: QuestionRecord) -> Question:
    try:
        policy = Policy.model_validate(standing.policy)
    except ValidationError:
        return question
    return question.model_copy(update={"policy": policy, "policy_version": standing.policy_version})
