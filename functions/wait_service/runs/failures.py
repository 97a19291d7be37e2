"""Which failures are worth retrying: a throttle, a timeout or a 5xx of an AWS call.

The runner retries a message (with backoff) on these and fails a run on anything else; the
checkpointer raises :class:`InfrastructureError` for a store that fails the same way. A module of
its own so both read it without importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass

from botocore.exceptions import ClientError
from botocore.retries.standard import RetryContext, ThrottledRetryableChecker, TransientRetryableChecker

from agent_wait.errors import AnnounceError

__all__ = ["InfrastructureError", "is_infrastructure_failure"]


class InfrastructureError(Exception):
    """An AWS call failed in a way worth retrying; the message is retried with backoff."""


_THROTTLED, _TRANSIENT = ThrottledRetryableChecker(), TransientRetryableChecker()


def is_infrastructure_failure(exc: BaseException) -> bool:
    """Whether ``exc`` (or what it was raised from) is a throttle, timeout or 5xx of an AWS call.

    botocore's own retry checkers decide, so the runner retries exactly what the SDK itself
    would have: throttling codes, transient codes and 5xx statuses, and connection errors.

    Examples
    --------
    >>> from botocore.exceptions import ClientError, EndpointConnectionError
    >>> throttled = ClientError({"Error": {"Code": "ThrottlingException"}}, "PutItem")
    >>> is_infrastructure_failure(throttled), is_infrastructure_failure(KeyError("customer"))
    (True, False)
    >>> is_infrastructure_failure(EndpointConnectionError(endpoint_url="https://x"))
    True
    """
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, InfrastructureError | AnnounceError):
            return True
        if isinstance(current, ClientError):
            status = current.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            context = RetryContext(
                attempt_number=1,
                parsed_response=dict(current.response),
                http_response=_Status(status) if isinstance(status, int) else None,
            )
            if _THROTTLED.is_retryable(context) or _TRANSIENT.is_retryable(context):
                return True
        else:
            context = RetryContext(attempt_number=1, caught_exception=current)  # type: ignore[arg-type]
            if _TRANSIENT.is_retryable(context):
                return True
        current = current.__cause__ or current.__context__
    return False


@dataclass(frozen=True)
class _Status:
    status_code: int
