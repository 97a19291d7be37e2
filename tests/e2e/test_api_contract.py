"""The OpenAPI document is the contract: schemathesis checks the running api against it.

Generated requests (valid and invalid, from the document served at ``GET /openapi.json``) go to
the local stack over HTTP; every check schemathesis has runs on every response: no 5xx, every
status, header, content type and body as documented, invalid data refused, unsupported methods
405 with ``Allow``. Generation is derandomized, so a run is repeatable.
"""

from __future__ import annotations

import json
import uuid
from typing import TYPE_CHECKING, Any, cast

import pytest
import schemathesis
from e2e_support import http
from hypothesis import HealthCheck, settings
from schemathesis.specs.openapi.checks import ignored_auth

from wait_service.http.api import WaitApi
from wait_service.runs.input_schema import generate_input_schema
from wait_service.settings import DEFAULT_GRAPH

if TYPE_CHECKING:
    from e2e_support import LocalProcess

pytestmark = pytest.mark.e2e

# About 300 requests over the five documented operations.
EXAMPLES_PER_OPERATION = 60


def document() -> dict[str, Any]:
    """The local api's document, built in process: generating it touches no service.

    The local stack runs the default graph, whose input schema the api ships.
    """
    none = cast("Any", None)
    api = WaitApi(none, none, none, input_schema=generate_input_schema(DEFAULT_GRAPH))
    return cast("dict[str, Any]", json.loads(api.openapi_json()))


# schemathesis needs the document when tests are collected, before the stack is up; the first test
# checks that the running api serves this very document.
schema = schemathesis.openapi.from_dict(document())


def test_the_running_api_serves_this_document(local_stack: LocalProcess) -> None:
    status, _, body = http("GET", f"{local_stack.api}/openapi.json")

    assert status == 200
    assert body == document()


@schema.parametrize()
@settings(
    max_examples=EXAMPLES_PER_OPERATION,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=list(HealthCheck),
)
def test_the_api_answers_as_its_document_says(case: Any, local_stack: LocalProcess) -> None:
    if case.meta is not None and case.meta.generation.mode.is_positive and "next" in (case.query or {}):
        # A page token is opaque: one that fits the document's string is still forged, and is
        # answered 400 (tests/unit/service/test_service_api_edges.py). Valid requests page without.
        case.query = {k: v for k, v in case.query.items() if k != "next"}
    if case.meta is not None and case.meta.generation.mode.is_positive and "since" in (case.query or {}):
        # A window's first day is bound to its last (not after it, at most 366 days before it), and
        # the last defaults to today: a bound between values a document cannot state. A first day
        # out of it is answered 422 invalid_window (tests/unit/service/test_service_stats_api.py);
        # valid requests here ask for the week ending on `until`.
        case.query = {k: v for k, v in case.query.items() if k != "since"}
    headers = case.headers or {}
    idempotency = [name for name in headers if name.lower() == "idempotency-key"]
    if case.meta is not None and case.meta.generation.mode.is_positive and idempotency:
        # Generated keys repeat across generated bodies: a key reused with another body is a
        # client's mistake, answered 422 idempotency_conflict (tests/unit/service/
        # test_service_idempotent_starts.py). Valid requests here each get a key of their own.
        case.headers = {**headers, idempotency[0]: uuid.uuid4().hex}
    # The local stack without --hmac-key is unauthenticated on purpose (anyone on this machine);
    # the documented SigV4 / JWT schemes are enforced by API Gateway when deployed.
    case.call_and_validate(base_url=local_stack.api, excluded_checks=[ignored_auth])
