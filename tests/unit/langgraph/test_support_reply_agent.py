"""The support reply example: which model it drafts with, and its park and resume."""

from __future__ import annotations

import os
import socket
from typing import TYPE_CHECKING, Any

import pytest
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from examples.support_reply.support_reply_agent.graph import build_graph
from examples.support_reply.support_reply_agent.model import FAKE_DRAFT, choose_model

if TYPE_CHECKING:
    from pathlib import Path

MODEL = "anthropic.claude-3-haiku-20240307-v1:0"


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the model choice must not touch the network")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


@pytest.fixture
def no_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in list(os.environ):
        if name.startswith("AWS_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))


def test_without_credentials_the_fake_model_is_chosen_offline(no_credentials: None, no_network: None) -> None:
    model = choose_model({"MODEL_ID": MODEL})
    assert isinstance(model, FakeListChatModel)
    assert model.invoke("my parcel is late").content == FAKE_DRAFT


def test_with_credentials_and_a_model_id_bedrock_is_chosen(
    no_credentials: None, no_network: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    from langchain_aws import ChatBedrockConverse

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    model = choose_model({"MODEL_ID": MODEL})
    assert isinstance(model, ChatBedrockConverse)
    assert model.model_id == MODEL


@pytest.mark.parametrize(
    "environ",
    [
        {},  # no model id: nothing to call on Bedrock
        {"MODEL_ID": MODEL, "AWS_ENDPOINT_URL": "http://127.0.0.1:5000"},  # the local stack
        {"MODEL_ID": MODEL, "SUPPORT_AGENT_MODEL": "fake"},
    ],
)
def test_the_fake_model_otherwise(
    environ: dict[str, str], no_network: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "local")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "local")
    assert isinstance(choose_model(environ), FakeListChatModel)


@pytest.mark.parametrize(
    ("environ", "message"),
    [
        ({"SUPPORT_AGENT_MODEL": "gpt"}, "expected 'fake' or 'bedrock'"),
        ({"SUPPORT_AGENT_MODEL": "bedrock"}, "needs MODEL_ID"),
    ],
)
def test_a_wrong_choice_is_refused(environ: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        choose_model(environ)


class CountingModel(FakeListChatModel):
    calls: int = 0

    def invoke(self, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        return super().invoke(*args, **kwargs)


@pytest.mark.parametrize(
    ("answer", "sent"),
    [
        ({"action": "approve"}, {"customer": "c-17", "text": "drafted"}),
        ({"action": "approve", "args": {"text": "edited"}}, {"customer": "c-17", "text": "edited"}),
        ({"action": "reject", "reason": "tone"}, None),
    ],
)
def test_the_draft_parks_and_the_answer_decides_what_is_sent(answer: dict[str, Any], sent: Any) -> None:
    model = CountingModel(responses=["drafted"])
    graph = build_graph(InMemorySaver(), model=model)
    cfg = {"configurable": {"thread_id": "t"}}

    parked = graph.invoke({"customer": "c-17", "message": "late parcel"}, cfg)
    [interrupt] = parked["__interrupt__"]
    assert interrupt.value["question"]["args"] == {"customer": "c-17", "text": "drafted"}

    done = graph.invoke(Command(resume={interrupt.id: answer}), cfg)
    assert done["sent"] == sent
    # The resume re-runs the parked node only: the model is not asked for another draft.
    assert model.calls == 1
