"""``agent-wait dlq``: its usage errors are one line, before any AWS call."""

from __future__ import annotations

import io

import pytest

from agent_wait_cli.commands import build_parser, main


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err, environ={})
    return code, out.getvalue(), err.getvalue()


def test_redrive_takes_an_id_or_all(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        build_parser({}).parse_args(["dlq", "redrive"])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "one of the arguments ID --all is required" in err


def test_the_stack_name_comes_from_the_environment_or_the_flag() -> None:
    assert build_parser({}).parse_args(["dlq", "list"]).stack == "agent-wait"
    assert build_parser({"AGENT_WAIT_STACK": "aw-prod"}).parse_args(["dlq", "list"]).stack == "aw-prod"
    args = build_parser({}).parse_args(["dlq", "redrive", "--all", "--dlq", "inbox", "--stack", "s"])
    assert (args.all, args.dlq, args.stack, args.message_id) == (True, "inbox", "s", None)


def test_an_endpoint_off_this_machine_is_refused_in_one_line() -> None:
    code, out, err = run("dlq", "list", "--endpoint-url", "http://192.0.2.1:5000")
    assert (code, out) == (2, "")
    assert err.startswith("agent-wait: --endpoint-url 'http://192.0.2.1:5000' is not on this machine")
    assert err.count("\n") == 1
