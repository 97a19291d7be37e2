"""Pydantic AI and Strands agents deployed (context ``framework``, ``agent=module:attr``).

The options variant of the infra tests deploys the Pydantic AI example, the signed variant the
Strands one (cdk-nag and cfn-lint run on both with the others): the runner is told the framework,
its graph layer carries the framework's package, and the api checks a start's input against the
hosted agent's schema (a prompt).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from infra.config import StackConfig
from infra.functions import agent_framework
from infra.requirements import layer_requirements

if TYPE_CHECKING:
    from conftest import Synth


def _runner(synth: Synth) -> dict[str, Any]:
    runner_id = synth.stack.get_logical_id(synth.stack.runner.function.node.default_child)
    return synth.template_json["Resources"][runner_id]["Properties"]


def test_the_runner_hosts_the_agent_with_its_framework(options_synth: Synth) -> None:
    env = _runner(options_synth)["Environment"]["Variables"]
    assert (env["AGENT_WAIT_GRAPH"], env["AGENT_WAIT_FRAMEWORK"]) == (
        "examples.pydantic_ai_agent:agent",
        "pydantic_ai",
    )
    assert env["AGENT_WAIT_CHECKPOINTER"] == "aws"


def test_the_graph_layer_carries_the_frameworks_package(options_synth: Synth, default_synth: Synth) -> None:
    def graph_layer(synth: Synth) -> str:
        layers = synth.resources("AWS::Lambda::LayerVersion").values()
        [description] = [
            layer["Properties"]["Description"]
            for layer in layers
            if layer["Properties"]["Description"].startswith("agent-wait graph dependencies")
        ]
        return str(description)

    pin = next(line for line in layer_requirements("graph", framework="pydantic_ai") if "pydantic-ai" in line)
    assert pin.startswith("pydantic-ai-slim==")
    assert pin in graph_layer(options_synth)
    assert "pydantic-ai" not in graph_layer(default_synth)


def test_the_api_checks_a_start_against_the_agents_input(options_synth: Synth) -> None:
    schemas = list(options_synth.outdir.glob("asset.*/graph_input/graph_input_schema.json"))
    found = [json.loads(path.read_text()) for path in schemas]
    assert any(schema and "prompt" in schema.get("properties", {}) for schema in found), found


def test_a_strands_agent_keeps_its_sessions_in_the_checkpoint_bucket(signed_synth: Synth) -> None:
    env = _runner(signed_synth)["Environment"]["Variables"]
    assert (env["AGENT_WAIT_GRAPH"], env["AGENT_WAIT_FRAMEWORK"]) == (
        "examples.strands_agent:build_agent",
        "strands",
    )
    assert "AGENT_WAIT_CHECKPOINT_BUCKET" in env
    layers = [
        layer["Properties"]["Description"]
        for layer in signed_synth.resources("AWS::Lambda::LayerVersion").values()
    ]
    pin = next(line for line in layer_requirements("graph", framework="strands") if "strands" in line)
    assert any(pin in description for description in layers), layers
    bucket = {
        "Fn::GetAtt": [
            signed_synth.stack.get_logical_id(signed_synth.stack.checkpoints.bucket.node.default_child),
            "Arn",
        ]
    }  # type: ignore[arg-type, union-attr]
    statements = [
        statement
        for policy in signed_synth.resources("AWS::IAM::Policy").values()
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
    ]
    assert any(s["Action"] == "s3:ListBucket" and s["Resource"] == bucket for s in statements)


def test_the_framework_is_detected_when_the_context_names_none() -> None:
    context: dict[str, Any] = {"agent": "examples.pydantic_ai_agent:agent"}
    detected = StackConfig.from_context(context.get)
    assert (detected.framework, agent_framework(detected)) == (None, "pydantic_ai")
    empty: dict[str, Any] = {}
    assert agent_framework(StackConfig.from_context(empty.get)) == "langgraph"


def test_a_framework_without_the_store_it_needs_is_refused_naming_the_key() -> None:
    import pytest

    from infra.errors import ConfigError

    without_bucket: dict[str, Any] = {"framework": "strands", "checkpoint_bucket": "false"}
    with pytest.raises(ConfigError, match="context framework=strands keeps each thread's session") as refused:
        StackConfig.from_context(without_bucket.get)
    assert refused.value.key == "framework"
    legacy: dict[str, Any] = {"framework": "pydantic_ai", "checkpointer": "dynamodb"}
    with pytest.raises(ConfigError, match="checkpointer=dynamodb is a LangGraph checkpointer"):
        StackConfig.from_context(legacy.get)
