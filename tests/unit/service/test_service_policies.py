"""The policy store: validated, versioned overrides per function, applied when a question is raised.

Seed 003: an approval is bound to "the exact proposal" it was shown; the digest binds the policy
too, so a question records the policy version it was raised under and keeps it.
"""

from __future__ import annotations

import json
import logging
import threading
from typing import TYPE_CHECKING, Any

import boto3
import pytest
from botocore.exceptions import ClientError
from langgraph.checkpoint.memory import InMemorySaver
from moto import mock_aws

from agent_wait.envelope import digest_of
from agent_wait.policy import Policy
from wait_service.answers.policy_store import (
    CACHE_SECONDS,
    FIXED_BY_CODE,
    PolicyConflictError,
    PolicyInvalidError,
    PolicyOverrides,
    PolicyStore,
    check_override,
    overridable_fields,
)
from wait_service.http.api import QuestionView
from wait_service.http.errors_http import status_for
from wait_service.ledger import Ledger
from wait_service.observability import metrics
from wait_service.resources import POLICIES, create_table
from wait_service.runs.inbox import StartMessage
from wait_service.runs.runner import RunnerService, build_policy_overrides, build_runner

if TYPE_CHECKING:
    from collections.abc import Iterator

    from service_events import Aws, FakeClock

REFUND = {"customer": "c-17", "amount": 40}
FUNCTION = "issue_refund"
AT = "2026-12-01T10:00:00Z"


@pytest.fixture(autouse=True)
def fresh_metrics() -> Iterator[None]:
    metrics.clear_metrics()
    yield
    metrics.clear_metrics()


def metric(name: str) -> float:
    return float(sum(metrics.metric_set.get(name, {}).get("Value", [])))


@pytest.fixture
def store(aws: Aws) -> PolicyStore:
    assert aws.resources.policy_table is not None
    return PolicyStore(aws.resources.policy_table, aws.dynamodb)


@pytest.fixture
def lone_store() -> Iterator[PolicyStore]:
    """The store's table alone (no runner, no ledger): the store's own tests stay fast."""
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        yield PolicyStore(create_table(client, POLICIES, "u-policies"), client)


@pytest.fixture
def ledger(aws: Aws, clock: FakeClock) -> Ledger:
    return Ledger(aws.resources.ledger_table, aws.dynamodb, clock=clock)


def make_runner(aws: Aws, clock: FakeClock, policies: Any = None) -> RunnerService:
    runner = build_runner(
        aws.settings,
        dynamodb=aws.dynamodb,
        sns=aws.sns,
        sqs=aws.sqs,
        checkpointer=InMemorySaver(),
        clock=clock,
    )
    if policies is not None:
        runner.policies = policies
    return runner


def no_cache(store: PolicyStore, ledger: Ledger) -> PolicyOverrides:
    return PolicyOverrides(store, ledger.find_question, cache_seconds=0)


def park(runner: RunnerService, thread_id: str, run_id: str | None = None) -> str:
    [question_id] = runner.run(StartMessage(thread_id=thread_id, input=REFUND, run_id=run_id)).pending
    return question_id


# -- validation: derived from the policy model -----------------------------------------------


def test_the_overridable_fields_are_the_models_own_but_those_the_code_fixes() -> None:
    assert set(overridable_fields()) == set(Policy.model_fields) - FIXED_BY_CODE
    assert {"ttl", "responders", "on_expiry", "reminders"} <= set(overridable_fields())


@pytest.mark.parametrize(
    ("override", "field"),
    [
        ({"ttl": 0}, "policy.ttl"),
        ({"ttl": "soon"}, "policy.ttl"),
        ({"responders": "ann"}, "policy.responders"),
        ({"reminders": ["x"]}, "policy.reminders.0"),
        ({"on_expiry": {"action": "shrug"}}, "policy.on_expiry.action"),
        ({"kind": "text"}, "policy.kind"),
        ({"bind": False}, "policy.bind"),
        ({"tll": 60}, "policy.tll"),
        ({"ttl": 60, "reminders": [120]}, "policy"),
        ([1, 2], "policy"),
    ],
)
def test_an_invalid_override_is_refused_naming_the_field(override: Any, field: str) -> None:
    with pytest.raises(PolicyInvalidError) as refused:
        check_override(override)
    assert refused.value.field == field
    assert refused.value.message.startswith(field)
    assert status_for(refused.value) == 422


def test_an_invalid_set_writes_nothing(lone_store: PolicyStore) -> None:
    store = lone_store
    with pytest.raises(PolicyInvalidError):
        store.set(FUNCTION, {"ttl": -5}, set_by="ann", set_at=AT)
    assert store.current(FUNCTION) is None


# -- versions ------------------------------------------------------------------------------------


def test_each_set_is_a_new_version_and_the_old_ones_are_kept(lone_store: PolicyStore) -> None:
    store = lone_store
    first = store.set(FUNCTION, {"ttl": 600}, set_by="ann", set_at=AT)
    second = store.set(
        FUNCTION, {"ttl": 900, "responders": ["bob"]}, set_by="cat", set_at=AT, expected_version=1
    )
    store.set("close_account", {"ttl": 60}, set_by="ann", set_at=AT)

    assert (first.version, second.version) == (1, 2)
    current = store.current(FUNCTION)
    assert current is not None
    assert (current.version, current.policy, current.set_by) == (
        2,
        {"ttl": 900, "responders": ["bob"]},
        "cat",
    )
    assert [(p.version, p.set_by) for p in store.history(FUNCTION)] == [(1, "ann"), (2, "cat")]
    assert [(p.function, p.version) for p in store.list()] == [("close_account", 1), (FUNCTION, 2)]


def test_a_set_from_a_stale_version_is_refused(lone_store: PolicyStore) -> None:
    store = lone_store
    store.set(FUNCTION, {"ttl": 600}, set_by="ann", set_at=AT, expected_version=0)
    with pytest.raises(PolicyConflictError) as lost:
        store.set(FUNCTION, {"ttl": 60}, set_by="bob", set_at=AT, expected_version=0)
    assert (lost.value.current_version, status_for(lost.value)) == (1, 409)


class _RacingClient:
    """Both sets read before either writes (a barrier after the read); DynamoDB's conditional write
    is atomic, which the lock around ``put_item`` stands for (in-process moto is not thread safe)."""

    def __init__(self, inner: Any, barrier: threading.Barrier, lock: threading.Lock) -> None:
        self._inner, self._barrier, self._lock = inner, barrier, lock

    def query(self, **kwargs: Any) -> Any:
        found = self._inner.query(**kwargs)
        self._barrier.wait(timeout=10)
        return found

    def put_item(self, **kwargs: Any) -> Any:
        with self._lock:
            return self._inner.put_item(**kwargs)


def test_two_concurrent_sets_one_wins_the_other_gets_409(lone_store: PolicyStore) -> None:
    store = lone_store
    barrier, lock = threading.Barrier(2), threading.Lock()
    outcomes: dict[str, Any] = {}

    def set_as(who: str, ttl: int) -> None:
        racing = PolicyStore(store.table_name, _RacingClient(store.client, barrier, lock))  # type: ignore[arg-type]
        try:
            outcomes[who] = racing.set(FUNCTION, {"ttl": ttl}, set_by=who, set_at=AT).version
        except PolicyConflictError as exc:
            outcomes[who] = exc

    threads = [threading.Thread(target=set_as, args=args) for args in (("ann", 600), ("bob", 900))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)

    wins = [who for who, outcome in outcomes.items() if outcome == 1]
    losses = [outcome for outcome in outcomes.values() if isinstance(outcome, PolicyConflictError)]
    assert len(wins) == 1 and len(losses) == 1
    assert status_for(losses[0]) == 409
    [only] = store.history(FUNCTION)
    assert only.set_by == wins[0]


# -- raising questions -----------------------------------------------------------------------------


def test_a_question_raised_without_an_override_keeps_todays_digest(
    aws: Aws, clock: FakeClock, store: PolicyStore, ledger: Ledger
) -> None:
    runner = make_runner(aws, clock, no_cache(store, ledger))
    question_id = park(runner, "t-1")

    record = ledger.get_question(question_id)
    policy = Policy.model_validate(record.policy)
    assert record.policy_version is None
    assert record.digest == digest_of(record.question, policy, question_id=question_id)
    assert "policy_version" not in json.loads(record.envelope or "{}")


def test_the_next_question_uses_a_set_and_a_raised_one_keeps_its_policy_and_digest(
    aws: Aws, clock: FakeClock, store: PolicyStore, ledger: Ledger
) -> None:
    runner = make_runner(aws, clock, no_cache(store, ledger))
    # Given an override, and a question raised under it
    store.set(FUNCTION, {"ttl": 600, "responders": ["ann"]}, set_by="ops", set_at=AT)
    first = park(runner, "t-1", run_id="01RUN")
    raised = ledger.get_question(first)
    assert (raised.policy["ttl"], raised.policy["responders"], raised.policy_version) == (600, ["ann"], 1)
    assert raised.digest == digest_of(
        raised.question, Policy.model_validate(raised.policy), question_id=first, policy_version=1
    )
    assert QuestionView.of(raised).policy_version == 1

    # When the policy is set again
    store.set(FUNCTION, {"ttl": 900, "responders": ["bob"]}, set_by="ops", set_at=AT)

    # Then the next question uses the new version
    second = park(runner, "t-2")
    assert (ledger.get_question(second).policy["responders"], ledger.get_question(second).policy_version) == (
        ["bob"],
        2,
    )
    # And a redelivery republishing the first question keeps its policy, version and digest
    again = runner.run(StartMessage(thread_id="t-1", input=REFUND, run_id="01RUN"), receive_count=2)
    assert (again.status, again.pending) == ("interrupted", [first])
    kept = ledger.get_question(first)
    assert (kept.policy, kept.policy_version, kept.digest) == (raised.policy, 1, raised.digest)
    assert metric("QuestionCollisions") == 0


def test_the_override_only_changes_the_fields_it_names(
    aws: Aws, clock: FakeClock, store: PolicyStore, ledger: Ledger
) -> None:
    runner = make_runner(aws, clock)
    code = Policy.model_validate(ledger.get_question(park(runner, "t-0")).policy)
    store.set(FUNCTION, {"responders": ["ann"]}, set_by="ops", set_at=AT)

    overridden = make_runner(aws, clock, no_cache(store, ledger))
    policy = ledger.get_question(park(overridden, "t-1")).policy
    assert policy == code.model_dump(mode="json") | {"responders": ["ann"]}


def test_an_unreadable_store_never_blocks_a_question(
    aws: Aws, clock: FakeClock, store: PolicyStore, ledger: Ledger, caplog: pytest.LogCaptureFixture
) -> None:
    class Unreadable:
        def query(self, **kwargs: Any) -> Any:
            raise ClientError({"Error": {"Code": "AccessDeniedException", "Message": "no"}}, "Query")

    store.set(FUNCTION, {"ttl": 600}, set_by="ops", set_at=AT)
    broken = PolicyOverrides(PolicyStore(store.table_name, Unreadable()), ledger.find_question)  # type: ignore[arg-type]
    runner = make_runner(aws, clock, broken)

    with caplog.at_level(logging.WARNING):
        outcome = runner.run(StartMessage(thread_id="t-1", input=REFUND))

    # The question is raised, under the code's policy, with a warning and a metric
    [question_id] = outcome.pending
    assert outcome.status == "interrupted"
    record = ledger.get_question(question_id)
    assert (record.policy_version, record.policy["ttl"]) == (None, None)
    assert any("policy store unreadable" in r.getMessage() for r in caplog.records)
    assert metric("PolicyStoreUnreadable") == 1


def test_an_unreadable_store_falls_back_on_the_last_version_read(
    aws: Aws, clock: FakeClock, store: PolicyStore, ledger: Ledger
) -> None:
    store.set(FUNCTION, {"ttl": 600}, set_by="ops", set_at=AT)
    ticks = iter([0.0, 100.0])
    overrides = PolicyOverrides(store, ledger.find_question, cache_seconds=30, monotonic=lambda: next(ticks))
    runner = make_runner(aws, clock, overrides)
    park(runner, "t-1")

    def unreadable(**kwargs: Any) -> Any:
        raise ClientError({"Error": {"Code": "ThrottlingException", "Message": "slow"}}, "Query")

    store.client = type("Broken", (), {"query": staticmethod(unreadable)})()
    record = ledger.get_question(park(runner, "t-2"))
    assert (record.policy_version, record.policy["ttl"]) == (1, 600)
    assert metric("PolicyStoreUnreadable") == 1


def test_a_set_reaches_new_questions_once_the_cache_expires(
    aws: Aws, clock: FakeClock, store: PolicyStore, ledger: Ledger
) -> None:
    now = [0.0]
    overrides = PolicyOverrides(store, ledger.find_question, cache_seconds=30, monotonic=lambda: now[0])
    runner = make_runner(aws, clock, overrides)
    store.set(FUNCTION, {"ttl": 600}, set_by="ops", set_at=AT)
    assert ledger.get_question(park(runner, "t-1")).policy_version == 1

    store.set(FUNCTION, {"ttl": 900}, set_by="ops", set_at=AT)
    now[0] = 29.0
    assert ledger.get_question(park(runner, "t-2")).policy_version == 1
    now[0] = 30.0
    assert ledger.get_question(park(runner, "t-3")).policy_version == 2


def test_an_override_that_does_not_fit_the_codes_policy_is_not_applied(
    aws: Aws, clock: FakeClock, store: PolicyStore, ledger: Ledger
) -> None:
    # A default answer of a text question: valid for some kind, not for this approval
    store.set(
        FUNCTION, {"on_expiry": {"action": "default", "answer": {"text": "no"}}}, set_by="ops", set_at=AT
    )
    runner = make_runner(aws, clock, no_cache(store, ledger))

    record = ledger.get_question(park(runner, "t-1"))
    assert (record.policy_version, record.policy["on_expiry"]) == (None, None)
    assert metric("PolicyOverridesRefused") == 1


def test_the_runner_reads_the_store_named_by_its_settings(
    aws: Aws, clock: FakeClock, store: PolicyStore
) -> None:
    assert aws.settings.policy_table == store.table_name
    policies = make_runner(aws, clock).policies
    assert isinstance(policies, PolicyOverrides)
    # The local stack reads on every question; deployed, the runner keeps a read CACHE_SECONDS
    assert (policies.store.table_name, policies.cache_seconds) == (store.table_name, 0)
    deployed = build_policy_overrides(
        aws.settings.model_copy(update={"policy_cache_seconds": None}), Ledger("l", aws.dynamodb)
    )
    assert isinstance(deployed, PolicyOverrides) and deployed.cache_seconds == CACHE_SECONDS
