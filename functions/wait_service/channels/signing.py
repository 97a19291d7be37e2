"""Signed requests on the deployed api: ``/signed/...`` routes verified in the Lambda.

Systems that answer questions (ticketing, on-call tools) can often sign a request with a shared
secret but cannot hold AWS credentials. For them the api has a signed route set with no API
Gateway authorizer: every request under ``/signed`` is verified here, over the raw body, before
anything else reads it (the scheme: :mod:`agent_wait.signing`). Then, in order:

1. the three headers are present (else ``signature_missing``);
2. the key id is configured (``unknown_key``);
3. the timestamp is within 300 seconds of the clock, either way (``timestamp_out_of_window``);
4. the signature matches the key's current secret or, during a rotation, its previous one
   (``signature_invalid``);
5. the signature was never used before (``replayed``): it is remembered for the window with a
   conditional write on the ledger (item ``signature:<key id>:<hex>``, which DynamoDB's TTL
   removes later).

Every refusal is a 401 naming its reason, never a 5xx. A verified request is handed to the
unsigned route of the same name (``/signed/questions/q1/reply`` → ``/questions/q1/reply``) with
principal ``hmac:<key id>``; only the routes in :data:`SIGNED_ROUTES` are reachable this way.
"""

from __future__ import annotations

import copy
import re
import time
import urllib.parse
from typing import TYPE_CHECKING, Any, Protocol

from agent_wait import signing
from agent_wait.errors import AgentWaitError
from wait_service.clients import CLIENT_CONFIG
from wait_service.observability import logger

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from mypy_boto3_dynamodb import DynamoDBClient

SIGNED_PREFIX = "/signed"
HMAC_PRINCIPAL_PREFIX = "hmac:"
# The routes a signed request may reach, by the unsigned route it is handed to. To sign another
# route, add it here: the CDK stack creates its /signed twin from this list.
SIGNED_ROUTES: tuple[tuple[str, str], ...] = (
    ("POST", "/questions/{question_id}/reply"),
    ("POST", "/questions/{question_id}/revoke"),
    ("POST", "/threads/{thread_id}/runs"),
    # Read before a reply, so a signing system (and the CLI) can send the ETag it was shown.
    ("GET", "/questions/{question_id}"),
)
SECRET_CACHE_SECONDS = 60
CURRENT, PREVIOUS = "AWSCURRENT", "AWSPREVIOUS"


class SignatureRejectedError(AgentWaitError):
    """A signed request that does not verify: the api answers 401 with ``code`` as ``error``.

    Examples
    --------
    >>> SignatureRejectedError("replayed", "this signature was already used").to_dict()["error"]
    'replayed'
    """

    code = "unauthorized"

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def _route_pattern(template: str) -> re.Pattern[str]:
    return re.compile("^" + re.sub(r"\\\{[a-z_]+\\\}", "[^/]+", re.escape(template)) + "$")


_SIGNED_PATTERNS = tuple((method, _route_pattern(template)) for method, template in SIGNED_ROUTES)


def is_signed_path(path: str) -> bool:
    """Whether ``path`` is under the signed route set.

    Examples
    --------
    >>> is_signed_path("/signed/questions/q1/reply"), is_signed_path("/signedx"), is_signed_path("/questions")
    (True, False, False)
    """
    return path == SIGNED_PREFIX or path.startswith(SIGNED_PREFIX + "/")


def is_signed_route(method: str, path: str) -> bool:
    """Whether ``method`` and the unsigned ``path`` are in :data:`SIGNED_ROUTES`.

    Examples
    --------
    >>> is_signed_route("POST", "/questions/q1/reply"), is_signed_route("GET", "/questions")
    (True, False)
    """
    return any(m == method.upper() and pattern.match(path) for m, pattern in _SIGNED_PATTERNS)


class KeyStore(Protocol):
    """Secrets by key id: the current one first, then the previous one during a rotation."""

    def known(self, key_id: str) -> bool: ...

    def secrets(self, key_id: str) -> list[str]: ...


class SecretsManagerKeys:
    """Signing secrets in Secrets Manager, one secret per key id, read through Powertools Parameters.

    The secret string is the shared secret itself. ``AWSCURRENT`` is read first; ``AWSPREVIOUS``
    only when the current one does not verify, so both work while a rotation is under way. Each
    is cached for ``max_age`` seconds (one provider per stage: Powertools caches by name only).

    Examples
    --------
    >>> keys = SecretsManagerKeys({"ops": "arn:aws:secretsmanager:eu-west-1:1:secret:ops-AbCdEf"})
    >>> keys.known("ops"), keys.known("other")
    (True, False)
    """

    def __init__(
        self,
        arns: Mapping[str, str],
        *,
        client: Any = None,
        max_age: int = SECRET_CACHE_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.arns = dict(arns)
        self._client = client
        self.max_age = max_age
        self._clock = clock
        self._providers: dict[str, Any] = {}
        self._missing_previous: dict[str, float] = {}

    def _provider(self, stage: str) -> Any:
        if stage not in self._providers:
            from aws_lambda_powertools.utilities.parameters import SecretsProvider

            self._providers[stage] = SecretsProvider(boto3_client=self._client)
        return self._providers[stage]

    def _get(self, arn: str, stage: str) -> str:
        value = self._provider(stage).get(arn, max_age=self.max_age, VersionStage=stage)
        return value.decode("utf-8") if isinstance(value, bytes) else str(value)

    def known(self, key_id: str) -> bool:
        return key_id in self.arns

    def secrets(self, key_id: str) -> list[str]:
        arn = self.arns[key_id]
        found = [self._get(arn, CURRENT)]
        missing_since = self._missing_previous.get(arn)
        if missing_since is not None and self._clock() - missing_since < self.max_age:
            return found
        try:
            found.append(self._get(arn, PREVIOUS))
        except Exception:  # no AWSPREVIOUS version (never rotated): remember that for max_age
            self._missing_previous[arn] = self._clock()
        else:
            self._missing_previous.pop(arn, None)
        return found


class ReplayGuard(Protocol):
    def first_use(self, key_id: str, signature: str, until: int) -> bool: ...


def check_first_use(replays: ReplayGuard, key_id: str, signature: str, until: int) -> None:
    """Remember ``signature`` as used until ``until`` (unix seconds); refuse it if it was used before.

    The one replay check of every signed request, on the deployed ``/signed`` routes and behind
    the local gateway's ``--hmac-key``.

    Raises
    ------
    SignatureRejectedError
        ``replayed``: the signature was used before, or cannot be recorded now (fail closed:
        without the record a replay could not be told apart).
    """
    try:
        first = replays.first_use(key_id, signature, until)
    except Exception:
        logger.exception("cannot record the signature", extra={"key_id": key_id})
        raise SignatureRejectedError(
            "replayed", "the signature could not be recorded as used; sign the request again"
        ) from None
    if not first:
        raise SignatureRejectedError("replayed", "this signature was already used")


class LedgerReplayGuard:
    """Remembers each signature on the ledger with a conditional write; the second use is refused.

    The item ``signature:<key id>:<hex>`` carries ``kind = signature`` and ``expires_ttl`` (the end
    of the signature's window), has no ``status`` or ``created_at`` and so never shows in the
    question indexes.
    """

    def __init__(self, table: str, client: DynamoDBClient | None = None) -> None:
        import boto3

        self.table = table
        self._client = client or boto3.client("dynamodb", config=CLIENT_CONFIG)

    def first_use(self, key_id: str, signature: str, until: int) -> bool:
        try:
            self._client.update_item(
                TableName=self.table,
                Key={"dedupe_key": {"S": f"signature:{key_id}:{signature.removeprefix('v0=')}"}},
                UpdateExpression="SET #kind = :kind, expires_ttl = :until",
                ConditionExpression="attribute_not_exists(dedupe_key)",
                ExpressionAttributeNames={"#kind": "kind"},
                ExpressionAttributeValues={":kind": {"S": "signature"}, ":until": {"N": str(until)}},
            )
        except self._client.exceptions.ConditionalCheckFailedException:
            return False
        return True


def _header(headers: Mapping[str, Any] | None, name: str) -> str | None:
    wanted = name.lower()
    for key, value in (headers or {}).items():
        if str(key).lower() == wanted:
            return None if value is None else str(value)
    return None


def raw_body(event: Mapping[str, Any]) -> bytes:
    """The request body as the caller sent it (API Gateway passes text, or base64 for binary)."""
    import base64

    body = event.get("body") or ""
    if event.get("isBase64Encoded"):
        return base64.b64decode(body)
    return body.encode("utf-8") if isinstance(body, str) else bytes(body)


def signed_target(event: Mapping[str, Any]) -> str:
    """The path the caller signed: the event's path plus its query string, if any.

    API Gateway REST passes no raw query string, so it is rebuilt from the parsed parameters in
    the order received (percent-encoded); a caller signing a query should encode it the same way.

    Examples
    --------
    >>> signed_target({"path": "/signed/x", "multiValueQueryStringParameters": {"a": ["1", "2 3"]}})
    '/signed/x?a=1&a=2%203'
    """
    path = str(event.get("path") or "/")
    query = event.get("multiValueQueryStringParameters") or {}
    pairs = [(key, value) for key, values in query.items() for value in values or []]
    if not pairs:
        return path
    return path + "?" + urllib.parse.urlencode(pairs, quote_via=urllib.parse.quote)


class SignedRequests:
    """Verifies ``/signed/...`` events and turns them into the unsigned route's event.

    Parameters
    ----------
    keys:
        Key id → secrets.
    replays:
        Where used signatures are remembered.
    clock:
        Unix seconds; injected by tests.
    tolerance:
        Seconds either way a timestamp may be from the clock (300).
    """

    def __init__(
        self,
        keys: KeyStore,
        replays: ReplayGuard,
        *,
        clock: Callable[[], float] = time.time,
        tolerance: int = signing.TOLERANCE_SECONDS,
    ) -> None:
        self.keys = keys
        self.replays = replays
        self._clock = clock
        self.tolerance = tolerance

    def authenticate(self, event: Mapping[str, Any]) -> str:
        """The key id that signed ``event``; raises :class:`SignatureRejectedError` otherwise."""
        headers = event.get("headers") or {}
        key_id = _header(headers, signing.KEY_ID_HEADER)
        timestamp = _header(headers, signing.TIMESTAMP_HEADER)
        signature = _header(headers, signing.SIGNATURE_HEADER)
        if not key_id or not timestamp or not signature:
            raise SignatureRejectedError(
                "signature_missing",
                f"sign the request: {signing.KEY_ID_HEADER}, {signing.TIMESTAMP_HEADER} and "
                f"{signing.SIGNATURE_HEADER} are required on /signed routes",
            )
        if not self.keys.known(key_id):
            raise SignatureRejectedError("unknown_key", f"no signing key is configured with id {key_id!r}")
        now = self._clock()
        sent_at = signing.parse_timestamp(timestamp)
        if sent_at is None:
            raise SignatureRejectedError(
                "signature_invalid", f"{signing.TIMESTAMP_HEADER} is not unix seconds"
            )
        if abs(now - sent_at) > self.tolerance:
            raise SignatureRejectedError(
                "timestamp_out_of_window",
                f"{signing.TIMESTAMP_HEADER} is more than {self.tolerance} seconds from the api's clock",
            )
        try:
            secrets = self.keys.secrets(key_id)
        except Exception:
            logger.exception("cannot read the signing secret", extra={"key_id": key_id})
            raise SignatureRejectedError(
                "unknown_key", f"the secret of key {key_id!r} cannot be read now; try again later"
            ) from None
        method = str(event.get("httpMethod") or "")
        target, body = signed_target(event), raw_body(event)
        if_match = _header(headers, "If-Match")
        if not any(
            signing.verify(
                secret,
                sent_at,
                signature,
                method,
                target,
                body,
                if_match=if_match,
                now=now,
                tolerance=self.tolerance,
            )
            for secret in secrets
        ):
            raise SignatureRejectedError(
                "signature_invalid",
                "the signature does not match v0:{timestamp}:{METHOD}:{path}:{If-Match}:{body}",
            )
        check_first_use(self.replays, key_id, signature, sent_at + self.tolerance)
        return key_id

    def unsigned_event(self, event: Mapping[str, Any], key_id: str) -> dict[str, Any]:
        """``event`` as the unsigned route receives it, with principal ``hmac:<key id>``."""
        inner = copy.deepcopy(dict(event))
        path = str(inner.get("path") or "")[len(SIGNED_PREFIX) :] or "/"
        inner["path"] = path
        context = dict(inner.get("requestContext") or {})
        identity = dict(context.get("identity") or {})
        for name in ("userArn", "user", "caller", "cognitoIdentityId", "accessKey"):
            identity[name] = None
        context["identity"] = identity
        context["authorizer"] = {"principalId": HMAC_PRINCIPAL_PREFIX + key_id}
        inner["requestContext"] = context
        return inner


def build_signed_requests(
    key_arns: Mapping[str, str],
    ledger_table: str,
    *,
    secretsmanager: Any = None,
    dynamodb: DynamoDBClient | None = None,
    clock: Callable[[], float] = time.time,
    max_age: int = SECRET_CACHE_SECONDS,
) -> SignedRequests:
    """Signed requests checked against Secrets Manager, with replays remembered on the ledger."""
    return SignedRequests(
        SecretsManagerKeys(key_arns, client=secretsmanager, max_age=max_age),
        LedgerReplayGuard(ledger_table, dynamodb),
        clock=clock,
    )
