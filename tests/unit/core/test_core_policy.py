"""Policy: constructors, validation, and ``check_answer`` for every kind with the error's field."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from agent_wait import OnExpiry, Policy, approval, decision, edit, free_text
from agent_wait.errors import AnswerInvalidError
from agent_wait.policy import check_arg_edits, resolve_policy

VALID = [
    (approval(), {"action": "approve"}),
    (approval(), {"action": "approve", "args": {"amount": 25}}),
    (approval(), {"action": "reject"}),
    (approval(), {"action": "reject", "reason": "no"}),
    (decision(["refund", "replace"]), {"choice": "replace"}),
    (edit(), {"action": "approve"}),
    (edit(), {"action": "reject", "reason": "bad"}),
    (edit(), {"action": "edit", "value": {"subject": "Hi"}}),
    (edit(), {"action": "edit", "value": None}),
    (free_text(), {"text": "blue"}),
    (free_text(), "blue"),
    (free_text(), ""),
]

INVALID = [
    (approval(), "approve", "answer"),
    (approval(), ["approve"], "answer"),
    (approval(), {}, "answer.action"),
    (approval(), {"action": "maybe"}, "answer.action"),
    (approval(), {"action": "approve", "args": [25]}, "answer.args"),
    (approval(), {"action": "approve", "reason": "x"}, "answer.reason"),
    (approval(), {"action": "reject", "reason": 3}, "answer.reason"),
    (approval(), {"action": "reject", "args": {}}, "answer.args"),
    (decision(["a", "b"]), {"choice": "c"}, "answer.choice"),
    (decision(["a", "b"]), {}, "answer.choice"),
    (decision(["a", "b"]), {"choice": "a", "why": "x"}, "answer.why"),
    (decision(["a", "b"]), "a", "answer"),
    (edit(), {"action": "edit"}, "answer.value"),
    (edit(), {"action": "approve", "value": 1}, "answer.value"),
    (edit(), {"action": "publish"}, "answer.action"),
    (free_text(), {"text": 3}, "answer.text"),
    (free_text(), {"txt": "x"}, "answer.text"),
    (free_text(), {"text": "x", "extra": 1}, "answer.extra"),
    (free_text(), 42, "answer"),
]


@pytest.mark.parametrize(("policy", "answer"), VALID)
def test_valid_answers_pass(policy: Policy, answer: Any) -> None:
    policy.check_answer(answer)


@pytest.mark.parametrize(("policy", "answer", "field"), INVALID)
def test_invalid_answers_name_the_offending_field(policy: Policy, answer: Any, field: str) -> None:
    """ "check_answer enforces them; the error's field names the offending path" (library-api.md)."""
    with pytest.raises(AnswerInvalidError) as err:
        policy.check_answer(answer)
    assert err.value.field == field
    assert err.value.code == "invalid_answer"


def test_constructors_and_defaults() -> None:
    assert approval() == Policy() == Policy(kind="approval", bind=True)
    assert decision(["a"]).options == ["a"]
    assert edit().kind == "edit"
    assert free_text() == Policy(kind="text", bind=False)
    assert free_text(bind=True).bind is True
    assert Policy().model_dump(mode="json") == {
        "kind": "approval",
        "prompt": None,
        "options": None,
        "ttl": None,
        "on_expiry": None,
        "reminders": [],
        "responders": [],
        "bind": True,
    }


@pytest.mark.parametrize(
    "kwargs",
    [
        {"kind": "decision"},
        {"kind": "decision", "options": []},
        {"kind": "decision", "options": ["a", "a"]},
        {"kind": "approval", "options": ["a"]},
        {"kind": "vote"},
        {"ttl": 0},
        {"reminders": [-1]},
        {"ttl": 60, "reminders": [60]},
        {"unknown": 1},
        {"on_expiry": {"action": "default"}},
        {"on_expiry": {"action": "escalate"}},
        {"on_expiry": {"action": "default", "answer": {"action": "maybe"}}},
    ],
)
def test_inconsistent_policies_are_refused(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        Policy(**kwargs)


def test_on_expiry_and_responders_round_trip() -> None:
    policy = approval(
        ttl=3600,
        reminders=[600, 1800],
        responders=["arn:aws:iam::123:user/ops"],
        on_expiry=OnExpiry(action="default", answer={"action": "reject", "reason": "timed out"}),
    )
    assert Policy.model_validate(policy.model_dump(mode="json")) == policy
    escalate = OnExpiry(action="escalate", to=["oncall"])
    assert approval(on_expiry=escalate).on_expiry == escalate


def test_policy_is_frozen() -> None:
    with pytest.raises(ValidationError):
        Policy().ttl = 5  # type: ignore[misc]


def test_resolve_policy_refuses_what_it_cannot_read() -> None:
    with pytest.raises(TypeError):
        resolve_policy(3)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        resolve_policy(lambda: "approval")  # type: ignore[arg-type, return-value]


def test_resolve_policy_takes_constructors_but_no_factories() -> None:
    """A factory is not a policy: the docs promise a Policy, a kind or a constructor, nothing else."""
    assert [resolve_policy(c) for c in (approval, edit, free_text)] == [approval(), edit(), free_text()]
    with pytest.raises(TypeError, match=r"approval\(ttl=60\)"):
        resolve_policy(lambda: approval(ttl=60))
    with pytest.raises(TypeError, match="options"):
        resolve_policy(decision)


# -- check_answer with the question: edits may only name the question's args -----------------------

QUESTION: dict[str, Any] = {"function": "issue_refund", "args": {"customer": "c-17", "amount": 40}}


def test_edits_naming_a_published_arg_pass_with_the_question() -> None:
    approval().check_answer({"action": "approve", "args": {"amount": 25}}, QUESTION)
    approval().check_answer({"action": "approve", "args": {}}, QUESTION)
    approval().check_answer({"action": "approve"}, QUESTION)


@pytest.mark.parametrize("key", ["amonut", "ctx", "decision"])
def test_an_edit_to_an_unknown_arg_is_refused_at_reply_time(key: str) -> None:
    """A typo is a 422 when the reply comes in, not a recorded answer that fails every resume."""
    with pytest.raises(AnswerInvalidError) as err:
        approval().check_answer({"action": "approve", "args": {"amount": 25, key: 1}}, QUESTION)
    assert err.value.field == f"answer.args.{key}"
    assert err.value.message == f"issue_refund() has no published argument {key!r} to edit"


@pytest.mark.parametrize(
    "question",
    [None, "Which colour?", {"args": {"amount": 40}}, {"function": "f", "args": "not a dict"}, ["f"]],
)
def test_without_a_wait_question_edits_are_not_checked_against_args(question: Any) -> None:
    approval().check_answer({"action": "approve", "args": {"anything": 1}}, question)


def test_an_edit_answer_value_is_not_an_args_edit() -> None:
    edit().check_answer({"action": "edit", "value": {"anything": 1}}, QUESTION)


def test_check_arg_edits_refuses_a_non_object() -> None:
    with pytest.raises(AnswerInvalidError) as err:
        check_arg_edits(["amount"], {"amount": 40}, "f")
    assert err.value.field == "answer.args"
