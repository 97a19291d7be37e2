"""Errors raised by ``agent_wait`` and by the receive path built on it.

Every error derives from :class:`AgentWaitError` and carries the ``question_id`` / ``thread_id``
it concerns, when known. Each has a ``code``: the snake_case string the api returns as its
``error`` field, so the HTTP mapping lives in one module of the deployment.

Examples
--------
>>> from agent_wait.errors import AnswerInvalidError
>>> err = AnswerInvalidError("unknown action", field="answer.action", question_id="q1")
>>> (err.code, err.field, err.question_id)
('invalid_answer', 'answer.action', 'q1')
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "AgentWaitError",
    "AlreadyResponderError",
    "AlreadyVotedError",
    "AnnounceError",
    "AnswerConflictError",
    "AnswerInvalidError",
    "DelegationInvalidError",
    "ExtensionInvalidError",
    "FieldError",
    "IdempotencyConflictError",
    "IdempotencyInProgressError",
    "InputInvalidError",
    "InvalidRequestError",
    "InvalidWindowError",
    "MethodNotAllowedError",
    "MissingExtraError",
    "PayloadTooLargeError",
    "PreconditionFailedError",
    "PrincipalError",
    "PreconditionRequiredError",
    "QuestionClosedError",
    "QuestionCollisionError",
    "QuestionDecidedError",
    "QuestionNotFoundError",
    "RequesterCannotApproveError",
    "ResponderNotAllowedError",
    "SlackApiError",
    "ThreadBusyError",
    "ThreadNotFoundError",
    "UnsupportedMediaTypeError",
    "WebhookDeliveryError",
]


class AgentWaitError(Exception):
    """Root of every error ``agent_wait`` raises.

    Parameters
    ----------
    message:
        What went wrong, for people.
    question_id, thread_id:
        The question and thread concerned, when known.

    Examples
    --------
    >>> str(AgentWaitError("boom", question_id="q1"))
    'boom'
    """

    code: str = "agent_wait_error"

    def __init__(self, message: str, *, question_id: str | None = None, thread_id: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.question_id = question_id
        self.thread_id = thread_id

    def to_dict(self) -> dict[str, Any]:
        """The error as the api's JSON shape: ``{"error", "message", "question_id"?, "thread_id"?}``.

        Examples
        --------
        >>> QuestionNotFoundError("no such question", question_id="q1").to_dict()
        {'error': 'question_not_found', 'message': 'no such question', 'question_id': 'q1'}
        """
        body: dict[str, Any] = {"error": self.code, "message": self.message}
        if self.question_id is not None:
            body["question_id"] = self.question_id
        if self.thread_id is not None:
            body["thread_id"] = self.thread_id
        return body


class QuestionNotFoundError(AgentWaitError):
    """No question has this id."""

    code = "question_not_found"


class ThreadNotFoundError(AgentWaitError):
    """No thread has this id."""

    code = "thread_not_found"


class QuestionClosedError(AgentWaitError):
    """The question no longer takes answers (expired, revoked, resumed ...).

    ``standing_answer`` is the answer it was closed with (an expiry's default, a revocation's
    rejection), when it has one.
    """

    code = "question_closed"

    def __init__(
        self,
        message: str,
        *,
        status: str,
        standing_answer: Any = None,
        question_id: str | None = None,
        thread_id: str | None = None,
    ) -> None:
        super().__init__(message, question_id=question_id, thread_id=thread_id)
        self.status = status
        self.standing_answer = standing_answer


class AnswerConflictError(AgentWaitError):
    """A different answer already stands: the first answer wins."""

    code = "answer_conflict"

    def __init__(
        self,
        message: str,
        *,
        standing_answer: Any,
        question_id: str | None = None,
        thread_id: str | None = None,
    ) -> None:
        super().__init__(message, question_id=question_id, thread_id=thread_id)
        self.standing_answer = standing_answer


class ThreadBusyError(AgentWaitError):
    """The thread waits on questions that must be answered first."""

    code = "thread_waiting"

    def __init__(
        self,
        message: str,
        *,
        pending: list[str],
        question_id: str | None = None,
        thread_id: str | None = None,
    ) -> None:
        super().__init__(message, question_id=question_id, thread_id=thread_id)
        self.pending = list(pending)


class PreconditionFailedError(AgentWaitError):
    """The reply's ``If-Match`` does not match the question's digest."""

    code = "precondition_failed"


class PreconditionRequiredError(AgentWaitError):
    """The policy binds the answer to the digest and the reply sent no ``If-Match``."""

    code = "precondition_required"


class FieldError(AgentWaitError):
    """An error about one field of the request: ``field`` names it (``answer.action``, ``to``)."""

    def __init__(
        self,
        message: str,
        *,
        field: str,
        question_id: str | None = None,
        thread_id: str | None = None,
    ) -> None:
        super().__init__(message, question_id=question_id, thread_id=thread_id)
        self.field = field


class PrincipalError(AgentWaitError):
    """An error about one principal (who voted, who may answer already): ``principal`` names it."""

    def __init__(
        self, message: str, *, principal: str, question_id: str | None = None, thread_id: str | None = None
    ) -> None:
        super().__init__(message, question_id=question_id, thread_id=thread_id)
        self.principal = principal


class AnswerInvalidError(FieldError):
    """The answer does not have the shape the policy's kind expects.

    ``field`` names the offending path, e.g. ``answer.action``.
    """

    code = "invalid_answer"


class ResponderNotAllowedError(AgentWaitError):
    """The principal who replied is not among the policy's responders.

    ``rung`` names the escalation rung whose responders were checked (0: the policy's own, before
    any escalation) and ``route`` that rung's route; both ``None`` when no question was checked.
    """

    code = "responder_not_allowed"

    def __init__(
        self,
        message: str,
        *,
        principal: str | None,
        question_id: str | None = None,
        thread_id: str | None = None,
        rung: int | None = None,
        route: str | None = None,
    ) -> None:
        super().__init__(message, question_id=question_id, thread_id=thread_id)
        self.principal = principal
        self.rung = rung
        self.route = route


class RequesterCannotApproveError(ResponderNotAllowedError):
    """Separation of duties: the principal who started the run may not answer its question."""

    code = "requester_cannot_approve"


class QuestionDecidedError(AgentWaitError):
    """The question is decided (or past its expiry): it can no longer be delegated or extended."""

    code = "question_decided"

    def __init__(
        self,
        message: str,
        *,
        status: str,
        standing_answer: Any = None,
        question_id: str | None = None,
        thread_id: str | None = None,
    ) -> None:
        super().__init__(message, question_id=question_id, thread_id=thread_id)
        self.status = status
        self.standing_answer = standing_answer


class AlreadyResponderError(PrincipalError):
    """A delegation names a principal who may answer the question already."""

    code = "already_responder"


class AlreadyVotedError(PrincipalError):
    """A quorum counts one vote per principal: this principal voted on the question already."""

    code = "already_voted"


class DelegationInvalidError(FieldError):
    """A delegation that can never be made (to oneself, to nobody); ``field`` names it."""

    code = "invalid_delegation"


class ExtensionInvalidError(FieldError):
    """An extension the policy does not allow (past ``max_extension``, none allowed, not later)."""

    code = "invalid_extension"


class PayloadTooLargeError(AgentWaitError):
    """The request body is larger than the api accepts."""

    code = "payload_too_large"


class InvalidRequestError(AgentWaitError):
    """The request is malformed; ``field`` names what is wrong."""

    code = "invalid_request"

    def __init__(
        self,
        message: str,
        *,
        field: str | None = None,
        question_id: str | None = None,
        thread_id: str | None = None,
    ) -> None:
        super().__init__(message, question_id=question_id, thread_id=thread_id)
        self.field = field


class InvalidWindowError(InvalidRequestError):
    """A window of days that cannot be read: a date that is not ``YYYY-MM-DD``, ``until`` before
    ``since``, or too many days; ``field`` names the parameter."""

    code = "invalid_window"


class UnsupportedMediaTypeError(InvalidRequestError):
    """The request body is not ``application/json`` (UTF-8), the only type the api reads."""

    code = "unsupported_media_type"


class MethodNotAllowedError(AgentWaitError):
    """The route exists but not for this method; ``allow`` lists the methods it takes."""

    code = "method_not_allowed"

    def __init__(self, message: str, *, allow: list[str]) -> None:
        super().__init__(message)
        self.allow = list(allow)


class InputInvalidError(AgentWaitError):
    """A run's input does not fit the graph's input schema; ``field`` names where, e.g. ``input.amount``."""

    code = "invalid_input"

    def __init__(self, message: str, field: str, *, thread_id: str | None = None) -> None:
        super().__init__(message, thread_id=thread_id)
        self.field = field


class IdempotencyConflictError(AgentWaitError):
    """An ``Idempotency-Key`` was used before with a different request body."""

    code = "idempotency_conflict"


class IdempotencyInProgressError(AgentWaitError):
    """A request with the same ``Idempotency-Key`` is still being handled."""

    code = "idempotency_in_progress"


class AnnounceError(AgentWaitError):
    """An announcer could not deliver an envelope."""

    code = "announce_failed"


class QuestionCollisionError(AnnounceError):
    """A question was published under an id the ledger already holds for a different question.

    The ledger keeps the first question under its ``dedupe_key``; a second one with the same id
    but another digest would otherwise be swallowed silently (an answer to one would resume the
    other). ``stored_digest`` is the digest the ledger holds.
    """

    code = "wait.collision"

    def __init__(
        self,
        message: str,
        *,
        stored_digest: str,
        question_id: str | None = None,
        thread_id: str | None = None,
    ) -> None:
        super().__init__(message, question_id=question_id, thread_id=thread_id)
        self.stored_digest = stored_digest


class SlackApiError(AnnounceError):
    """Slack's Web API refused a call (``"ok": false``) or could not be reached.

    ``slack_error`` is Slack's own error string (``channel_not_found``, ``invalid_auth``, ...) or
    the HTTP/network failure.
    """

    code = "slack_api_error"

    def __init__(
        self,
        message: str,
        *,
        slack_error: str,
        question_id: str | None = None,
        thread_id: str | None = None,
    ) -> None:
        super().__init__(message, question_id=question_id, thread_id=thread_id)
        self.slack_error = slack_error


class WebhookDeliveryError(AnnounceError):
    """Every attempt to POST the envelope to the webhook failed."""

    code = "webhook_delivery_failed"

    def __init__(
        self,
        message: str,
        *,
        attempts: int,
        question_id: str | None = None,
        thread_id: str | None = None,
    ) -> None:
        super().__init__(message, question_id=question_id, thread_id=thread_id)
        self.attempts = attempts


class MissingExtraError(AgentWaitError, ImportError):
    """An optional part of ``agent_wait`` was imported without its extra installed.

    Examples
    --------
    >>> str(MissingExtraError("aws", module="agent_wait.aws"))
    "agent_wait.aws needs the 'aws' extra: pip install 'agent-wait[aws]'"
    """

    code = "missing_extra"

    def __init__(self, extra: str, *, module: str) -> None:
        message = f"{module} needs the {extra!r} extra: pip install 'agent-wait[{extra}]'"
        AgentWaitError.__init__(self, message)
        self.msg = message
        self.name = module
        self.path = None
        self.extra = extra
