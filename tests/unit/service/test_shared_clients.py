"""The unit tests share one set of clients per worker: nothing one test does to them reaches the next."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from moto import mock_aws

from tests.unit.service.conftest import SharedClients


def _refuse(**_: Any) -> None:
    raise RuntimeError("the last test's hook ran")


@pytest.fixture
def shared() -> Any:
    with mock_aws():
        yield SharedClients(boto3.session.Session(region_name="us-east-1"))


def test_a_hook_registered_by_one_borrower_is_gone_for_the_next(shared: SharedClients) -> None:
    with shared.lent("first") as clients:
        clients["sqs"].meta.events.register("before-call.sqs.ListQueues", _refuse)
        with pytest.raises(RuntimeError, match="hook ran"):
            clients["sqs"].list_queues()
    with shared.lent("second") as clients:
        clients["sqs"].list_queues()


def test_a_hook_the_client_had_before_stays(shared: SharedClients) -> None:
    calls: list[str] = []
    shared.clients["sqs"].meta.events.register("before-call.sqs.ListQueues", lambda **_: calls.append("x"))
    with shared.lent("first") as clients:
        clients["sqs"].list_queues()
    with shared.lent("second") as clients:
        clients["sqs"].list_queues()
    assert calls == ["x", "x"]


def test_an_attribute_left_on_a_client_fails_the_next_borrower_naming_the_one_who_left_it(
    shared: SharedClients,
) -> None:
    with shared.lent("tests/a.py::test_leaky") as clients:
        clients["sqs"].list_queues = _refuse
    with pytest.raises(AssertionError, match=r"tests/a.py::test_leaky set \{'sqs': \['list_queues'\]\}"):
        with shared.lent("tests/b.py::test_next"):
            pass
    with shared.lent("tests/c.py::test_after") as clients:
        clients["sqs"].list_queues()  # the attribute was removed


def test_a_method_monkeypatch_put_back_is_not_left_over(shared: SharedClients) -> None:
    patch = pytest.MonkeyPatch()
    with shared.lent("tests/a.py::test_patching") as clients:
        patch.setattr(clients["sqs"], "list_queues", _refuse)
    # monkeypatch's undo may set the client's own method on the client itself (pytest before 9.2)
    patch.undo()
    with shared.lent("tests/b.py::test_next") as clients:
        assert "list_queues" not in vars(clients["sqs"])
        clients["sqs"].list_queues()
