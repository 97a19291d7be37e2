"""The OpenAPI document, made to say exactly what the api answers.

Powertools generates the document from the routes. Two things it says are not what the api does,
and this module corrects them:

- it documents a 422 ``HTTPValidationError`` on every route, while a request that fails
  validation is answered 400 ``invalid_request`` in the api's one :class:`ErrorBody` shape;
- it knows nothing of how the deployed api authenticates: API Gateway checks SigV4 (``auth=iam``,
  the default) or a Cognito JWT (``auth=jwt``) on every method before the Lambda runs.

Routes list their statuses with :func:`responses`, so every error status has its description and
the error shape in one place.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field, JsonValue

from wait_service.limits import EXACT_JSON_SCHEMA_KEY, STORABLE_JSON_SCHEMA

if TYPE_CHECKING:
    from aws_lambda_powertools.event_handler.openapi.models import OpenAPI
    from aws_lambda_powertools.event_handler.openapi.types import OpenAPIResponse

JSON = "application/json"
JSON_VALUE_REF = "#/components/schemas/JsonValue"
STORABLE_REF = "#/components/schemas/StorableJson"


class ErrorBody(BaseModel):
    """Every error the api answers; which optional fields appear depends on ``error``."""

    error: str = Field(description="snake_case code, e.g. invalid_request, thread_waiting")
    message: str = Field(description="what went wrong, for people")
    question_id: str | None = None
    thread_id: str | None = None
    field: str | None = Field(default=None, description="the offending field, e.g. thread_id, answer.action")
    pending: list[str] | None = Field(default=None, description="thread_waiting: the questions to answer")
    standing_answer: JsonValue = Field(default=None, description="answer_conflict: the answer that stands")
    status: str | None = Field(default=None, description="question_closed: the question's status")
    principal: str | None = Field(default=None, description="responder_not_allowed: who replied")
    rung: int | None = Field(
        default=None,
        description="responder_not_allowed: the escalation rung whose responders were checked "
        "(0: the policy's own)",
    )
    route: str | None = Field(default=None, description="responder_not_allowed: that rung's route")
    allow: list[str] | None = Field(default=None, description="method_not_allowed: the route's methods")


ERROR_DESCRIPTIONS: dict[int, str] = {
    400: "invalid_request: a malformed request (bad thread id, query, page token, body, number; a key "
    "named twice in one object, a lone UTF-16 surrogate in a string); `field` names it",
    403: "responder_not_allowed: the principal may not answer",
    404: "not found",
    409: "conflict",
    410: "question_closed: expired or revoked",
    412: "precondition_failed: If-Match differs from the question's digest",
    413: "payload_too_large: body over 256 KiB",
    415: "unsupported_media_type: the body is not application/json (UTF-8)",
    422: "the request is well formed but cannot be used",
    428: "precondition_required: the policy needs If-Match",
    503: "service_unavailable: the ledger (or another AWS service) is throttled or failing; nothing was "
    "recorded: retry after `Retry-After` seconds",
}
# Headers an error status carries besides its body.
ERROR_HEADERS: dict[int, dict[str, Any]] = {
    503: {"Retry-After": {"description": "seconds to wait before retrying", "schema": {"type": "integer"}}},
}

# The deployed api's auth modes (infra/api.py): API Gateway checks them before the Lambda runs.
SECURITY_SCHEMES: dict[str, Any] = {
    "sigv4": {
        "type": "apiKey",
        "name": "Authorization",
        "in": "header",
        "description": "auth=iam (default): AWS Signature Version 4 (API Gateway AWS_IAM authorization)",
        "x-amazon-apigateway-authtype": "awsSigv4",
    },
    "jwt": {
        "type": "http",
        "scheme": "bearer",
        "bearerFormat": "JWT",
        "description": "auth=jwt: a Cognito user pool token in Authorization",
    },
}
SECURITY: list[dict[str, list[str]]] = [{"sigv4": []}, {"jwt": []}]


def _as_component(input_schema: dict[str, Any], schemas: dict[str, Any]) -> dict[str, Any]:
    """The graph's schema as a component: its ``$defs`` become components of their own."""
    defs: dict[str, Any] = input_schema.get("$defs", {})

    def rewrite(value: Any) -> Any:
        text = json.dumps(value)
        for name in defs:
            text = text.replace(f'"#/$defs/{name}"', f'"#/components/schemas/GraphInput_{name}"')
        return json.loads(text)

    for name, definition in defs.items():
        schemas[f"GraphInput_{name}"] = rewrite(definition)
    return dict(rewrite({k: v for k, v in input_schema.items() if k != "$defs"}))


def _exact_as_json_value(value: Any) -> Any:
    """``value`` with each exact-number JSON schema (``limits.ExactJson``) as a JsonValue ``$ref``."""
    if isinstance(value, dict):
        if value.pop(EXACT_JSON_SCHEMA_KEY, None):
            return {k: v for k, v in value.items() if k != "$ref"} | {"$ref": JSON_VALUE_REF}
        return {k: _exact_as_json_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_exact_as_json_value(v) for v in value]
    return value


def responses(ok: dict[int, OpenAPIResponse], errors: dict[int, str | None]) -> dict[int, OpenAPIResponse]:
    """A route's ``responses``: its successes as given, each error status with the error shape.

    ``errors`` maps a status to its description for this route, or ``None`` for the general one.

    Examples
    --------
    >>> r = responses({200: {"description": "ok"}}, {404: "unknown thread", 400: None})
    >>> sorted(r), r[404]["description"], r[400]["description"].split(":")[0]
    ([200, 400, 404], 'unknown thread', 'invalid_request')
    """
    documented: dict[int, OpenAPIResponse] = dict(ok)
    for status, description in sorted(errors.items()):
        documented[status] = {
            "description": description or ERROR_DESCRIPTIONS[status],
            "content": {JSON: {"model": ErrorBody}},
        }
        if status in ERROR_HEADERS:
            documented[status]["headers"] = ERROR_HEADERS[status]
    return documented


def finish(schema: OpenAPI, *, input_schema: dict[str, Any] | None = None) -> str:
    """The document as JSON: Powertools' 422 replaced by what routes declare, security added.

    Request bodies' JSON values are :data:`wait_service.limits.STORABLE_JSON_SCHEMA`: the
    numbers and nesting the api takes, so a generated request the document calls valid is one
    the api accepts. With the graph's ``input_schema``, a run's ``input`` must fit it as well.

    A route that declares 422 itself keeps it (as an :class:`ErrorBody`); on every other route the
    generated ``HTTPValidationError`` 422 is dropped, and so are its schemas.
    """
    doc: dict[str, Any] = _exact_as_json_value(
        schema.model_dump(mode="json", by_alias=True, exclude_none=True)
    )
    doc.setdefault("components", {}).setdefault("schemas", {}).setdefault("JsonValue", {})
    for operations in doc.get("paths", {}).values():
        for operation in operations.values():
            if not isinstance(operation, dict) or "responses" not in operation:
                continue
            answered = operation["responses"]
            generated = answered.get("422", {}).get("content", {}).get(JSON, {}).get("schema", {})
            if generated.get("$ref", "").endswith("/HTTPValidationError"):
                del answered["422"]
            operation["security"] = SECURITY
    components = doc.setdefault("components", {})
    schemas = components.setdefault("schemas", {})
    for name in ("HTTPValidationError", "ValidationError", "ResponseValidationError"):
        schemas.pop(name, None)
    # What a request may carry is narrower than any JSON: what the ledger can store.
    for name, definition in schemas.items():
        if name.endswith("Request"):
            schemas[name] = json.loads(
                json.dumps(definition).replace(f'"{JSON_VALUE_REF}"', f'"{STORABLE_REF}"')
            )
    schemas["StorableJson"] = STORABLE_JSON_SCHEMA
    run_input = schemas.get("RunRequest", {}).get("properties", {}).get("input")
    if input_schema is not None and run_input is not None:
        schemas["GraphInput"] = _as_component(input_schema, schemas)
        run_input.pop("$ref", None)
        run_input["allOf"] = [{"$ref": "#/components/schemas/GraphInput"}, {"$ref": STORABLE_REF}]
        # The default input, {}, is only valid if the graph's schema takes it: send one.
        run_input.pop("default", None)
        schemas["RunRequest"]["required"] = sorted({*schemas["RunRequest"].get("required", []), "input"})
    components["securitySchemes"] = SECURITY_SCHEMES
    return json.dumps(doc)
