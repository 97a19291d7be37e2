"""The one place where errors become HTTP responses.

Every refusal the receive path makes is an ``agent_wait.errors`` error; this module gives each
its status code and the api's single error shape ``{"error", "message", "question_id"?, ...}``.
Request validation failures from the resolver map to ``invalid_request`` (400) naming the field.
An AWS call that is throttled or fails on AWS's side (DynamoDB's
``ProvisionedThroughputExceededException``, ``ThrottlingException``, ``InternalServerError``,
after botocore's own retries) is ``service_unavailable`` (503) with ``Retry-After``: the request
changed nothing that a retry would not find, and it is never mistaken for a missing question.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.exceptions import (
    RequestUnsupportedContentType,
    RequestValidationError,
)
from botocore.exceptions import BotoCoreError, ClientError, HTTPClientError
from botocore.exceptions import ConnectionError as AwsConnectionError

from agent_wait.errors import (
    AgentWaitError,
    AlreadyResponderError,
    AlreadyVotedError,
    AnswerConflictError,
    AnswerInvalidError,
    DelegationInvalidError,
    ExtensionInvalidError,
    IdempotencyConflictError,
    IdempotencyInProgressError,
    InputInvalidError,
    InvalidRequestError,
    InvalidWindowError,
    MethodNotAllowedError,
    PayloadTooLargeError,
    PreconditionFailedError,
    PreconditionRequiredError,
    QuestionClosedError,
    QuestionDecidedError,
    QuestionNotFoundError,
    ResponderNotAllowedError,
    ThreadBusyError,
    ThreadNotFoundError,
    UnsupportedMediaTypeError,
)
from agent_wait.exact_json import dumps
from wait_service.channels.signing import SignatureRejectedError
from wait_service.observability import logger

if TYPE_CHECKING:
    from collections.abc import Sequence

    from aws_lambda_powertools.event_handler import APIGatewayRestResolver

JSON = "application/json"
# Seconds a client waits before retrying a 503: DynamoDB's throttling clears within a second or two.
RETRY_AFTER_SECONDS = 1
# AWS error codes that mean "not now" rather than "not so": throttling and AWS's own failures.
UNAVAILABLE_CODES = frozenset(
    {
        "ProvisionedThroughputExceededException",
        "ThrottlingException",
        "Throttling",
        "RequestLimitExceeded",
        "InternalServerError",
        "InternalFailure",
        "ServiceUnavailable",
        "ServiceUnavailableException",
        "TransactionConflictException",
        "TransactionInProgressException",
        "RequestThrottled",
    }
)


class ServiceUnavailableError(AgentWaitError):
    """A store the request needs is throttled or failing: 503 with ``Retry-After``."""

    code = "service_unavailable"

    def __init__(self, message: str, *, retry_after: int = RETRY_AFTER_SECONDS) -> None:
        super().__init__(message)
        self.retry_after = retry_after


def unavailable(error: BaseException) -> ServiceUnavailableError | None:
    """The 503 an AWS failure is answered with, or ``None`` when it is not a transient one.

    Examples
    --------
    >>> throttled = ClientError({"Error": {"Code": "ThrottlingException"}}, "UpdateItem")
    >>> unavailable(throttled).message
    'UpdateItem was refused for now (ThrottlingException); retry after 1 s'
    >>> unavailable(ClientError({"Error": {"Code": "ValidationException"}}, "UpdateItem")) is None
    True
    """
    if isinstance(error, ClientError):
        code = str(error.response.get("Error", {}).get("Code") or "")
        if code in UNAVAILABLE_CODES:
            return ServiceUnavailableError(
                f"{error.operation_name} was refused for now ({code}); retry after {RETRY_AFTER_SECONDS} s"
            )
    elif isinstance(error, AwsConnectionError | HTTPClientError):
        return ServiceUnavailableError(
            f"an AWS service could not be reached; retry after {RETRY_AFTER_SECONDS} s"
        )
    return None


STATUS_BY_ERROR: dict[type[AgentWaitError], int] = {
    QuestionNotFoundError: 404,
    ThreadNotFoundError: 404,
    QuestionClosedError: 410,
    AnswerConflictError: 409,
    ThreadBusyError: 409,
    PreconditionFailedError: 412,
    PreconditionRequiredError: 428,
    AnswerInvalidError: 422,
    ResponderNotAllowedError: 403,
    PayloadTooLargeError: 413,
    InvalidRequestError: 400,
    SignatureRejectedError: 401,
    UnsupportedMediaTypeError: 415,
    MethodNotAllowedError: 405,
    IdempotencyConflictError: 422,
    IdempotencyInProgressError: 409,
    InputInvalidError: 422,
    InvalidWindowError: 422,
    ServiceUnavailableError: 503,
    QuestionDecidedError: 409,
    AlreadyResponderError: 409,
    AlreadyVotedError: 409,
    DelegationInvalidError: 422,
    ExtensionInvalidError: 422,
}


# Errors of modules only some callers load, by module and class name: mapping them must not import
# their module (``wait_service.answers.policy_store`` pulls in the policy model's machinery).
STATUS_BY_ERROR_NAME: dict[tuple[str, str], int] = {
    ("wait_service.answers.policy_store", "PolicyInvalidError"): 422,
    ("wait_service.answers.policy_store", "PolicyConflictError"): 409,
}


def status_for(error: AgentWaitError) -> int:
    """The HTTP status of an ``agent_wait`` error; 500 for one the api does not expect.

    Examples
    --------
    >>> status_for(QuestionClosedError("expired", status="expired"))
    410
    """
    for cls in type(error).__mro__:
        if cls in STATUS_BY_ERROR:
            return STATUS_BY_ERROR[cls]
        status = STATUS_BY_ERROR_NAME.get((cls.__module__, cls.__qualname__))
        if status is not None:
            return status
    return 500


def error_body(error: AgentWaitError) -> dict[str, Any]:
    """The error as JSON: the library's shape plus what a client needs to act on it.

    Examples
    --------
    >>> error_body(ThreadBusyError("answer first", pending=["q1"], thread_id="t1"))
    {'error': 'thread_waiting', 'message': 'answer first', 'thread_id': 't1', 'pending': ['q1']}
    """
    body = error.to_dict()
    if isinstance(error, AnswerConflictError):
        body["standing_answer"] = error.standing_answer
    elif isinstance(error, ThreadBusyError):
        body["pending"] = error.pending
    elif isinstance(error, QuestionClosedError | QuestionDecidedError):
        body["status"] = error.status
        if error.standing_answer is not None:
            body["standing_answer"] = error.standing_answer
    elif (
        isinstance(
            error,
            AnswerInvalidError
            | InvalidRequestError
            | InputInvalidError
            | DelegationInvalidError
            | ExtensionInvalidError,
        )
        and error.field
    ):
        body["field"] = error.field
    elif isinstance(error, ResponderNotAllowedError | AlreadyResponderError | AlreadyVotedError):
        body["principal"] = error.principal
        if isinstance(error, ResponderNotAllowedError) and error.rung is not None:
            # Which responders were checked: the policy's own (rung 0) or an escalation rung's.
            body["rung"] = error.rung
            if error.route is not None:
                body["route"] = error.route
    elif isinstance(error, MethodNotAllowedError):
        body["allow"] = error.allow
    return body


def error_headers(error: AgentWaitError) -> dict[str, str]:
    """Headers an error response carries besides its content type (``Allow`` on a 405).

    Examples
    --------
    >>> error_headers(MethodNotAllowedError("no", allow=["GET", "POST"]))
    {'Allow': 'GET, POST'}
    """
    if isinstance(error, MethodNotAllowedError):
        return {"Allow": ", ".join(error.allow)}
    if isinstance(error, ServiceUnavailableError):
        return {"Retry-After": str(error.retry_after)}
    return {}


def error_response(error: AgentWaitError) -> Response[str]:
    """A resolver ``Response`` for ``error``."""
    return Response(
        status_code=status_for(error),
        content_type=JSON,
        body=dumps(error_body(error)),
        headers=error_headers(error),
    )


def proxy_error(error: AgentWaitError) -> dict[str, Any]:
    """An API Gateway proxy response for ``error``, for refusals made before the resolver runs."""
    return {
        "statusCode": status_for(error),
        "headers": {"Content-Type": JSON} | error_headers(error),
        "multiValueHeaders": {},
        "body": dumps(error_body(error)),
        "isBase64Encoded": False,
    }


def not_found_proxy() -> dict[str, Any]:
    """The api's 404 for a route it does not have, as a proxy response."""
    return {
        "statusCode": 404,
        "headers": {"Content-Type": JSON},
        "multiValueHeaders": {},
        "body": dumps({"error": "not_found", "message": "no such route"}),
        "isBase64Encoded": False,
    }


def validation_error(errors: Sequence[Any]) -> InvalidRequestError:
    """The first resolver validation error as an :class:`InvalidRequestError` naming its field.

    Examples
    --------
    >>> validation_error([{"type": "missing", "loc": ("body", "answer"), "msg": "Field required"}]).field
    'answer'
    >>> validation_error([{"type": "json_invalid", "loc": ("body", 0), "msg": "JSON decode error"}]).message
    'the body is not JSON'
    """
    first: dict[str, Any] = dict(errors[0]) if errors else {}
    if first.get("type") == "json_invalid":
        return InvalidRequestError("the body is not JSON", field="body")
    loc = [str(part) for part in first.get("loc", ())]
    # Powertools prefixes the location ("body", "query", "path"); the field is what follows.
    field = ".".join(loc[1:]) if len(loc) > 1 else (loc[0] if loc else None)
    return InvalidRequestError(f"{field or 'request'}: {first.get('msg', 'invalid')}", field=field)


def register(app: APIGatewayRestResolver) -> None:
    """Install the exception handlers on ``app``: one per family, all producing the same shape."""

    @app.exception_handler(AgentWaitError)
    def _agent_wait_error(error: AgentWaitError) -> Response[str]:
        logger.info("request refused", extra={"error": error.code, "question_id": error.question_id})
        return error_response(error)

    @app.exception_handler(RequestValidationError)
    def _validation_error(error: RequestValidationError) -> Response[str]:
        return error_response(validation_error(error.errors()))

    @app.exception_handler(RequestUnsupportedContentType)
    def _unsupported_content_type(_: RequestUnsupportedContentType) -> Response[str]:
        # The request gate refuses these first; this keeps a route it does not know of at 415 too.
        return error_response(
            UnsupportedMediaTypeError("Content-Type must be application/json", field="Content-Type")
        )

    @app.not_found
    def _not_found(_: Exception) -> Response[str]:
        body = {"error": "not_found", "message": "no such route"}
        return Response(status_code=404, content_type=JSON, body=dumps(body))

    @app.exception_handler([ClientError, BotoCoreError])
    def _aws_error(error: Exception) -> Response[str]:
        refusal = unavailable(error)
        if refusal is None:
            return _unexpected(error)
        logger.warning("aws call failed", extra={"error": str(error)})
        return error_response(refusal)

    @app.exception_handler(Exception)
    def _unexpected(error: Exception) -> Response[str]:
        logger.exception("unhandled error")
        body = {"error": "internal_error", "message": "internal error"}
        return Response(status_code=500, content_type=JSON, body=dumps(body))
