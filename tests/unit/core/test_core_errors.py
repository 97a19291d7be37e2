"""The error hierarchy and its codes (the api maps them to HTTP status codes in one place)."""

from __future__ import annotations

import pytest

from agent_wait import errors


@pytest.mark.parametrize(
    ("cls", "kwargs", "code"),
    [
        (errors.QuestionNotFoundError, {}, "question_not_found"),
        (errors.ThreadNotFoundError, {}, "thread_not_found"),
        (errors.QuestionClosedError, {"status": "expired"}, "question_closed"),
        (errors.AnswerConflictError, {"standing_answer": {"action": "approve"}}, "answer_conflict"),
        (errors.ThreadBusyError, {"pending": ["q1"]}, "thread_waiting"),
        (errors.PreconditionFailedError, {}, "precondition_failed"),
        (errors.PreconditionRequiredError, {}, "precondition_required"),
        (errors.AnswerInvalidError, {"field": "answer.action"}, "invalid_answer"),
        (errors.ResponderNotAllowedError, {"principal": "p"}, "responder_not_allowed"),
        (errors.PayloadTooLargeError, {}, "payload_too_large"),
        (errors.InvalidRequestError, {"field": "body"}, "invalid_request"),
        (errors.AnnounceError, {}, "announce_failed"),
        (errors.WebhookDeliveryError, {"attempts": 5}, "webhook_delivery_failed"),
    ],
)
def test_every_error_has_its_code_and_carries_ids(
    cls: type[errors.AgentWaitError], kwargs: dict, code: str
) -> None:
    err = cls("msg", question_id="q1", thread_id="t1", **kwargs)
    assert isinstance(err, errors.AgentWaitError)
    assert cls.__name__.endswith("Error")
    assert err.code == code
    assert err.to_dict() == {"error": code, "message": "msg", "question_id": "q1", "thread_id": "t1"}
    for key, value in kwargs.items():
        assert getattr(err, key) == value


def test_missing_extra_is_an_import_error_naming_the_extra() -> None:
    err = errors.MissingExtraError("langgraph", module="agent_wait.langgraph")
    assert isinstance(err, ImportError) and isinstance(err, errors.AgentWaitError)
    assert "agent-wait[langgraph]" in str(err)
