"""CLI argument handling, answers, auth headers and exit codes, against a fake opener (no network)."""

from __future__ import annotations

import io
import json
import urllib.error
from email.message import Message
from pathlib import Path
from typing import Any

import pytest

from agent_wait_cli import main
from agent_wait_cli.client import ApiClient, UsageError, is_loopback, region_from_url
from agent_wait_cli.commands import build_answer, build_parser
from agent_wait_cli.local.gateway import HttpRequest, SignatureError, verify_signature
from agent_wait_cli.tail import endpoint_for, follow, unwrap
from wait_service.settings import DEFAULT_GRAPH

QUESTION = {
    "question_id": "q-1",
    "thread_id": "t-1",
    "status": "raised",
    "digest": "abc123",
    "question": {"function": "issue_refund", "args": {"customer": "c-17", "amount": 40}},
    "policy": {"kind": "approval", "bind": True},
}


class FakeResponse:
    def __init__(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        self.status = status
        self.headers = Message()
        for key, value in (headers or {}).items():
            self.headers[key] = value
        self._body = json.dumps(body).encode()

    def read(self) -> bytes:
        return self._body

    def __enter__(self) -> FakeResponse:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


class FakeApi:
    """Records requests; answers from a route table of (method, path) → (status, body, headers)."""

    def __init__(self, routes: dict[tuple[str, str], tuple[int, Any, dict[str, str]]]) -> None:
        self.routes = routes
        self.requests: list[Any] = []

    def __call__(self, request: Any, timeout: float) -> FakeResponse:
        self.requests.append(request)
        path = request.full_url.split("8787", 1)[1].split("?", 1)[0]
        route = self.routes.get((request.get_method(), path))
        if route is None:
            raise urllib.error.URLError("connection refused")
        status, body, headers = route
        if status >= 400:
            raise urllib.error.HTTPError(
                request.full_url, status, "err", Message(), io.BytesIO(json.dumps(body).encode())
            )
        return FakeResponse(status, body, headers)


def _run(argv: list[str], api: FakeApi) -> tuple[int, str, str]:
    """``main`` as the console script runs it, with the HTTP requests going to ``api``."""
    out, err = io.StringIO(), io.StringIO()
    code = main(argv, out=out, err=err, opener=api, environ={})
    return code, out.getvalue(), err.getvalue()


# -- parsing -------------------------------------------------------------------------------


def test_api_defaults_to_env_then_loopback() -> None:
    assert build_parser({}).parse_args(["threads", "show", "t"]).api == "http://127.0.0.1:8787"
    env = {"AGENT_WAIT_API": "https://x.execute-api.eu-west-1.amazonaws.com/prod"}
    assert build_parser(env).parse_args(["threads", "show", "t"]).api.startswith("https://x.")


def test_global_options_go_before_or_after_the_command() -> None:
    parser = build_parser({})

    before = parser.parse_args(
        ["--api", "http://127.0.0.1:9000", "--json", "--principal", "p", "threads", "show", "t"]
    )
    after = parser.parse_args(
        ["threads", "show", "t", "--api", "http://127.0.0.1:9000", "--json", "--principal", "p"]
    )
    neither = parser.parse_args(["threads", "show", "t"])

    assert (before.api, before.json, before.principal) == ("http://127.0.0.1:9000", True, "p")
    assert (after.api, after.json, after.principal) == ("http://127.0.0.1:9000", True, "p")
    assert (neither.api, neither.json, neither.principal, neither.api_hmac_key) == (
        "http://127.0.0.1:8787",
        False,
        None,
        None,
    )


@pytest.mark.parametrize(
    "argv",
    [
        ["reply", "q-1"],  # no answer flag
        ["reply", "q-1", "--approve", "--reject"],  # two answer flags
        ["reply", "q-1", "--edit", "{not json"],
        ["threads", "start", "t", "--input", "nope"],
        ["local", "--hmac-key", "no-secret"],
        ["bogus"],
    ],
)
def test_usage_errors_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2


@pytest.mark.parametrize(
    ("argv", "command"),
    [
        (["threads", "start", "t-1", "--inptu", "{}"], "agent-wait threads start"),
        (["reply", "q-1", "--approve", "--bogus"], "agent-wait reply"),
        (["local", "--nope"], "agent-wait local"),
    ],
)
def test_an_unknown_option_points_at_its_commands_help(
    argv: list[str], command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        main(argv)

    assert exc.value.code == 2
    unknown = " ".join(argv[-2:] if argv[-1] == "{}" else argv[-1:])
    assert capsys.readouterr().err == f"{command}: unrecognized arguments: {unknown} (see {command} --help)\n"


def test_local_options_and_defaults() -> None:
    args = build_parser({}).parse_args(["local", "--port", "0", "--hmac-key", "k1=s", "--hmac-key", "k2=t"])

    assert (args.port, args.moto_port, args.graph, args.project) == (0, 0, DEFAULT_GRAPH, None)
    assert args.graph_source is None
    assert args.hmac_key == [("k1", "s"), ("k2", "t")]
    assert (args.slack_api, args.slack_signing_secret, args.slack_channel) == (None, None, None)


def test_local_slack_options() -> None:
    args = build_parser({}).parse_args(
        [
            "local",
            "--slack-api",
            "http://127.0.0.1:9/api/",
            "--slack-signing-secret",
            "s",
            "--slack-channel",
            "C1",
        ]
    )

    assert (args.slack_api, args.slack_signing_secret, args.slack_channel) == (
        "http://127.0.0.1:9/api/",
        "s",
        "C1",
    )
    assert (args.inbox_visibility, args.log_file) == (None, None)


def test_local_inbox_visibility_and_log_file() -> None:
    args = build_parser({}).parse_args(["local", "--inbox-visibility", "2", "--log-file", "/tmp/x.log"])

    assert (args.inbox_visibility, args.log_file) == (2, "/tmp/x.log")


@pytest.mark.parametrize("value", ["-1", "1.5", "soon", "43201"])
def test_local_inbox_visibility_must_be_whole_seconds(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        build_parser({}).parse_args(["local", "--inbox-visibility", value])

    assert exc.value.code == 2
    assert "--inbox-visibility" in capsys.readouterr().err


def test_local_checkpointer_is_aws_or_dynamodb(capsys: pytest.CaptureFixture[str]) -> None:
    parser = build_parser({})
    assert parser.parse_args(["local"]).checkpointer == "aws"
    assert parser.parse_args(["local", "--checkpointer", "dynamodb"]).checkpointer == "dynamodb"
    with pytest.raises(SystemExit) as exc:
        parser.parse_args(["local", "--checkpointer", "redis"])
    assert exc.value.code == 2
    assert "--checkpointer" in capsys.readouterr().err


def test_local_dynamodb_without_its_package_is_one_line_naming_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "langgraph_checkpoint_dynamodb" else real(name, *a),
    )
    root = Path(__file__).resolve().parents[3]
    out, err = io.StringIO(), io.StringIO()
    assert main(["local", "--checkpointer", "dynamodb", "--project", str(root)], out=out, err=err) == 2
    assert err.getvalue().count("\n") == 1
    assert "agent-wait[checkpoint-dynamodb]" in err.getvalue()
    assert out.getvalue() == ""


# -- answers -------------------------------------------------------------------------------


def test_answers_by_kind() -> None:
    assert build_answer("approval", approve=True) == {"action": "approve"}
    assert build_answer("approval", reject=True) == {"action": "reject"}
    assert build_answer("approval", reject=True, reason="no") == {"action": "reject", "reason": "no"}
    assert build_answer("edit", reject=True, reason="no") == {"action": "reject"}
    assert build_answer("approval", edit={"amount": 25}) == {"action": "approve", "args": {"amount": 25}}
    assert build_answer("edit", edit={"text": "x"}) == {"action": "edit", "value": {"text": "x"}}
    assert build_answer("decision", answer={"choice": "a"}) == {"choice": "a"}
    assert build_answer("approval", respond="later") == {"action": "respond", "message": "later"}


@pytest.mark.parametrize(
    ("kind", "kwargs"),
    [
        ("decision", {"approve": True}),
        ("text", {"reject": True}),
        ("approval", {"edit": [1, 2]}),
        ("approval", {}),
    ],
)
def test_answers_that_do_not_fit_are_usage_errors(kind: str, kwargs: dict[str, Any]) -> None:
    with pytest.raises(UsageError):
        build_answer(kind, **kwargs)


# -- commands over a fake api ----------------------------------------------------------------


def test_reply_shows_the_question_then_sends_the_digest_as_if_match() -> None:
    api = FakeApi(
        {
            ("GET", "/questions/q-1"): (200, QUESTION, {"ETag": '"abc123"'}),
            ("POST", "/questions/q-1/reply"): (202, {"question_id": "q-1", "status": "answered"}, {}),
        }
    )

    code, out, _ = _run(
        ["reply", "q-1", "--edit", '{"amount": 25}', "--reason", "partial", "--principal", "ann"], api
    )

    assert code == 0
    post = api.requests[1]
    assert post.get_header("If-match") == '"abc123"'
    assert post.get_header("X-wait-principal") == "ann"
    assert json.loads(post.data) == {
        "answer": {"action": "approve", "args": {"amount": 25}},
        "reason": "partial",
    }
    assert "issue_refund(customer='c-17', amount=40)" in out
    assert out.index("issue_refund") < out.index("202 answered")


def test_a_middleware_request_shows_its_prompt_and_allowed_decisions_and_takes_respond() -> None:
    request = QUESTION | {
        "question": {
            "function": "issue_refund",
            "args": {"customer": "c-17", "amount": 40},
            "allowed_decisions": ["approve", "respond"],
            "batch": {"interrupt_id": "i-1", "index": 0, "size": 1},
        },
        "policy": {"kind": "approval", "bind": True, "prompt": "issue_refund: A refund needs your approval"},
    }
    api = FakeApi(
        {
            ("GET", "/questions/q-1"): (200, request, {"ETag": '"abc123"'}),
            ("POST", "/questions/q-1/reply"): (202, {"question_id": "q-1", "status": "answered"}, {}),
        }
    )

    code, out, _ = _run(["reply", "q-1", "--respond", "use store credit"], api)
    _, shown, _ = _run(["questions", "show", "q-1"], api)

    assert code == 0
    assert json.loads(api.requests[1].data) == {
        "answer": {"action": "respond", "message": "use store credit"}
    }
    for text in (out, shown):
        lines = [" ".join(line.split()) for line in text.splitlines()]
        assert "prompt issue_refund: A refund needs your approval" in lines
        assert "allowed approve, respond" in lines


def test_reply_without_etag_header_uses_the_body_digest() -> None:
    api = FakeApi(
        {
            ("GET", "/questions/q-1"): (200, QUESTION, {}),
            ("POST", "/questions/q-1/reply"): (200, {"question_id": "q-1", "status": "answered"}, {}),
        }
    )

    code, out, _ = _run(["reply", "q-1", "--approve"], api)

    assert code == 0
    assert api.requests[1].get_header("If-match") == '"abc123"'
    assert "already recorded" in out


def test_api_error_exits_1_with_its_message_and_standing_answer() -> None:
    api = FakeApi(
        {
            ("GET", "/questions/q-1"): (200, QUESTION, {}),
            ("POST", "/questions/q-1/reply"): (
                409,
                {
                    "error": "answer_conflict",
                    "message": "already answered",
                    "standing_answer": {"action": "approve"},
                },
                {},
            ),
        }
    )
    out, err = io.StringIO(), io.StringIO()
    client = ApiClient("http://127.0.0.1:8787", opener=api, sigv4=False)

    code = main(["reply", "q-1", "--reject"], out=out, err=err, client=client)

    assert code == 1
    assert "409 answer_conflict: already answered" in err.getvalue()
    assert '{"action": "approve"}' in err.getvalue()


def test_an_answer_that_does_not_fit_the_question_exits_2() -> None:
    decision = QUESTION | {"policy": {"kind": "decision"}}
    api = FakeApi({("GET", "/questions/q-1"): (200, decision, {})})

    code, _, err = _run(["reply", "q-1", "--approve"], api)

    assert code == 2
    assert "takes --answer JSON" in err
    assert [r.get_method() for r in api.requests] == ["GET"]  # nothing was sent


def test_unreachable_api_through_the_built_client_exits_3() -> None:
    code, _, err = _run(["threads", "show", "t-1", "--api", "http://127.0.0.1:8787"], FakeApi({}))

    assert code == 3
    assert "cannot reach http://127.0.0.1:8787" in err


def test_ctrl_c_during_a_command_exits_130() -> None:
    def interrupted(request: Any, timeout: float) -> Any:
        raise KeyboardInterrupt

    assert main(["threads", "show", "t-1"], out=io.StringIO(), err=io.StringIO(), opener=interrupted) == 130


def test_unreachable_api_exits_3() -> None:
    out, err = io.StringIO(), io.StringIO()
    client = ApiClient("http://127.0.0.1:8787", opener=FakeApi({}), sigv4=False)

    code = main(["threads", "show", "t-1"], out=out, err=err, client=client)

    assert code == 3
    assert "cannot reach http://127.0.0.1:8787" in err.getvalue()
    # A local api that does not answer is most often a local stack not started: the error says so
    assert "start it with `agent-wait local`" in err.getvalue()


def test_an_unreachable_deployed_api_gets_no_local_stack_hint() -> None:
    def refused(request: Any, timeout: float) -> Any:
        raise urllib.error.URLError("connection refused")

    err = io.StringIO()
    url = "https://abc.execute-api.eu-west-1.amazonaws.com/prod"
    client = ApiClient(url, opener=refused, sigv4=False)

    assert main(["threads", "show", "t-1"], out=io.StringIO(), err=err, client=client) == 3
    assert f"cannot reach {url}" in err.getvalue()
    assert "local stack" not in err.getvalue()


def test_json_api_error_goes_to_stdout_as_json() -> None:
    api = FakeApi(
        {("GET", "/threads/t-1"): (404, {"error": "thread_not_found", "message": "no such thread"}, {})}
    )
    out, err = io.StringIO(), io.StringIO()

    code = main(
        ["threads", "show", "t-1", "--json"],
        out=out,
        err=err,
        client=ApiClient("http://127.0.0.1:8787", opener=api),
    )

    assert code == 1
    assert json.loads(out.getvalue()) == {
        "status_code": 404,
        "body": {"error": "thread_not_found", "message": "no such thread"},
    }


def test_questions_list_table_and_json() -> None:
    api = FakeApi({("GET", "/questions"): (200, {"items": [QUESTION], "next": None}, {})})

    _, table_out, _ = _run(["questions", "list", "--status", "raised", "--thread", "t-1"], api)
    _, json_out, _ = _run(["questions", "list", "--json"], api)

    assert "status=raised" in api.requests[0].full_url and "thread_id=t-1" in api.requests[0].full_url
    assert table_out.splitlines()[0].split() == ["QUESTION", "THREAD", "STATUS", "KIND", "ASKS", "CREATED"]
    assert "q-1" in table_out and "approval" in table_out
    assert json.loads(json_out)["items"][0]["question_id"] == "q-1"


def test_threads_start_posts_the_input() -> None:
    api = FakeApi({("POST", "/threads/t-1/runs"): (202, {"thread_id": "t-1", "status": "queued"}, {})})

    code, out, _ = _run(["threads", "start", "t-1", "--input", '{"customer": "c-17", "amount": 40}'], api)

    assert code == 0 and out.strip() == "202 thread t-1 queued"
    assert json.loads(api.requests[0].data) == {"input": {"customer": "c-17", "amount": 40}}
    assert api.requests[0].get_header("Idempotency-key")


def test_threads_start_sends_a_new_idempotency_key_each_time_or_the_one_given() -> None:
    api = FakeApi({("POST", "/threads/t-1/runs"): (202, {"thread_id": "t-1", "status": "queued"}, {})})

    _run(["threads", "start", "t-1"], api)
    _run(["threads", "start", "t-1"], api)
    _run(["threads", "start", "t-1", "--idempotency-key", "order-17"], api)

    keys = [r.get_header("Idempotency-key") for r in api.requests]
    assert keys[0] != keys[1] and keys[2] == "order-17"


# -- auth ----------------------------------------------------------------------------------


def test_jwt_is_a_bearer_token_and_loopback_is_not_signed() -> None:
    client = ApiClient("http://127.0.0.1:8787", jwt="tok")

    headers = client.headers_for("GET", "http://127.0.0.1:8787/questions", b"", {})

    assert headers["Authorization"] == "Bearer tok"
    assert "X-Amz-Date" not in headers


def test_hmac_signed_request_verifies_at_the_gateway() -> None:
    client = ApiClient("http://127.0.0.1:8787", hmac_key=("k1", "s3cret"), clock=lambda: 1_800_000_000)
    body = b'{"answer": {"action": "approve"}}'
    headers = client.headers_for(
        "POST", "http://127.0.0.1:8787/questions/q-1/reply?x=1", body, {"If-Match": '"d"'}
    )

    request = HttpRequest("POST", "/questions/q-1/reply?x=1", list(headers.items()), body=body)

    assert verify_signature(request, {"k1": "s3cret"}, 1_800_000_000) == "k1"
    swapped = HttpRequest(
        "POST",
        "/questions/q-1/reply?x=1",
        [(k, '"e"' if k == "If-Match" else v) for k, v in headers.items()],
        body,
    )
    with pytest.raises(SignatureError):
        verify_signature(swapped, {"k1": "s3cret"}, 1_800_000_000)


def test_hmac_writes_to_a_deployed_api_go_to_its_signed_routes() -> None:
    url = "https://abc.execute-api.eu-west-1.amazonaws.com/prod"
    client = ApiClient(url, hmac_key=("k1", "s3cret"), clock=lambda: 1_800_000_000)
    path = client.route_for("POST", "/questions/q-1/reply")
    headers = client.headers_for("POST", client.url_for(path), b"{}", {})

    assert path == "/signed/questions/q-1/reply"
    request = HttpRequest("POST", path, list(headers.items()), body=b"{}")
    assert verify_signature(request, {"k1": "s3cret"}, 1_800_000_000) == "k1"
    assert client.route_for("GET", "/questions") == "/questions"


def test_deployed_api_is_signed_with_sigv4_for_execute_api(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    url = "https://abc.execute-api.eu-west-1.amazonaws.com/prod"

    headers = ApiClient(url).headers_for("GET", url + "/questions", b"", {})

    assert headers["Authorization"].startswith("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/")
    assert "/eu-west-1/execute-api/aws4_request" in headers["Authorization"]


def test_url_helpers() -> None:
    assert is_loopback("http://localhost:8787") and is_loopback("http://[::1]:1")
    assert not is_loopback("https://example.com")
    assert region_from_url("https://abc.execute-api.ap-south-1.amazonaws.com/x") == "ap-south-1"


# -- tail ----------------------------------------------------------------------------------


class FakeQueue:
    def __init__(self, bodies: list[str]) -> None:
        self.messages = [
            {"MessageId": f"m{i}", "ReceiptHandle": f"h{i}", "Body": b} for i, b in enumerate(bodies)
        ]
        self.deleted: list[str] = []
        self.receives: list[dict[str, Any]] = []

    def receive_message(self, **kwargs: Any) -> dict[str, Any]:
        self.receives.append(kwargs)
        return {"Messages": [m for m in self.messages if m["ReceiptHandle"] not in self.deleted]}

    def delete_message(self, QueueUrl: str, ReceiptHandle: str) -> None:  # noqa: N803
        self.deleted.append(ReceiptHandle)


def test_tail_prints_each_envelope_once_and_consumes_it() -> None:
    envelope = {
        "type": "wait.created",
        "thread_id": "t-1",
        "question_id": "q-1",
        "question": QUESTION["question"],
    }
    wrapped = json.dumps({"Type": "Notification", "Message": json.dumps(envelope)})
    queue = FakeQueue([json.dumps(envelope), wrapped])
    args = build_parser({}).parse_args(
        ["tail", "--queue-url", "http://127.0.0.1:5000/1/outbox.fifo", "--once", "--json"]
    )
    out = io.StringIO()

    code = follow(args, out, io.StringIO(), client=queue, sleep=lambda s: None)

    assert code == 0
    assert [json.loads(line) for line in out.getvalue().splitlines()] == [envelope, envelope]
    assert queue.deleted == ["h0", "h1"]
    assert queue.receives[0]["WaitTimeSeconds"] == 0


def test_tail_peek_leaves_messages() -> None:
    queue = FakeQueue([json.dumps({"thread_id": "t", "question_id": "q"})])
    args = build_parser({}).parse_args(
        ["tail", "--queue-url", "http://127.0.0.1:5000/1/q", "--peek", "--max", "1"]
    )
    out = io.StringIO()

    follow(args, out, io.StringIO(), client=queue, sleep=lambda s: None)

    assert queue.deleted == [] and "question=q" in out.getvalue()


@pytest.mark.parametrize(
    "flags",
    [["--type", "wait.answered,thread.failed"], ["--type", "wait.answered", "--type", "thread.failed"]],
)
def test_tail_type_prints_only_those_types_and_still_consumes_the_rest(flags: list[str]) -> None:
    bodies = [
        {"type": "wait.created", "thread_id": "t-1", "question_id": "q-1"},
        {"type": "wait.answered", "thread_id": "t-1", "question_id": "q-1", "answer": {"action": "approve"}},
        {"type": "thread.done", "thread_id": "t-1", "run_id": "r-1", "summary": "{}"},
        {"type": "thread.failed", "thread_id": "t-2", "run_id": "r-2", "error": "boom"},
    ]
    queue = FakeQueue([json.dumps(b) for b in bodies])
    args = build_parser({}).parse_args(
        ["tail", "--queue-url", "http://127.0.0.1:5000/1/outbox.fifo", "--once", "--json", *flags]
    )
    out = io.StringIO()

    assert follow(args, out, io.StringIO(), client=queue, sleep=lambda s: None) == 0

    assert [json.loads(line)["type"] for line in out.getvalue().splitlines()] == [
        "wait.answered",
        "thread.failed",
    ]
    assert queue.deleted == ["h0", "h1", "h2", "h3"]


def test_tail_type_lines_say_what_each_resolution_event_reports() -> None:
    queue = FakeQueue(
        [
            json.dumps(
                {
                    "type": "wait.revoked",
                    "occurred_at": "2026-11-30T10:00:00.000Z",
                    "thread_id": "t-1",
                    "question_id": "q-1",
                    "reason": "duplicate",
                }
            )
        ]
    )
    args = build_parser({}).parse_args(["tail", "--queue-url", "http://127.0.0.1:5000/1/q", "--once"])
    out = io.StringIO()

    follow(args, out, io.StringIO(), client=queue, sleep=lambda s: None)

    assert (
        out.getvalue()
        == '2026-11-30T10:00:00.000Z  wait.revoked  thread=t-1  question=q-1  reason="duplicate"\n'
    )


def test_tail_an_unknown_type_is_a_one_line_usage_error() -> None:
    err_out = io.StringIO()
    code = main(
        ["tail", "--queue-url", "http://127.0.0.1:5000/1/q", "--type", "wait.answered,wait.anwsered"],
        out=io.StringIO(),
        err=err_out,
    )

    err = err_out.getvalue()
    assert code == 2
    assert len(err.strip().splitlines()) == 1
    assert "wait.anwsered" in err and "wait.answered" in err


def test_tail_helpers() -> None:
    assert unwrap("not json") == "not json"
    assert endpoint_for("http://localhost:5000/1/q", None) == "http://localhost:5000"
    assert endpoint_for("https://sqs.eu-west-1.amazonaws.com/1/q", "http://x") == "http://x"


# -- first contact: one-line errors that say what to type ----------------------------------------


def test_api_without_a_scheme_is_one_line_saying_what_to_type() -> None:
    api = FakeApi({})

    code, _, err = _run(["questions", "list", "--api", "127.0.0.1:8787"], api)

    assert code == 2 and api.requests == []
    assert err.strip().splitlines() == [
        "agent-wait: --api '127.0.0.1:8787' has no scheme: use --api http://127.0.0.1:8787 "
        "(or https://... for a deployed api)"
    ]


@pytest.mark.parametrize("url", ["agent-wait-outbox.fifo", "127.0.0.1:5000/1/q", "http://127.0.0.1:5000/"])
def test_tail_with_a_bad_queue_url_is_one_line_without_traceback(url: str) -> None:
    code, _, err = _run(["tail", "--queue-url", url, "--once"], FakeApi({}))

    assert code == 2
    [line] = err.strip().splitlines()
    assert (
        line.startswith(f"agent-wait: --queue-url {url!r} is not a queue URL")
        and "http://127.0.0.1:PORT/" in line
    )


def test_answer_with_bare_text_is_one_line_showing_the_json_string(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["reply", "q-1", "--answer", "yes"], environ={})

    assert exc.value.code == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert "--answer '\"yes\"'" in line and "Traceback" not in line


def test_local_listing_shards_is_the_stacks_count(capsys: pytest.CaptureFixture[str]) -> None:
    parser = build_parser({})
    assert parser.parse_args(["local"]).listing_shards == 1
    assert parser.parse_args(["local", "--listing-shards", "16"]).listing_shards == 16
    for value in ("0", "65", "two"):
        with pytest.raises(SystemExit) as exc:
            parser.parse_args(["local", "--listing-shards", value])
        assert exc.value.code == 2
        assert "--listing-shards" in capsys.readouterr().err
