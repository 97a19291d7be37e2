"""The Lambda runtime stand-ins: the context object and loading a handler by file path."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from agent_wait_cli.local.runtime import LambdaContext, load_handler

if TYPE_CHECKING:
    from pathlib import Path


def test_context_counts_down_from_the_function_timeout() -> None:
    now = [100.0]
    context = LambdaContext(
        "agent-wait-runner", timeout_seconds=120, region="eu-west-1", clock=lambda: now[0]
    )

    now[0] += 20.5

    assert context.get_remaining_time_in_millis() == 99_500
    assert context.invoked_function_arn == "arn:aws:lambda:eu-west-1:000000000000:function:agent-wait-runner"
    assert context.aws_request_id
    now[0] += 1000
    assert context.get_remaining_time_in_millis() == 0


def test_two_handler_files_load_as_separate_modules(tmp_path: Path) -> None:
    for name in ("api", "runner"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "handler.py").write_text(f"def handler(event, context):\n    return {name!r}\n")

    api = load_handler(tmp_path / "api" / "handler.py", "test_local_api_handler")
    runner = load_handler(tmp_path / "runner" / "handler.py", "test_local_runner_handler")

    assert (api({}, None), runner({}, None)) == ("api", "runner")


def test_missing_handler_file_or_attribute_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "handler.py").write_text("x = 1\n")

    with pytest.raises(FileNotFoundError):
        load_handler(tmp_path / "nope.py", "test_local_nope")
    with pytest.raises(ImportError, match="handler"):
        load_handler(tmp_path / "handler.py", "test_local_no_attr")
