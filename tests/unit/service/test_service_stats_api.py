"""``GET /stats`` and ``agent-wait stats``: the approval analytics through the api and the CLI.

The CLI's requests go to the api handler in-process (an opener that turns each urllib request into
an API Gateway event), so the table and ``--json`` are checked against the route's real answers.
"""

from __future__ import annotations

import io
import json
import urllib.error
import urllib.parse
from email.message import Message
from typing import TYPE_CHECKING, Any

import pytest
from service_events import body_of, get_event

from agent_wait_cli import main
from agent_wait_cli.client import ApiClient

if TYPE_CHECKING:
    from collections.abc import Callable

    from service_events import Aws, FakeClock

    Call = Callable[[dict[str, Any]], dict[str, Any]]


def stats_event(query: dict[str, str] | None = None) -> dict[str, Any]:
    return get_event("/stats", "/stats", query=query)


def decide_some(aws: Aws, api: Any, clock: FakeClock) -> None:
    """Three questions: ann approves one after 2 min, bob edits one after 1 h, one expires."""
    first = aws.raise_question("t-1", "q-1", now=clock())
    second = aws.raise_question("t-2", "q-2", now=clock())
    aws.raise_question(
        "t-3", "q-3", now=clock(), question={"function": "delete_user", "args": {"user": "u-1"}}
    )
    clock.advance(120)
    api.replies.reply("q-1", {"action": "approve"}, principal="ann", if_match=f'"{first.digest}"')
    clock.advance(3480)
    api.replies.reply(
        "q-2", {"action": "approve", "args": {"amount": 25}}, principal="bob", if_match=f'"{second.digest}"'
    )
    api.ledger.record_expiry("q-3", {"action": "reject", "reason": "expired"}, rung=0)
    aws.dispatch()


def test_stats_route_answers_the_window_figures(aws: Aws, api: Any, clock: FakeClock, call: Call) -> None:
    decide_some(aws, api, clock)

    response = call(stats_event({"since": "2026-11-30", "until": "2026-11-30"}))

    assert response["statusCode"] == 200
    body = body_of(response)
    totals = body["totals"]
    assert (totals["raised"], totals["approve"], totals["edit"], totals["expired_no_default"]) == (3, 1, 1, 1)
    assert (totals["approve_rate"], totals["edit_rate"]) == (0.5, 0.5)
    assert totals["time_to_answer"]["max_ms"] == 3_600_000
    assert [r["responder"] for r in body["by_responder"]] == ["ann", "bob", "system:expiry"]
    assert [d["day"] for d in body["by_day"]] == ["2026-11-30"]

    only_bob = body_of(call(stats_event({"since": "2026-11-30", "until": "2026-11-30", "responder": "bob"})))
    assert (only_bob["totals"]["answered"], only_bob["totals"]["edited_fields"]) == (
        1,
        [{"field": "amount", "count": 1}],
    )
    deletes = body_of(
        call(stats_event({"since": "2026-11-30", "until": "2026-11-30", "function": "delete_user"}))
    )
    assert (deletes["totals"]["raised"], deletes["totals"]["expired"], deletes["totals"]["answered"]) == (
        1,
        1,
        0,
    )


def test_stats_default_to_the_last_seven_days(aws: Aws, call: Call) -> None:
    body = body_of(call(stats_event()))
    # The clock is at 2026-11-30.
    assert (body["since"], body["until"], len(body["by_day"])) == ("2026-11-24", "2026-11-30", 7)


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({"since": "yesterday"}, "since"),
        ({"since": "2026-13-01"}, "since"),
        ({"until": "2026-02-30"}, "until"),
        ({"since": "2026-11-30", "until": "2026-11-01"}, "until"),
        ({"since": "2020-01-01", "until": "2026-11-30"}, "since"),
        ({"until": "2026-11-30T00:00:00Z"}, "until"),
        ({"until": ""}, "until"),
        ({"since": ""}, "since"),
    ],
)
def test_a_bad_date_is_422_naming_the_field(call: Call, query: dict[str, str], field: str) -> None:
    response = call(stats_event(query))

    assert response["statusCode"] == 422
    body = body_of(response)
    assert (body["error"], body["field"]) == ("invalid_window", field)


def test_a_window_ending_in_the_first_week_of_the_calendar_starts_on_its_first_day(call: Call) -> None:
    body = body_of(call(stats_event({"until": "0001-01-03"})))

    assert (body["since"], body["until"], len(body["by_day"])) == ("0001-01-01", "0001-01-03", 3)


def test_the_document_says_the_window_ends_are_dates(call: Call) -> None:
    spec = body_of(call(get_event("/openapi.json", "/openapi.json")))
    parameters = {p["name"]: p["schema"] for p in spec["paths"]["/stats"]["get"]["parameters"]}

    assert parameters["since"]["format"] == parameters["until"]["format"] == "date"


def test_an_empty_filter_is_400_naming_it(call: Call) -> None:
    response = call(stats_event({"function": ""}))
    assert response["statusCode"] == 400
    assert body_of(response)["field"] == "function"


def test_the_route_is_in_the_openapi_document(call: Call) -> None:
    spec = body_of(call(get_event("/openapi.json", "/openapi.json")))
    route = spec["paths"]["/stats"]["get"]
    assert {p["name"] for p in route["parameters"]} == {"since", "until", "function", "responder"}
    assert {"200", "422"} <= set(route["responses"])
    assert "StatsView" in json.dumps(route["responses"]["200"])


# -- the CLI --------------------------------------------------------------------------------------


class InProcess:
    """A urllib opener that hands each request to the api handler as API Gateway would."""

    def __init__(self, call: Call) -> None:
        self.call = call

    def __call__(self, request: Any, timeout: float) -> Any:
        url = urllib.parse.urlsplit(request.full_url)
        query = dict(urllib.parse.parse_qsl(url.query)) or None
        response = self.call(get_event(url.path, url.path, query=query))
        text = response["body"]
        if response["statusCode"] >= 400:
            raise urllib.error.HTTPError(
                request.full_url, response["statusCode"], "err", Message(), io.BytesIO(text.encode())
            )
        return _Response(response["statusCode"], text)


class _Response:
    def __init__(self, status: int, text: str) -> None:
        self.status = status
        self.headers = Message()
        self._body = text.encode()

    def read(self) -> bytes:
        return self._body

    def __enter__(self) -> _Response:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


def run_cli(argv: list[str], call: Call) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    client = ApiClient("http://127.0.0.1:8787", opener=InProcess(call), sigv4=False)
    code = main(argv, out=out, err=err, client=client, environ={})
    return code, out.getvalue(), err.getvalue()


def test_cli_stats_prints_tables(aws: Aws, api: Any, clock: FakeClock, call: Call) -> None:
    decide_some(aws, api, clock)

    code, out, _ = run_cli(["stats", "--since", "2026-11-30", "--until", "2026-11-30"], call)

    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "2026-11-30 .. 2026-11-30"
    assert lines[1].startswith("raised 3  answered 2  expired 1 (default applied 0)  revoked 0")
    assert lines[2] == "approve 50%  edit 50%  time to answer p50 2.1m  p90 1.0h  max 1.0h"
    assert lines[4].split() == [
        "RESPONDER",
        "RAISED",
        "ANSWERED",
        "APPROVE",
        "EDIT",
        "REJECT",
        "RESPOND",
        "EXPIRED",
        "REVOKED",
        "P50",
        "P90",
        "MAX",
        "APPROVE%",
        "EDIT%",
    ]
    rows = {line.split()[0]: line.split()[1:] for line in lines[5:8]}
    assert rows["ann"] == ["0", "1", "1", "0", "0", "0", "0", "0", "2.0m", "2.0m", "2.0m", "100%", "0%"]
    assert rows["bob"][:4] == ["0", "1", "0", "1"] and rows["bob"][-2:] == ["0%", "100%"]
    assert rows["system:expiry"][6] == "1"
    assert any(line.startswith("EDITED FIELD") for line in lines)
    assert any(line.split()[:2] == ["amount", "1"] for line in lines)


def test_cli_stats_json_is_the_api_body(aws: Aws, api: Any, clock: FakeClock, call: Call) -> None:
    decide_some(aws, api, clock)

    code, out, _ = run_cli(
        ["stats", "--since", "2026-11-30", "--until", "2026-11-30", "--responder", "ann", "--json"], call
    )

    assert code == 0
    body = json.loads(out)
    assert body == body_of(
        call(stats_event({"since": "2026-11-30", "until": "2026-11-30", "responder": "ann"}))
    )
    assert body["totals"]["approve"] == 1


def test_cli_stats_bad_date_exits_1_with_the_api_message(call: Call) -> None:
    code, _, err = run_cli(["stats", "--since", "2026-13-01"], call)
    assert code == 1
    assert "since" in err
