"""Fixtures for the receive path's unit tests.

AWS is moto's in-process ``mock_aws`` (no server, no network); the ledger, inbox, outbox and
topic come from ``wait_service.resources`` exactly as the stack creates them. Time is a
``FakeClock``. Helpers and sample events: ``service_events.py`` and ``tests/events/``.
"""

from __future__ import annotations

import copy
import copyreg
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import boto3
import pytest
from botocore.config import Config
from moto import mock_aws
from moto.backends import get_backend
from service_events import Aws, FakeClock, LambdaContext, load_handler

from wait_service.http.api import WaitApi, build_api
from wait_service.resources import LocalResources, create_resources
from wait_service.settings import Settings

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


ACCOUNT = "123456789012"
SERVICES = ("dynamodb", "sqs", "sns", "scheduler")
# moto drops boto3's default session at each start by default; code under test that makes its own
# clients (``boto3.client``) would then build a new botocore session, and parse its models again, in
# every test. The session holds no AWS state (that is moto's), so the worker keeps one.
MOCK_CONFIG: dict[str, Any] = {"core": {"reset_boto3_session": False}}


@contextmanager
def _locks_copied_as_new_locks() -> Iterator[None]:
    """moto's backends hold locks, which ``copy.deepcopy`` refuses (or, inside a condition, would copy
    half of); while this is open a copied lock or condition is a new one of the same kind, unheld."""
    kinds: dict[type, Callable[[], Any]] = {
        type(threading.Lock()): threading.Lock,
        type(threading.RLock()): threading.RLock,
        threading.Condition: threading.Condition,
        threading.Event: threading.Event,
        threading.Semaphore: threading.Semaphore,
    }
    added = [kind for kind in kinds if kind not in copyreg.dispatch_table]
    for kind in added:
        copyreg.dispatch_table[kind] = lambda lock, make=kinds[kind]: (make, ())
    try:
        yield
    finally:
        for kind in added:
            del copyreg.dispatch_table[kind]


def _restored_method(client: Any, attribute: str) -> bool:
    """Whether ``client.<attribute>`` is the client's own method, bound to it, as its class has it."""
    value = vars(client)[attribute]
    return getattr(value, "__self__", None) is client and getattr(value, "__func__", None) is getattr(
        type(client), attribute, None
    )


class SharedClients:
    """One client per service for every test of a worker (a client costs a few milliseconds to make).

    A test borrows them with ``lent()``: a hook it registers on one is unregistered when it ends, and
    an attribute it set on one without ``monkeypatch`` is removed and fails the next borrower, naming
    the test that left it; nothing of a test stays on the clients for the next."""

    HOOKS = ("register", "register_first", "register_last")

    def __init__(self, session: boto3.session.Session) -> None:
        self.clients: dict[str, Any] = {name: session.client(name) for name in SERVICES}
        # botocore names a stream's account in its endpoint's host, which in-process moto does not
        # route; the plain regional endpoint is the same API.
        self.clients["dynamodbstreams"] = session.client(
            "dynamodbstreams", config=Config(account_id_endpoint_mode="disabled")
        )
        self._attributes = {name: set(vars(client)) for name, client in self.clients.items()}
        self._borrower = ""

    @contextmanager
    def lent(self, borrower: str) -> Iterator[dict[str, Any]]:
        self._check_nothing_left()
        self._borrower = borrower
        registered: list[tuple[Any, tuple[Any, ...]]] = []
        emitters = [client.meta.events for client in self.clients.values()]
        for events in emitters:
            for hook in self.HOOKS:
                setattr(events, hook, self._recording(events, getattr(events, hook), registered))
        try:
            yield self.clients
        finally:
            for events, args in reversed(registered):
                events.unregister(*args)
            for events in emitters:
                for hook in self.HOOKS:
                    delattr(events, hook)

    def _check_nothing_left(self) -> None:
        """An attribute ``monkeypatch`` set is gone by now (it is undone after this fixture's end)."""
        left: dict[str, list[str]] = {}
        for name, client in self.clients.items():
            for attribute in sorted(set(vars(client)) - self._attributes[name]):
                # Undoing a patched method, monkeypatch sets the client's own method back on the
                # client itself (before pytest 9.2): put back as it was, it is not left over.
                if not _restored_method(client, attribute):
                    left.setdefault(name, []).append(attribute)
                delattr(client, attribute)
        if left:
            raise AssertionError(
                f"{self._borrower} set {left} on the shared clients and left it: use monkeypatch.setattr"
            )

    @staticmethod
    def _recording(events: Any, register: Callable[..., Any], registered: list[Any]) -> Callable[..., Any]:
        def recording(
            event_name: str, handler: Any, unique_id: Any = None, unique_id_uses_count: bool = False
        ) -> Any:
            registered.append((events, (event_name, handler, unique_id, unique_id_uses_count)))
            return register(event_name, handler, unique_id, unique_id_uses_count)

        return recording


@dataclass(frozen=True)
class Baseline:
    """The stack's resources, created once per worker, moto's state right after, and the clients."""

    clients: SharedClients
    resources: LocalResources
    backends: dict[str, dict[str, Any]]

    def restore(self) -> None:
        """Put a fresh copy of the state in the running mock (whose own state is empty)."""
        with _locks_copied_as_new_locks():
            for service, regions in self.backends.items():
                account = get_backend(service)[ACCOUNT]
                for region, backend in regions.items():
                    account[region] = copy.deepcopy(backend)


@pytest.fixture(scope="session")
def baseline() -> Baseline:
    """Create the resources once per worker, as ``create_resources`` does for the stack, and keep moto's
    state: each test starts from a copy of it (a millisecond) instead of creating them again, and
    borrows the same clients (most of a test's setup was both)."""
    with mock_aws():
        clients = SharedClients(boto3.session.Session(region_name="us-east-1"))
        made = clients.clients
        resources = create_resources(
            made["dynamodb"], made["sqs"], made["sns"], prefix="u-", scheduler=made["scheduler"]
        )
        with _locks_copied_as_new_locks():
            backends = {name: copy.deepcopy(dict(get_backend(name)[ACCOUNT])) for name in SERVICES}
    return Baseline(clients, resources, backends)


@pytest.fixture
def aws(baseline: Baseline, request: pytest.FixtureRequest) -> Iterator[Aws]:
    with mock_aws(config=MOCK_CONFIG), baseline.clients.lent(request.node.nodeid) as clients:
        baseline.restore()
        resources = copy.deepcopy(baseline.resources)
        settings = Settings.from_env(
            resources.env() | {"AGENT_WAIT_REPLY_URL": "https://api.example/questions/{question_id}/reply"}
        )
        yield Aws(
            clients["dynamodb"],
            clients["sqs"],
            clients["sns"],
            resources,
            settings,
            clients["scheduler"],
            streams=clients["dynamodbstreams"],
        )


@pytest.fixture
def api(aws: Aws, clock: FakeClock) -> WaitApi:
    return build_api(aws.settings, dynamodb=aws.dynamodb, sqs=aws.sqs, clock=clock)


@pytest.fixture
def context() -> LambdaContext:
    return LambdaContext()


@pytest.fixture
def call(api: WaitApi, context: LambdaContext) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """Resolve an event through the api handler module, with the api fixture injected."""
    handler = load_handler("api")

    def invoke(event: dict[str, Any]) -> dict[str, Any]:
        return handler.handle(event, context, service=api)

    return invoke
