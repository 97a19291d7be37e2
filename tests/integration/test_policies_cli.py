"""``agent-wait policies list | show | set | diff`` against the policy store on moto server."""

from __future__ import annotations

import io
import json
import uuid
from typing import TYPE_CHECKING, Any

import pytest

from agent_wait_cli.commands import main
from wait_service.resources import POLICIES, create_table

if TYPE_CHECKING:
    from pathlib import Path

    from agent_wait_cli.local.moto_server import SerializedMotoServer

pytestmark = pytest.mark.integration


@pytest.fixture
def cli(moto_server: SerializedMotoServer, aws_client: Any, tmp_path: Path) -> Any:
    """``cli(*argv)`` -> (exit code, stdout, stderr) on a fresh store of a stack of its own."""
    stack = f"s{uuid.uuid4().hex[:8]}"
    create_table(aws_client("dynamodb"), POLICIES, f"{stack}-policies")

    def run(*argv: str) -> tuple[int, str, str]:
        out, err = io.StringIO(), io.StringIO()
        code = main(
            [*argv, "--endpoint-url", moto_server.endpoint, "--stack", stack], out=out, err=err, environ={}
        )
        return code, out.getvalue(), err.getvalue()

    return run


def policy_file(tmp_path: Path, name: str, value: Any) -> str:
    path = tmp_path / name
    path.write_text(json.dumps(value) if not isinstance(value, str) else value, encoding="utf-8")
    return str(path)


def test_set_show_list_and_diff(cli: Any, tmp_path: Path) -> None:
    # An empty store
    assert cli("policies", "list") == (0, "no policy overrides\n", "")
    code, _, err = cli("policies", "show", "issue_refund")
    assert code == 1 and err == "agent-wait: 404 policy_not_found: issue_refund has no policy override\n"

    # set writes version 1, recording who set it
    first = policy_file(tmp_path, "v1.json", {"ttl": 600, "responders": ["ann"]})
    code, out, err = cli("policies", "set", "issue_refund", "--file", first)
    assert (code, err) == (0, "")
    assert out.startswith("set issue_refund version 1 (by arn:aws:")

    code, out, _ = cli("policies", "show", "issue_refund")
    assert code == 0
    fields, _, policy = out.partition("\n\n")
    assert "version" in fields and " 1" in fields
    assert json.loads(policy) == {"responders": ["ann"], "ttl": 600}

    # diff: a JSON Patch from the current version to the file; exit 1 when they differ, as diff(1)
    second = policy_file(tmp_path, "v2.json", {"ttl": 900, "responders": ["ann"], "reminders": [60]})
    code, out, _ = cli("policies", "diff", "issue_refund", "--file", second)
    assert code == 1
    assert out.splitlines() == [
        "--- issue_refund version 1",
        f"+++ {second}",
        '{"op": "add", "path": "/reminders", "value": [60]}',
        '{"op": "replace", "path": "/ttl", "value": 900}',
    ]
    assert cli("policies", "diff", "issue_refund", "--file", first)[0] == 0

    # set with the version diff showed; then the table lists the current versions
    assert cli("policies", "set", "issue_refund", "--file", second, "--if-version", "1")[0] == 0
    code, out, _ = cli("policies", "list")
    [header, row] = out.splitlines()
    assert header.split()[:3] == ["FUNCTION", "VERSION", "SET"]
    assert row.split()[:2] == ["issue_refund", "2"] and row.endswith("reminders, responders, ttl")
    code, out, _ = cli("policies", "list", "--json")
    assert [(p["function"], p["version"]) for p in json.loads(out)] == [("issue_refund", 2)]


def test_an_invalid_policy_is_a_422_naming_the_field(cli: Any, tmp_path: Path) -> None:
    bad = policy_file(tmp_path, "bad.json", {"ttl": -1})
    code, out, err = cli("policies", "set", "issue_refund", "--file", bad)
    assert (code, out) == (1, "")
    assert err.startswith("agent-wait: 422 invalid_policy: policy.ttl: ")
    code, out, _ = cli("policies", "set", "issue_refund", "--file", bad, "--json")
    assert json.loads(out)["status_code"] == 422 and json.loads(out)["body"]["field"] == "policy.ttl"
    # diff refuses it too, and a file that is not JSON
    assert cli("policies", "diff", "issue_refund", "--file", bad)[2].startswith(
        "agent-wait: 422 invalid_policy"
    )
    garbage = policy_file(tmp_path, "garbage.json", "{ttl:")
    assert "422 invalid_policy" in cli("policies", "set", "issue_refund", "--file", garbage)[2]
    # nothing was written
    assert cli("policies", "list")[1] == "no policy overrides\n"


def test_a_set_from_a_stale_version_is_a_409(cli: Any, tmp_path: Path) -> None:
    v1 = policy_file(tmp_path, "v1.json", {"ttl": 600})
    assert cli("policies", "set", "issue_refund", "--file", v1, "--if-version", "0")[0] == 0
    code, _, err = cli("policies", "set", "issue_refund", "--file", v1, "--if-version", "0")
    assert code == 1
    assert err.startswith("agent-wait: 409 policy_conflict: issue_refund's policy is at version 1, not 0")


def ladder(rungs: list[Any]) -> dict[str, Any]:
    return {"ttl": 60, "on_expiry": {"action": "escalate", "to": rungs}}


def test_an_escalation_ladder_with_rung_authority_is_set_and_its_bad_fields_refused(
    cli: Any, tmp_path: Path
) -> None:
    # Hostile rungs: each refused 422 naming its field, nothing written
    for rung, field in (
        ({"route": "leads", "responders": []}, "policy.on_expiry.to.0.responders"),
        ({"route": "leads", "replace": True}, "policy.on_expiry.to.0.replace"),
        ({"route": "leads", "slack_channel": "#Leads Room"}, "policy.on_expiry.to.0.slack_channel"),
        ({"route": "leads", "event_types": ["wait.answered"]}, "policy.on_expiry.to.0.event_types"),
    ):
        bad = policy_file(
            tmp_path, "bad.json", {"ttl": 60, "on_expiry": {"action": "escalate", "to": [rung]}}
        )
        code, out, err = cli("policies", "set", "issue_refund", "--file", bad)
        assert (code, out) == (1, "")
        assert err.startswith(f"agent-wait: 422 invalid_policy: {field}: "), err
    assert cli("policies", "list")[1] == "no policy overrides\n"

    # A good ladder is set, and diff shows a rung's change as a patch of that rung
    rungs = ["managers", {"route": "vp", "responders": ["vic"], "replace": True, "slack_channel": "C0VP"}]
    good = policy_file(tmp_path, "good.json", ladder(rungs))
    assert cli("policies", "set", "issue_refund", "--file", good)[0] == 0
    rungs[1] = {**rungs[1], "responders": ["vic", "val"]}  # type: ignore[dict-item]
    changed = policy_file(
        tmp_path, "changed.json", {"ttl": 60, "on_expiry": {"action": "escalate", "to": rungs}}
    )
    code, out, _ = cli("policies", "diff", "issue_refund", "--file", changed)
    assert code == 1
    assert out.splitlines()[2:] == ['{"op": "add", "path": "/on_expiry/to/1/responders/1", "value": "val"}']
