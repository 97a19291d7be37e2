"""``agent-wait delegate`` and ``agent-wait extend``: what they send and print (a fake opener, no network)."""

from __future__ import annotations

import io
import json
import urllib.error
from email.message import Message
from typing import Any

import pytest

from agent_wait_cli import main

API = "http://127.0.0.1:8787"


class Opener:
    """Answers every request with one (status, body) and records what was sent."""

    def __init__(self, status: int, body: Any) -> None:
        self.status, self.body = status, body
        self.requests: list[Any] = []

    def __call__(self, request: Any, timeout: float) -> Any:
        self.requests.append(request)
        raw = json.dumps(self.body).encode()
        if self.status >= 400:
            raise urllib.error.HTTPError(request.full_url, self.status, "err", Message(), io.BytesIO(raw))
        response = io.BytesIO(raw)
        response.status = self.status  # type: ignore[attr-defined]
        response.headers = Message()  # type: ignore[attr-defined]
        return response


def run(argv: list[str], opener: Opener) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main([*argv, "--api", API], out=out, err=err, opener=opener, environ={})
    return code, out.getvalue(), err.getvalue()


def test_delegate_posts_to_and_reason_and_prints_the_delegates() -> None:
    opener = Opener(200, {"question_id": "q 1", "status": "delegated", "delegates": ["bob"]})

    argv = ["delegate", "q 1", "--to", "bob", "--reason", "on leave", "--principal", "ann"]
    code, out, _ = run(argv, opener)

    assert code == 0
    [sent] = opener.requests
    assert (sent.get_method(), sent.full_url) == ("POST", f"{API}/questions/q%201/delegate")
    assert json.loads(sent.data) == {"to": "bob", "reason": "on leave"}
    assert sent.get_header("X-wait-principal") == "ann"
    assert out == "200 delegated delegates: bob\n"


@pytest.mark.parametrize(
    ("flags", "body"),
    [
        (["--by", "3600"], {"by_seconds": 3600, "reason": "finance"}),
        (["--until", "2026-12-02T09:00:00Z"], {"until": "2026-12-02T09:00:00Z", "reason": "finance"}),
    ],
)
def test_extend_posts_by_seconds_or_until(flags: list[str], body: dict[str, Any]) -> None:
    opener = Opener(200, {"question_id": "q-1", "status": "delivered", "expires_at": "2026-12-02T09:00:00Z"})

    code, out, _ = run(["extend", "q-1", *flags, "--reason", "finance"], opener)

    assert code == 0
    assert json.loads(opener.requests[0].data) == body
    assert out == "200 delivered expires 2026-12-02T09:00:00Z\n"


@pytest.mark.parametrize(
    "argv",
    [
        ["extend", "q-1", "--reason", "r"],  # neither --by nor --until
        ["extend", "q-1", "--by", "60", "--until", "2026-12-02T09:00:00Z", "--reason", "r"],
        ["extend", "q-1", "--by", "soon", "--reason", "r"],
        ["delegate", "q-1", "--reason", "r"],  # no --to
        ["delegate", "q-1", "--to", "bob"],  # no --reason
    ],
)
def test_usage_errors_send_nothing(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    opener = Opener(200, {})

    with pytest.raises(SystemExit) as exc:
        run(argv, opener)

    assert exc.value.code == 2
    assert opener.requests == []
    assert capsys.readouterr().err


def test_a_refusal_is_shown_with_its_code_and_exit_status() -> None:
    refusal = {"error": "invalid_extension", "message": "past max_extension", "field": "by_seconds"}
    opener = Opener(422, refusal)

    code, _, err = run(["extend", "q-1", "--by", "99999", "--reason", "r"], opener)

    assert code != 0
    assert "invalid_extension" in err or "past max_extension" in err


def test_questions_show_prints_the_starter_the_delegates_and_the_quorum() -> None:
    question = {
        "question_id": "q-1",
        "thread_id": "t-1",
        "status": "delivered",
        "policy": {"kind": "approval", "approvals_required": 3},
        "question": {"function": "issue_refund", "args": {"amount": 40}},
        "requested_by": "carol",
        "delegates": ["dan"],
        "quorum": {
            "summary": "2 of 3 approvals",
            "votes": [{"principal": "ann", "vote": "approve"}, {"principal": "bob", "vote": "approve"}],
        },
    }

    code, out, _ = run(["questions", "show", "q-1"], Opener(200, question))

    assert code == 0
    assert "requested by  carol" in out
    assert "delegates     dan" in out
    assert "quorum        2 of 3 approvals (ann approve, bob approve)" in out
