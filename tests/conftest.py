"""Fixtures shared by every test layer.

Unit tests touch no network. Integration tests use ``moto_server``: one moto server per session,
bound to 127.0.0.1 on a free port and serving one request at a time (see
``agent_wait_cli.local.moto_server``), so DynamoDB conditional writes stay atomic as on AWS.
"""

from __future__ import annotations

import functools
import json
import os
import tempfile
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import botocore
import botocore.loaders
import pytest

if TYPE_CHECKING:
    from collections.abc import Iterator

    from agent_wait_cli.local.moto_server import SerializedMotoServer
    from wait_service.resources import LocalResources

# Never reach a real account from a test, whatever the developer's shell exports.
for _var in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN", "AWS_ENDPOINT_URL"):
    os.environ.pop(_var, None)
os.environ["AWS_ACCESS_KEY_ID"] = "testing"
os.environ["AWS_SECRET_ACCESS_KEY"] = "testing"
os.environ["AWS_DEFAULT_REGION"] = "us-east-1"
os.environ["AWS_REGION"] = "us-east-1"
os.environ.setdefault("POWERTOOLS_TRACE_DISABLED", "1")
os.environ.setdefault("POWERTOOLS_METRICS_NAMESPACE", "AgentWaitTests")
os.environ.setdefault("POWERTOOLS_SERVICE_NAME", "agent-wait-tests")

# moto's mock_aws gives every test a fresh boto3 session, and each new botocore session reads and
# parses botocore's endpoint and service-model files again (half a second to a second per test, most
# of a unit test's setup, in botocore's parse into OrderedDicts). The files botocore installs are read
# once per process and parsed by the C parser into fresh dicts for each session: sessions never share
# a parsed model, which botocore amends in place (a shared one broke SQS's modeled errors). Any other
# path (a test's own copy of a model) is read as before.
BOTOCORE_DATA = os.path.join(os.path.dirname(botocore.__file__), "data") + os.sep
_read_json = botocore.loaders.JSONFileLoader._load_file


@functools.cache
def _installed_text(full_path: str, open_method: Any) -> str | None:
    if not os.path.isfile(full_path):
        return None
    with open_method(full_path, "rb") as file:
        return str(file.read().decode("utf-8"))


def _load_json(self: Any, full_path: str, open_method: Any) -> Any:
    if full_path.startswith(BOTOCORE_DATA):
        text = _installed_text(full_path, open_method)
        return None if text is None else json.loads(text)
    return _read_json(self, full_path, open_method)


botocore.loaders.JSONFileLoader._load_file = _load_json  # type: ignore[method-assign]


def _moto_transactions_back_up_without_their_stream() -> None:
    """For ``mock_aws`` too, not only the local stack's server (imported here, once the environment
    above is set)."""
    from agent_wait_cli.local.moto_server import back_up_transactions_without_their_stream

    back_up_transactions_without_their_stream()


_moto_transactions_back_up_without_their_stream()


def _in_process_moto_serves_one_request_at_a_time() -> None:
    """moto in process (``mock_aws``) answers each request on the calling thread, and its backends
    are not safe under concurrent requests: a read of an item another thread is updating can fail
    inside moto (a projection walks the item's attributes as they change). AWS applies each request
    to an item atomically, and the moto server the local stack and the integration tests use serves
    one request at a time (``agent_wait_cli.local.moto_server``); in process, one lock does the same,
    so tests that race two callers race them request by request, as on AWS."""
    import threading

    from moto.core.botocore_stubber import BotocoreStubber

    serve = BotocoreStubber.__call__
    one_at_a_time = threading.RLock()

    def serialized(self: Any, event_name: str, request: Any, **kwargs: Any) -> Any:
        if not self.enabled:
            return None
        with one_at_a_time:
            return serve(self, event_name, request, **kwargs)

    BotocoreStubber.__call__ = serialized  # type: ignore[method-assign]


_in_process_moto_serves_one_request_at_a_time()


TESTS = Path(__file__).parent


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Keep tests that share an expensive fixture on one xdist worker (``--dist loadgroup``).

    ``make test`` runs the suite on every core. Each worker is its own process with its own moto
    server, so a fixture scoped to a module or the session is built once per worker that runs any of
    its tests. The infra tests that read the session's synthesized apps (``synth_factory``, the
    slowest fixtures of all) form one group; an infra module that synthesizes only its own, and an
    end-to-end module (which shares its local stack), are each a group of their own. Every other
    test is spread one by one.

    It runs first: each worker's xdist plugin reads the groups in its own hook, which would
    otherwise run before this one (the plugin registers after the initial conftests) and find none.
    """
    # (any_synth and every_synth pick their app at run time, so they name no synth fixture of their own)
    shared = {"synth_factory", "any_synth", "every_synth"}
    reads_shared_apps = {
        item.path for item in items if shared.intersection(getattr(item, "fixturenames", ()))
    }
    for item in items:
        parts = item.path.relative_to(TESTS).parts
        if parts[0] == "infra" and item.path in reads_shared_apps:
            group = "infra"
        elif parts[0] == "infra":
            group = "/".join(parts)
        elif parts[0] == "e2e":
            group = "/".join(parts)
        else:
            continue
        item.add_marker(pytest.mark.xdist_group(group))


@pytest.fixture(scope="session", autouse=True)
def _temporary_files_in_pytests_folder(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """What the code under test leaves in the temporary folder goes into pytest's, which keeps only
    the last few runs' (a local stack's audit archive outlives the stack on purpose: a person queries
    it afterwards). Child processes get the same folder through ``TMPDIR``."""
    folder = str(tmp_path_factory.mktemp("tmp"))
    previous = tempfile.tempdir, os.environ.get("TMPDIR")
    tempfile.tempdir = folder
    os.environ["TMPDIR"] = folder
    try:
        yield
    finally:
        tempfile.tempdir = previous[0]
        if previous[1] is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = previous[1]


@pytest.fixture(scope="session")
def moto_server() -> Iterator[SerializedMotoServer]:
    from agent_wait_cli.local.moto_server import SerializedMotoServer

    server = SerializedMotoServer(host="127.0.0.1", port=0)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def aws_client(moto_server: SerializedMotoServer) -> Any:
    """``aws_client("sqs")``: a real boto3 client talking HTTP to the moto server."""
    import boto3

    def make(service: str) -> Any:
        return boto3.client(service, endpoint_url=moto_server.endpoint, region_name="us-east-1")

    return make


@pytest.fixture
def resources(aws_client: Any) -> LocalResources:
    """A fresh set of agent-wait resources under a unique prefix (moto's state is per process)."""
    from wait_service.resources import create_resources

    prefix = f"t{uuid.uuid4().hex[:8]}-"
    return create_resources(
        aws_client("dynamodb"), aws_client("sqs"), aws_client("sns"), prefix=prefix, s3=aws_client("s3")
    )


@pytest.fixture
def dispatch(resources: LocalResources, aws_client: Any) -> Any:
    """``dispatch()``: hand the ledger's new stream records to the dispatcher, as Lambda's mapping does.

    ``dispatch(sqs=client)`` sends with that client (a test watching its calls); returns the number
    of records read. What a recorded start or decision needs is on the inbox afterwards.
    """
    from agent_wait_cli.local.streams import StreamReader
    from wait_service.settings import Settings
    from wait_service.stream.dispatcher import build_ledger_stream

    readers: dict[int, StreamReader] = {}

    def run(sqs: Any = None) -> int:
        client = sqs or aws_client("sqs")
        reader = readers.get(id(sqs))
        if reader is None:
            stream = build_ledger_stream(
                Settings.from_env(resources.env()),
                dynamodb=aws_client("dynamodb"),
                sqs=client,
                sns=aws_client("sns"),
            )
            assert resources.ledger_stream_arn is not None
            reader = readers[id(sqs)] = StreamReader(
                aws_client("dynamodbstreams"),
                resources.ledger_stream_arn,
                lambda event, _: [stream.process(record) for record in event["Records"]],
            )
        return reader.drain()

    return run
