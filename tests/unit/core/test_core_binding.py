"""Binding a run to its approval: typed edits, receipts and one external effect, per ``@wait``.

The rules come from seed 003 ("what exactly did you approve, and did exactly that run, once?"),
quoted in each test. A scripted framework stands in for the agent runtime; the LangGraph side is in
``tests/unit/langgraph/test_langgraph_binding.py``.
"""

from __future__ import annotations

import sys
import threading
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any

import pytest
from pydantic import BaseModel, Field, ValidationError

from agent_wait import (
    Receipt,
    approval,
    args_schema_of,
    build_envelope,
    check_args_against_schema,
    collect_receipts,
    emit_receipt,
    make_wait,
    operation_id_for,
)
from agent_wait.envelope import Question
from agent_wait.errors import AnswerInvalidError, MissingExtraError
from agent_wait.policy import _compiled_schema

if TYPE_CHECKING:
    from collections.abc import Mapping

    from conftest import ScriptedFramework

Amount = Annotated[float, Field(gt=0, le=10_000)]


class Address(BaseModel):
    city: str
    zip: Annotated[str, Field(pattern=r"^[0-9]{5}$")]


class _Identified:
    """Mixed into the scripted framework: it also tells which question an answer belongs to."""

    name = "identified"
    question_id = "q-1"
    bubbles: tuple[type[BaseException], ...] = ()
    interrupt: Any

    def interrupt_with_id(self, value: Any, call_args: Mapping[str, Any]) -> tuple[Any, str | None]:
        return self.interrupt(value, call_args), self.question_id

    def is_control_flow(self, exc: BaseException) -> bool:
        return isinstance(exc, self.bubbles)


# The scripted framework (tests/unit/core/conftest.py) plus question ids, like the real adapters.
IdentifiedFramework = Any


@pytest.fixture
def identified(framework: ScriptedFramework) -> IdentifiedFramework:
    return type("IdentifiedFramework", (_Identified, type(framework)), {})()


def _park(framework: ScriptedFramework, fn: Any, *args: Any, **kwargs: Any) -> Any:
    with pytest.raises(framework.Parked) as parked:
        fn(*args, **kwargs)
    return parked.value.value


def _refund_tool(framework: ScriptedFramework, paid: list[dict[str, Any]]) -> Any:
    @make_wait(framework)(approval())
    def issue_refund(customer: str, amount: Amount, operation_id: str) -> dict[str, Any]:
        paid.append({"customer": customer, "amount": amount, "operation_id": operation_id})
        return {"refund_id": f"rf-{customer}-{amount}", "customer": customer, "amount": amount}

    return issue_refund


# -- typed edits -----------------------------------------------------------------------------------


def test_typed_edits_question_carries_the_json_schema_of_the_published_parameters(
    identified: IdentifiedFramework,
) -> None:
    """Seed 003: "Edited call to dispatch" — an edit must be checked against what the call accepts."""
    issue_refund = _refund_tool(identified, [])
    value = _park(identified, issue_refund, "c-17", 40)
    question = value["question"]
    assert question["function"] == "issue_refund"
    assert question["args"] == {"customer": "c-17", "amount": 40}
    schema = question["args_schema"]
    assert schema == args_schema_of(issue_refund)
    assert schema["type"] == "object"
    assert schema["required"] == ["customer", "amount"]
    assert schema["additionalProperties"] is False
    assert schema["properties"]["customer"]["type"] == "string"
    amount = schema["properties"]["amount"]
    assert (amount["type"], amount["exclusiveMinimum"], amount["maximum"]) == ("number", 0, 10_000)
    # The plumbing a human does not approve is not in the schema either.
    assert "operation_id" not in schema["properties"]


def test_typed_edits_schema_leaves_out_hidden_decision_and_receiver(identified: IdentifiedFramework) -> None:
    class Refunds:
        @make_wait(identified)(approval())
        def issue(self, ctx: Any, amount: Amount, decision: Any = None, **extra: int) -> None: ...

    value = _park(identified, Refunds().issue, object(), 40, note=3)
    schema = value["question"]["args_schema"]
    assert set(schema["properties"]) == {"amount"}
    assert schema["additionalProperties"] == {"type": "integer"}  # **extra: int
    check_args_against_schema({"amount": 1, "note": 2}, schema, "issue")
    with pytest.raises(AnswerInvalidError) as refused:
        check_args_against_schema({"amount": 1, "note": "two"}, schema, "issue")
    assert refused.value.field == "answer.args.note"


@pytest.mark.parametrize("bad", [-1000, "all the money", 0, 10_001, None, [40]])
def test_typed_edits_reply_time_refuses_an_edit_outside_the_type(
    identified: IdentifiedFramework, bad: Any
) -> None:
    """Issue: edits {"amount": -1000} or {"amount": "all the money"} must be refused, naming the field."""
    value = _park(identified, _refund_tool(identified, []), "c-17", 40)
    with pytest.raises(AnswerInvalidError) as refused:
        approval().check_answer({"action": "approve", "args": {"amount": bad}}, value["question"])
    assert refused.value.field == "answer.args.amount"
    assert refused.value.code == "invalid_answer"
    assert "issue_refund()" in refused.value.message


def test_typed_edits_reply_time_accepts_an_edit_inside_the_type(identified: IdentifiedFramework) -> None:
    value = _park(identified, _refund_tool(identified, []), "c-17", 40)
    for edits in ({"amount": 25}, {"amount": 10_000}, {"amount": 0.01}, {"customer": "c-18"}):
        approval().check_answer({"action": "approve", "args": edits}, value["question"])
    # A question published before args_schema existed is checked as before (names only).
    approval().check_answer(
        {"action": "approve", "args": {"amount": -1}}, {"function": "f", "args": {"amount": 1}}
    )


@pytest.mark.parametrize("bad", [-1000, "all the money"])
def test_typed_edits_resumed_call_validates_again_before_the_body(
    identified: IdentifiedFramework, bad: Any
) -> None:
    """Defence in depth: an answer that reached the graph without the api is refused at resume time."""
    paid: list[dict[str, Any]] = []
    issue_refund = _refund_tool(identified, paid)
    identified.answers.append({"action": "approve", "args": {"amount": bad}})
    with collect_receipts() as receipts, pytest.raises(AnswerInvalidError) as refused:
        issue_refund("c-17", 40)
    assert refused.value.field == "answer.args.amount"
    assert refused.value.question_id == "q-1"
    assert paid == []
    assert [(r.ran, r.args, r.outcome) for r in receipts] == [(False, None, None)]


def test_typed_edits_valid_edit_runs_with_the_value_as_sent(identified: IdentifiedFramework) -> None:
    paid: list[dict[str, Any]] = []
    identified.answers.append({"action": "approve", "args": {"amount": 25}})
    result = _refund_tool(identified, paid)("c-17", 40)
    assert result == {"refund_id": "rf-c-17-25", "customer": "c-17", "amount": 25}
    assert paid[0]["amount"] == 25


def test_typed_edits_schema_is_self_contained_for_nested_models(identified: IdentifiedFramework) -> None:
    @make_wait(identified)(approval())
    def ship(to: Address, count: Annotated[int, Field(ge=1)] = 1) -> None: ...

    value = _park(identified, ship, Address(city="Lyon", zip="69001"))
    schema = value["question"]["args_schema"]
    assert schema["properties"]["to"] == {"$ref": "#/$defs/Address"}
    assert "Address" in schema["$defs"]
    question = value["question"]
    approval().check_answer({"action": "approve", "args": {"to": {"city": "Nice", "zip": "06000"}}}, question)
    with pytest.raises(AnswerInvalidError) as refused:
        approval().check_answer({"action": "approve", "args": {"to": {"city": "Nice", "zip": "x"}}}, question)
    assert refused.value.field == "answer.args.to.zip"
    with pytest.raises(AnswerInvalidError) as refused:
        approval().check_answer({"action": "approve", "args": {"count": 0}}, question)
    assert refused.value.field == "answer.args.count"


def test_typed_edits_untyped_and_unschemable_parameters_accept_anything(
    identified: IdentifiedFramework,
) -> None:
    class Opaque:
        pass

    @make_wait(identified)(approval())
    def f(a, b: Opaque, c: NotDefinedAnywhere = 1) -> None: ...  # type: ignore[no-untyped-def,name-defined]  # noqa: F821, ANN001

    value = _park(identified, f, 1, Opaque())
    schema = value["question"]["args_schema"]
    assert set(schema["properties"]) == {"a", "b", "c"}
    check_args_against_schema({"a": [1], "b": "anything", "c": {"x": None}}, schema, "f")


def test_typed_edits_field_default_constraints_count(identified: IdentifiedFramework) -> None:
    @make_wait(identified)(approval())
    def f(amount: float = Field(default=1.0, gt=0)) -> None: ...  # noqa: B008 - validate_call style

    schema = _park(identified, f)["question"]["args_schema"]
    assert schema["properties"]["amount"]["exclusiveMinimum"] == 0
    with pytest.raises(AnswerInvalidError):
        check_args_against_schema({"amount": -1}, schema, "f")


def test_typed_edits_args_schema_is_part_of_the_digest() -> None:
    """The digest covers the question, so a schema changed after approval no longer matches."""
    base = {"function": "issue_refund", "args": {"amount": 40}}
    digests = {
        build_envelope(
            "t1", Question(question_id="q1", question={**base, "args_schema": schema}, policy=approval())
        ).digest
        for schema in ({"type": "object"}, {"type": "object", "properties": {"amount": {"maximum": 10}}})
    }
    assert len(digests) == 2


def test_typed_edits_without_fastjsonschema_refuse_rather_than_let_through(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Decision: an edit that cannot be type-checked is refused (MissingExtraError), never accepted."""
    _compiled_schema.cache_clear()
    monkeypatch.setitem(sys.modules, "fastjsonschema", None)
    try:
        with pytest.raises(MissingExtraError) as missing:
            check_args_against_schema({"amount": 1}, {"type": "object"}, "f")
        assert missing.value.extra == "service"
    finally:
        _compiled_schema.cache_clear()


# -- receipts --------------------------------------------------------------------------------------


def test_receipt_ran_with_the_args_actually_used(identified: IdentifiedFramework) -> None:
    """Seed 003: "Capture proposal, actual reviewer display, authenticated decision, final payload
    and receipt"."""
    identified.answers.append({"action": "approve", "args": {"amount": 25}})
    with collect_receipts() as receipts:
        _refund_tool(identified, [])("c-17", 40)
    [receipt] = receipts
    assert receipt.question_id == "q-1"
    assert (receipt.ran, receipt.args, receipt.outcome, receipt.error) == (
        True,
        {"customer": "c-17", "amount": 25},
        "returned",
        None,
    )
    assert receipt.at.tzinfo is UTC


@pytest.mark.parametrize(
    "answer",
    [{"action": "reject", "reason": "no"}, "not now", {"action": "maybe"}],
)
def test_receipt_did_not_run_on_a_rejection_or_anything_returned_in_its_place(
    identified: IdentifiedFramework, answer: Any
) -> None:
    """Seed 003: "Rejection ... Explains why retaining proposal does not dispatch rejected call"."""
    paid: list[dict[str, Any]] = []
    identified.answers.append(answer)
    with collect_receipts() as receipts:
        assert _refund_tool(identified, paid)("c-17", 40) == answer
    assert paid == []
    assert [(r.ran, r.args, r.outcome) for r in receipts] == [(False, None, None)]


def test_receipt_records_a_raising_body_and_re_raises(identified: IdentifiedFramework) -> None:
    @make_wait(identified)(approval())
    def boom(amount: Amount) -> None:
        raise ValueError("bank said no")

    identified.answers.append({"action": "approve"})
    with collect_receipts() as receipts, pytest.raises(ValueError, match="bank said no"):
        boom(40)
    [receipt] = receipts
    assert (receipt.ran, receipt.args, receipt.outcome) == (True, {"amount": 40}, "raised")
    assert receipt.error == "ValueError: bank said no"


def test_receipt_not_emitted_when_the_body_parks_again(identified: IdentifiedFramework) -> None:
    class Bubble(Exception):
        pass

    identified.bubbles = (Bubble,)

    @make_wait(identified)(approval())
    def nested(amount: Amount) -> None:
        raise Bubble

    identified.answers.append({"action": "approve"})
    with collect_receipts() as receipts, pytest.raises(Bubble):
        nested(40)
    assert receipts == []


def test_receipt_for_async_def_and_decision_functions(identified: IdentifiedFramework) -> None:
    import asyncio

    @make_wait(identified)(approval())
    async def later(amount: Amount) -> str:
        return "ok"

    @make_wait(identified)(approval())
    def decided(amount: Amount, decision: Any = None) -> Any:
        return decision

    identified.answers.extend([{"action": "approve"}, {"action": "reject"}])
    with collect_receipts() as receipts:
        assert asyncio.run(later(1)) == "ok"
        assert decided(2) == {"action": "reject"}
    assert [(r.ran, r.args, r.outcome) for r in receipts] == [
        (True, {"amount": 1}, "returned"),
        (True, {"amount": 2}, "returned"),
    ]


def test_receipt_none_without_a_question(
    identified: IdentifiedFramework, framework: ScriptedFramework
) -> None:
    @make_wait(identified)(approval(), when=lambda args: args["amount"] > 100)
    def small(amount: float) -> str:
        return "ran"

    @make_wait(framework)(approval())
    def unidentified(amount: float) -> str:
        return "ran"

    framework.answers.append({"action": "approve"})
    with collect_receipts() as receipts:
        assert small(5) == "ran"  # not asked: nothing was approved, nothing to bind
        assert unidentified(5) == "ran"  # the framework cannot tell the question id
    assert receipts == []


def test_receipt_collectors_nest_and_close() -> None:
    at = datetime(2026, 1, 1, tzinfo=UTC)
    with collect_receipts() as outer:
        emit_receipt(Receipt(question_id="a", ran=False, at=at))
        with collect_receipts() as inner:
            emit_receipt(Receipt(question_id="b", ran=False, at=at))
        emit_receipt(Receipt(question_id="c", ran=False, at=at))
    emit_receipt(Receipt(question_id="d", ran=False, at=at))
    assert [r.question_id for r in outer] == ["a", "b", "c"]
    assert [r.question_id for r in inner] == ["b"]


def test_receipt_collection_is_thread_safe() -> None:
    at = datetime(2026, 1, 1, tzinfo=UTC)
    start = threading.Barrier(8)

    def emit_many(worker: int) -> None:
        start.wait()
        for n in range(200):
            emit_receipt(Receipt(question_id=f"{worker}-{n}", ran=False, at=at))

    with collect_receipts() as receipts:
        threads = [threading.Thread(target=emit_many, args=(w,)) for w in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert len(receipts) == 1600
    assert len({r.question_id for r in receipts}) == 1600


def test_receipt_shape_is_strict() -> None:
    with pytest.raises(ValidationError):
        Receipt(question_id="q", ran=True, at=datetime(2026, 1, 1))  # naive: not UTC
    with pytest.raises(ValidationError):
        Receipt(question_id="q", ran=True, outcome="maybe", at=datetime.now(UTC))  # type: ignore[arg-type]
    local = datetime(2026, 1, 1, 2, tzinfo=datetime.now(UTC).astimezone().tzinfo)
    assert Receipt(question_id="q", ran=False, at=local).at.tzinfo is UTC


# -- one external effect ---------------------------------------------------------------------------


def test_one_external_effect_operation_id_is_stable_per_question(identified: IdentifiedFramework) -> None:
    """Seed 003: "A local operation ID cannot deduplicate a remote API unless the integration and
    receiving service implement suitable semantics" — so the id is stable and handed to the body."""
    paid: list[dict[str, Any]] = []
    issue_refund = _refund_tool(identified, paid)
    identified.answers.extend([{"action": "approve"}, {"action": "approve"}])
    issue_refund("c-17", 40)
    issue_refund("c-17", 40)  # a retry or redelivery of the same question
    identified.question_id = "q-2"
    identified.answers.append({"action": "approve"})
    issue_refund("c-17", 40)  # another question, same args
    assert [p["operation_id"] for p in paid] == [operation_id_for("q-1")] * 2 + [operation_id_for("q-2")]
    assert operation_id_for("q-1") != operation_id_for("q-2")
    assert operation_id_for("q-1").startswith("op-")


def test_one_external_effect_operation_id_is_not_published_nor_editable(
    identified: IdentifiedFramework,
) -> None:
    issue_refund = _refund_tool(identified, [])
    value = _park(identified, issue_refund, "c-17", 40, operation_id="chosen-by-the-model")
    assert "operation_id" not in value["question"]["args"]
    identified.answers.append({"action": "approve", "args": {"operation_id": "op-forged"}})
    with pytest.raises(AnswerInvalidError) as refused:
        issue_refund("c-17", 40)
    assert refused.value.field == "answer.args.operation_id"
    # Whatever the caller passed, the asked call runs with the question's id.
    paid: list[dict[str, Any]] = []
    identified.answers.append({"action": "approve"})
    _refund_tool(identified, paid)("c-17", 40, operation_id="chosen-by-the-model")
    assert paid[0]["operation_id"] == operation_id_for("q-1")


def test_one_external_effect_needs_a_framework_that_knows_question_ids(
    framework: ScriptedFramework, identified: IdentifiedFramework
) -> None:
    with pytest.raises(TypeError, match="operation_id"):
        _refund_tool(framework, [])
    from agent_wait import InMemoryAnnounce

    with pytest.raises(TypeError, match="async"):

        @make_wait(identified)(approval(), mode="async", announce=InMemoryAnnounce())
        def f(amount: float, operation_id: str) -> None: ...


def test_typed_edits_published_values_of_common_types_pass_their_own_schema(
    identified: IdentifiedFramework,
) -> None:
    """An edit of one argument is not refused because another argument's published form (a naive
    datetime, a path, bytes, a tuple) carries a pydantic format a standard validator rejects."""
    import datetime as dt
    import decimal
    import pathlib
    import uuid

    @make_wait(identified)(approval())
    def f(
        when: dt.datetime,
        day: dt.date,
        span: dt.timedelta,
        key: uuid.UUID,
        price: decimal.Decimal,
        path: pathlib.Path,
        raw: bytes,
        pair: tuple[int, str],
        amount: Amount,
    ) -> None: ...

    value = _park(
        identified,
        f,
        dt.datetime(2026, 1, 1, 10),
        dt.date(2026, 1, 1),
        dt.timedelta(hours=1),
        uuid.UUID(int=1),
        decimal.Decimal("1.5"),
        pathlib.Path("/x"),
        b"ab",
        (1, "a"),
        40,
    )
    approval().check_answer({"action": "approve", "args": {"amount": 25}}, value["question"])
    with pytest.raises(AnswerInvalidError) as refused:
        approval().check_answer({"action": "approve", "args": {"amount": -1}}, value["question"])
    assert refused.value.field == "answer.args.amount"


def test_typed_edits_a_default_outside_the_annotation_is_still_accepted(
    identified: IdentifiedFramework,
) -> None:
    """`note: str = None` publishes None: an edit of another argument must not fail on it."""

    @make_wait(identified)(approval())
    def f(amount: Amount, note: str = None, tags: list[str] = ()) -> None: ...  # type: ignore[assignment]

    value = _park(identified, f, 40)
    approval().check_answer({"action": "approve", "args": {"amount": 25}}, value["question"])
    approval().check_answer({"action": "approve", "args": {"note": "late"}}, value["question"])
    with pytest.raises(AnswerInvalidError) as refused:
        approval().check_answer({"action": "approve", "args": {"note": 3}}, value["question"])
    assert refused.value.field == "answer.args.note"
