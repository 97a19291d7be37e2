"""``@wait`` in both modes, against a scripted framework (no agent runtime)."""

from __future__ import annotations

import asyncio
import contextvars
import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Any
from unittest.mock import ANY

import pytest
from pydantic import ValidationError

from agent_wait import (
    AsyncHost,
    InMemoryAnnounce,
    Policy,
    approval,
    async_question_id,
    decision,
    hosting_async_waits,
    make_wait,
)
from agent_wait.errors import AnswerInvalidError

if TYPE_CHECKING:
    from conftest import ScriptedFramework


def _park(framework: ScriptedFramework, fn: Any, *args: Any, **kwargs: Any) -> Any:
    """Call ``fn`` and return the value it parked on."""
    with pytest.raises(framework.Parked) as parked:
        fn(*args, **kwargs)
    return parked.value.value


# -- interrupt mode: what is raised --------------------------------------------------------------


def test_interrupt_value_carries_function_args_policy_and_source(framework: ScriptedFramework) -> None:
    """ "the wrapper raises the interrupt with {"question": {"function", "args"}, "__wait__": policy,
    "__source__": ...} before the body"; the question also carries the args' JSON Schema."""
    ran: list[int] = []
    policy = approval(ttl=3600, prompt="Refund?")

    @make_wait(framework)(policy)
    def issue_refund(customer: str, amount: int, currency: str = "EUR") -> str:
        ran.append(amount)
        return "done"

    value = _park(framework, issue_refund, "c-17", amount=40)
    assert value == {
        "question": {
            "function": "issue_refund",
            "args": {"customer": "c-17", "amount": 40, "currency": "EUR"},
            "args_schema": {
                "additionalProperties": False,
                "properties": {
                    "customer": {"title": "Customer", "type": "string"},
                    "amount": {"title": "Amount", "type": "integer"},
                    "currency": {"default": "EUR", "title": "Currency", "type": "string"},
                },
                "required": ["customer", "amount"],
                "title": "issue_refund_args",
                "type": "object",
            },
        },
        "__wait__": policy.model_dump(mode="json"),
        "__source__": {"function": issue_refund.__qualname__, "module": __name__},
    }
    assert ran == []


def test_positional_and_keyword_calls_publish_the_same_args(framework: ScriptedFramework) -> None:
    wait = make_wait(framework)

    @wait()
    def f(a: int, b: int = 2) -> None: ...

    assert _park(framework, f, 1, 2) == _park(framework, f, a=1) == _park(framework, f, b=2, a=1)


def test_hidden_decision_receiver_and_var_keyword_names(framework: ScriptedFramework) -> None:
    """Published args = bound args minus the framework's hidden params and ``decision``."""
    wait = make_wait(framework)

    class Service:
        @wait()
        def act(self, target: str, ctx: Any = None, decision: Any = None, **extra: Any) -> Any:
            return decision

    value = _park(framework, Service().act, "db", ctx=object(), note="n", ctx_extra=1)
    assert value["question"]["args"] == {"target": "db", "note": "n", "ctx_extra": 1}
    _, call_args = framework.raised[-1]
    assert "ctx" in call_args and "self" in call_args


def test_hidden_name_inside_var_keyword_is_not_published(framework: ScriptedFramework) -> None:
    @make_wait(framework)()
    def tool(amount: int, **context: Any) -> None: ...

    value = _park(framework, tool, amount=1, ctx="the framework's context")
    assert value["question"]["args"] == {"amount": 1}
    assert framework.raised[-1][1]["ctx"] == "the framework's context"


def test_non_json_arguments_are_published_as_json(framework: ScriptedFramework) -> None:
    @dataclass
    class Money:
        amount: Decimal
        currency: str

    @make_wait(framework)()
    def pay(money: Money, when: datetime, tags: set[str]) -> None: ...

    value = _park(framework, pay, Money(Decimal("1.50"), "EUR"), datetime(2026, 1, 1, tzinfo=UTC), {"x"})
    assert value["question"]["args"] == {
        "money": {"amount": "1.50", "currency": "EUR"},
        "when": "2026-01-01T00:00:00Z",
        "tags": ["x"],
    }


def test_missing_required_argument_raises_type_error(framework: ScriptedFramework) -> None:
    @make_wait(framework)()
    def f(a: int, b: int) -> None: ...

    with pytest.raises(TypeError, match="'b'"):
        f(1)
    assert framework.raised == []


# -- interrupt mode: answer rules ------------------------------------------------------------------


@pytest.fixture
def refund(framework: ScriptedFramework) -> tuple[Any, list[tuple[str, int]]]:
    calls: list[tuple[str, int]] = []

    @make_wait(framework)("approval")
    def issue_refund(customer: str, amount: int) -> dict[str, Any]:
        calls.append((customer, amount))
        return {"refunded": amount}

    return issue_refund, calls


def test_approve_runs_the_body(framework: ScriptedFramework, refund: Any) -> None:
    """ "{"action": "approve"} runs the body"."""
    tool, calls = refund
    framework.answers.append({"action": "approve"})
    assert tool("c-17", 40) == {"refunded": 40}
    assert calls == [("c-17", 40)]


def test_approve_with_args_merges_them_over_the_originals(framework: ScriptedFramework, refund: Any) -> None:
    """ "{"action": "approve", "args": {...}} runs it with those args merged"."""
    tool, calls = refund
    framework.answers.append({"action": "approve", "args": {"amount": 25}})
    assert tool("c-17", amount=40) == {"refunded": 25}
    assert calls == [("c-17", 25)]


def test_approve_with_null_args_runs_with_the_originals(framework: ScriptedFramework, refund: Any) -> None:
    tool, calls = refund
    framework.answers.append({"action": "approve", "args": None})
    assert tool("c-17", 40) == {"refunded": 40}


@pytest.mark.parametrize(
    "answer",
    [
        {"action": "reject", "reason": "not eligible"},
        {"action": "APPROVE"},
        "approve",
        None,
        42,
        ["approve"],
        {"choice": "refund"},
    ],
)
def test_anything_else_is_returned_in_its_place_unexecuted(
    framework: ScriptedFramework, refund: Any, answer: Any
) -> None:
    """ "anything else is returned in its place, unexecuted"."""
    tool, calls = refund
    framework.answers.append(answer)
    assert tool("c-17", 40) == answer
    assert calls == []


@pytest.mark.parametrize(
    ("edits", "field"),
    [({"amonut": 25}, "answer.args.amonut"), ("25", "answer.args")],
)
def test_edits_must_name_published_args(
    framework: ScriptedFramework, refund: Any, edits: Any, field: str
) -> None:
    tool, calls = refund
    framework.answers.append({"action": "approve", "args": edits})
    with pytest.raises(AnswerInvalidError) as err:
        tool("c-17", 40)
    assert err.value.field == field
    assert calls == []


def test_resume_time_and_reply_time_refuse_an_edit_alike(framework: ScriptedFramework, refund: Any) -> None:
    """The api's check (Policy.check_answer with the question) and the wrapper's defence at resume
    come from one helper: same field, same message."""
    tool, _ = refund
    value = _park(framework, tool, "c-17", 40)
    answer: dict[str, Any] = {"action": "approve", "args": {"amonut": 25}}
    with pytest.raises(AnswerInvalidError) as at_reply:
        Policy.model_validate(value["__wait__"]).check_answer(answer, value["question"])
    framework.answers.append(answer)
    with pytest.raises(AnswerInvalidError) as at_resume:
        tool("c-17", 40)
    assert (at_reply.value.field, at_reply.value.message) == (at_resume.value.field, at_resume.value.message)


def test_edits_cannot_reach_hidden_params(framework: ScriptedFramework) -> None:
    @make_wait(framework)()
    def tool(amount: int, ctx: Any = None) -> Any:
        return ctx

    framework.answers.append({"action": "approve", "args": {"ctx": "forged"}})
    with pytest.raises(AnswerInvalidError, match="ctx"):
        tool(1, ctx="real")


def test_edits_reach_var_keyword_args(framework: ScriptedFramework) -> None:
    @make_wait(framework)()
    def tool(**options: Any) -> Any:
        return options

    framework.answers.append({"action": "approve", "args": {"limit": 5}})
    assert tool(limit=10, mode="fast") == {"limit": 5, "mode": "fast"}


@pytest.mark.parametrize(
    "answer", [{"action": "approve"}, {"action": "reject"}, "free text", {"choice": "b"}]
)
def test_decision_parameter_always_runs_with_the_answer(framework: ScriptedFramework, answer: Any) -> None:
    """ "a declared decision parameter always runs and receives the answer"."""

    @make_wait(framework)(decision(["a", "b"]))
    def choose(item: str, decision: Any) -> Any:
        return (item, decision)

    value = _park(framework, choose, "x")
    assert value["question"]["args"] == {"item": "x"}
    framework.answers.append(answer)
    assert choose("x") == ("x", answer)


def test_async_def_functions_follow_the_same_rules(framework: ScriptedFramework) -> None:
    calls: list[int] = []

    @make_wait(framework)()
    async def issue_refund(amount: int) -> int:
        calls.append(amount)
        return amount

    with pytest.raises(framework.Parked):
        asyncio.run(issue_refund(40))
    framework.answers.append({"action": "approve", "args": {"amount": 30}})
    assert asyncio.run(issue_refund(40)) == 30
    framework.answers.append({"action": "reject"})
    assert asyncio.run(issue_refund(40)) == {"action": "reject"}
    assert calls == [30]


def test_wrapper_keeps_name_doc_and_signature(framework: ScriptedFramework) -> None:
    import inspect

    def issue_refund(customer: str, amount: int) -> None:
        """Refund."""

    wrapped = make_wait(framework)()(issue_refund)
    assert wrapped.__name__ == "issue_refund" and wrapped.__doc__ == "Refund."
    assert inspect.signature(wrapped) == inspect.signature(issue_refund)
    assert wrapped.__agent_wait__["policy"] == Policy()


# -- when= -----------------------------------------------------------------------------------------


def test_when_false_runs_the_body_without_a_question(framework: ScriptedFramework, caplog: Any) -> None:
    """ "unless when= is given and returns false … no question is raised at all and the body simply
    runs" (seed 000)."""

    @make_wait(framework)(when=lambda args: args["amount"] > 100)
    def issue_refund(amount: int) -> int:
        return amount

    assert issue_refund(40) == 40
    assert framework.raised == []
    _park(framework, issue_refund, 400)


def test_when_sees_the_published_args_only(framework: ScriptedFramework) -> None:
    """ "The predicate sees the published args only" (seed 000)."""
    seen: list[dict[str, Any]] = []

    def record(args: dict[str, Any]) -> bool:
        seen.append(args)
        return False

    @make_wait(framework)(when=record)
    def tool(amount: int, ctx: Any = None, decision: Any = None) -> Any:
        return decision

    assert tool(3, ctx="secret") is None
    assert seen == [{"amount": 3}]


def test_when_is_re_evaluated_on_the_resume_re_run(framework: ScriptedFramework) -> None:
    """ "is re-evaluated on the resume re-run (so it must be deterministic)" (seed 000)."""
    evaluations: list[int] = []

    def big(args: dict[str, Any]) -> bool:
        evaluations.append(args["amount"])
        return bool(args["amount"] > 100)

    @make_wait(framework)(when=big)
    def issue_refund(amount: int) -> int:
        return amount

    _park(framework, issue_refund, 500)
    framework.answers.append({"action": "approve"})
    assert issue_refund(500) == 500
    assert evaluations == [500, 500]


def test_a_raising_predicate_parks_the_call(framework: ScriptedFramework, caplog: Any) -> None:
    """ "and parks the call if it raises" (seed 000)."""

    def broken(args: dict[str, Any]) -> bool:
        raise KeyError("nope")

    @make_wait(framework)(when=broken)
    def issue_refund(amount: int) -> int:
        return amount

    with caplog.at_level(logging.WARNING, logger="agent_wait"):
        _park(framework, issue_refund, 1)
    assert any("when= predicate" in r.getMessage() for r in caplog.records)


# -- policy argument -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        (None, Policy()),
        ("approval", Policy()),
        ("edit", Policy(kind="edit")),
        ("text", Policy(kind="text", bind=False)),
        (approval, Policy()),
        (approval(ttl=5), Policy(ttl=5)),
    ],
)
def test_policy_may_be_a_policy_a_kind_or_a_constructor(
    framework: ScriptedFramework, policy: Any, expected: Policy
) -> None:
    @make_wait(framework)(policy)
    def f() -> None: ...

    assert _park(framework, f)["__wait__"] == expected.model_dump(mode="json")


def test_bare_decorator_uses_the_default_policy(framework: ScriptedFramework) -> None:
    wait = make_wait(framework)

    @wait
    def f(x: int) -> int:
        return x

    assert _park(framework, f, 1)["__wait__"] == Policy().model_dump(mode="json")


def test_a_policy_factory_is_refused_with_a_hint(framework: ScriptedFramework) -> None:
    """`@wait(lambda: approval(ttl=60))` used to wrap the lambda as the tool; it now says what to write."""
    wait = make_wait(framework)
    with pytest.raises(TypeError, match=r"@wait\(approval\(ttl=60\)\)"):
        wait(lambda: approval(ttl=60))
    with pytest.raises(TypeError, match="options"):
        wait(decision)


def test_bare_decorator_works_on_a_function_without_parameters(framework: ScriptedFramework) -> None:
    ran: list[str] = []

    @make_wait(framework)
    def restart() -> str:
        ran.append("restart")
        return "restarted"

    assert _park(framework, restart) == {
        "question": {
            "function": "restart",
            "args": {},
            "args_schema": {
                "additionalProperties": False,
                "properties": {},
                "title": "restart_args",
                "type": "object",
            },
        },
        "__wait__": Policy().model_dump(mode="json"),
        "__source__": {"function": restart.__qualname__, "module": __name__},
    }
    assert ran == []
    framework.answers.append({"action": "approve"})
    assert restart() == "restarted"


def test_invalid_policy_and_mode_fail_at_decoration(framework: ScriptedFramework) -> None:
    wait = make_wait(framework)
    with pytest.raises(ValidationError):
        wait("maybe")
    with pytest.raises(ValidationError):
        wait("decision")  # a decision needs options
    with pytest.raises(ValueError, match="mode"):
        wait(mode="later")
    with pytest.raises(TypeError):
        wait(3)


# -- async mode ------------------------------------------------------------------------------------


def test_async_mode_without_announcer_or_host_refuses_the_call(framework: ScriptedFramework) -> None:
    """Decorating is fine (the runner will lend its announcers); calling outside any host is not."""
    calls: list[int] = []

    @make_wait(framework)(mode="async")
    def f(a: int) -> None:
        calls.append(a)

    with pytest.raises(TypeError, match="announce"):
        f(1)
    assert calls == []


def test_async_mode_without_announcer_uses_the_hosts(framework: ScriptedFramework) -> None:
    """Inside hosting_async_waits the host's announcers, reply URL, default ttl and clock apply."""
    sink = InMemoryAnnounce()
    now = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)

    @make_wait(framework)(mode="async")
    def f(a: int) -> None: ...

    host = AsyncHost(
        announce=sink, reply_url="https://h/questions/{question_id}/reply", default_ttl=90, now=lambda: now
    )
    with hosting_async_waits(host):
        out = f(1)
    [env] = sink.envelopes
    assert out == {"status": "pending_approval", "question_id": env.question_id}
    assert env.reply_with.url == f"https://h/questions/{env.question_id}/reply"
    assert env.created_at == now and env.expires_at == now + timedelta(seconds=90)
    assert env.source == {"function": f.__qualname__, "module": __name__, "mode": "async"}
    with pytest.raises(TypeError):
        f(1)  # the host is gone with its block


def test_async_mode_own_announcer_wins_over_the_hosts(framework: ScriptedFramework) -> None:
    own, hosts = InMemoryAnnounce(), InMemoryAnnounce()

    @make_wait(framework)(mode="async", announce=own, reply_url="https://own/{question_id}")
    def f(a: int) -> None: ...

    with hosting_async_waits(AsyncHost(announce=hosts, reply_url="https://host/{question_id}")):
        f(1)
    assert hosts.envelopes == [] and len(own.envelopes) == 1
    assert own.envelopes[0].reply_with.url is not None and own.envelopes[0].reply_with.url.startswith(
        "https://own/"
    )


def test_async_host_is_seen_from_a_worker_thread_of_a_copied_context(framework: ScriptedFramework) -> None:
    """LangGraph runs sync nodes on worker threads with a copy of the caller's context."""
    sink = InMemoryAnnounce()

    @make_wait(framework)(mode="async")
    def f(a: int) -> None: ...

    with hosting_async_waits(AsyncHost(announce=sink)), ThreadPoolExecutor(1) as pool:
        context = contextvars.copy_context()
        pool.submit(context.run, f, 3).result()
    assert len(sink.envelopes) == 1


def test_async_mode_publishes_and_returns_pending_without_running(framework: ScriptedFramework) -> None:
    """ "async mode: question_id = sha256(thread | function | canonical args); the wrapper announces
    through its own announcers and returns {"status": "pending_approval", "question_id": ...} without
    running the body"."""
    sink = InMemoryAnnounce()
    calls: list[int] = []

    @make_wait(framework)(
        approval(ttl=60), mode="async", announce=sink, reply_url="https://x/questions/{question_id}/reply"
    )
    def issue_refund(customer: str, amount: int, ctx: Any = None) -> None:
        calls.append(amount)

    out = issue_refund("c-17", 40, ctx="hidden")
    qid = async_question_id("thread-1", issue_refund.__qualname__, {"customer": "c-17", "amount": 40})
    assert out == {"status": "pending_approval", "question_id": qid}
    assert calls == [] and framework.raised == []
    [env] = sink.envelopes
    assert (env.question_id, env.thread_id, env.dedupe_key) == (qid, "thread-1", f"wait.created:{qid}")
    assert env.question == {
        "function": "issue_refund",
        "args": {"customer": "c-17", "amount": 40},
        "args_schema": ANY,
    }
    assert env.policy == approval(ttl=60)
    assert env.expires_at is not None and (env.expires_at - env.created_at).total_seconds() == 60
    assert env.reply_with.url == f"https://x/questions/{qid}/reply"
    assert env.source == {"function": issue_refund.__qualname__, "module": __name__, "mode": "async"}


def test_async_mode_identity_is_stable_per_thread_function_and_args(framework: ScriptedFramework) -> None:
    """ "The same question is published again whenever … an async tool is called again with the same
    arguments" under the same dedupe_key (seed 000, Identity)."""
    sink = InMemoryAnnounce()

    @make_wait(framework)(mode="async", announce=sink)
    def f(a: int, b: int = 0) -> None: ...

    first, again = f(1), f(b=0, a=1)
    other_args = f(2)
    framework.thread_id = "thread-2"
    other_thread = f(1)
    assert first == again
    assert len({first["question_id"], other_args["question_id"], other_thread["question_id"]}) == 3
    events = [e.event_id for e in sink.envelopes]
    assert len(set(events)) == 4


def test_async_mode_methods_of_one_name_on_two_classes_do_not_share_an_id(
    framework: ScriptedFramework,
) -> None:
    """The question id hashes the qualified name: Refunds.issue and Orders.issue are two questions."""
    sink = InMemoryAnnounce()
    wait = make_wait(framework)

    class Refunds:
        @wait(mode="async", announce=sink)
        def issue(self, amount: int) -> None: ...

    class Orders:
        @wait(mode="async", announce=sink)
        def issue(self, amount: int) -> None: ...

    refund, order = Refunds().issue(40), Orders().issue(40)
    assert refund["question_id"] != order["question_id"]
    assert refund["question_id"] == async_question_id("thread-1", Refunds.issue.__qualname__, {"amount": 40})
    assert [e.question for e in sink.envelopes] == [
        {"function": "issue", "args": {"amount": 40}, "args_schema": ANY}
    ] * 2


def test_async_mode_survives_a_raising_announcer(framework: ScriptedFramework) -> None:
    def explode(envelope: Any) -> None:
        raise RuntimeError("sink down")

    @make_wait(framework)(mode="async", announce=explode)
    def f(a: int) -> None: ...

    assert f(1)["status"] == "pending_approval"


def test_async_mode_when_false_runs_the_body(framework: ScriptedFramework) -> None:
    sink = InMemoryAnnounce()

    @make_wait(framework)(mode="async", announce=sink, when=lambda args: False)
    async def f(a: int) -> int:
        return a

    assert asyncio.run(f(7)) == 7
    assert sink.envelopes == []
