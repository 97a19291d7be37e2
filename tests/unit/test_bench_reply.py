"""The reply-throughput benchmark measures what it says: both halves answered 202 through real boto3
clients whose requests never leave the process, each making the same two calls (read the question,
write the answer: the resume follows from the ledger's stream)."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest

from bench import figures


@pytest.fixture(autouse=True)
def _no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_: Any, **__: Any) -> None:
        raise AssertionError("the stubbed clients opened a connection")

    monkeypatch.setattr("botocore.httpsession.URLLib3Session.send", refuse)


def test_stubbed_clients_answer_in_process_with_parsed_responses() -> None:
    item = {"dedupe_key": {"S": "k"}, "answer": {"M": {"action": {"S": "approve"}}}}
    dynamodb, sqs = figures.stubbed_clients(item)

    got = dynamodb.get_item(TableName="t", Key={"dedupe_key": {"S": "k"}}, ConsistentRead=True)
    sent = sqs.send_message(QueueUrl=figures.RUNNER_ENV["AGENT_WAIT_INBOX_URL"], MessageBody="{}")

    assert got["Item"] == item
    assert sent["MessageId"] == "m"
    assert dynamodb.update_item(TableName="t", Key={"dedupe_key": {"S": "k"}})["ResponseMetadata"]


def test_stubbed_clients_still_validate_parameters() -> None:
    # The stub sits after botocore's validation and serialization: a bad call fails as in Lambda.
    from botocore.exceptions import ParamValidationError

    dynamodb, _ = figures.stubbed_clients({})
    with pytest.raises(ParamValidationError):
        dynamodb.get_item(TableName="t", Key={"dedupe_key": "not an attribute value"})


def test_both_halves_make_the_same_calls(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: Counter[tuple[str, str]] = Counter()
    stubbed = figures.stubbed_clients

    def counting(item: dict[str, Any]) -> tuple[Any, Any]:
        clients = stubbed(item)
        for client in clients:
            client.meta.events.register(
                "before-call",
                lambda model, **_: calls.update([(model.service_model.service_name, model.name)]),
            )
        return clients

    monkeypatch.setattr(figures, "stubbed_clients", counting)
    found = figures.reply_throughput(rounds=1, batch=figures.CHUNKS)

    assert [f.goal for f in found] == ["≥ 0.8", "— (shows our code's own cost)"]
    assert all(f.ratio is not None and f.ratio > 0 for f in found)
    # One warm-up reply and CHUNKS timed ones per half, through the HTTP-layer stub.
    replies = 2 * (1 + figures.CHUNKS)
    per_reply = {call: count / replies for call, count in calls.items()}
    assert per_reply == {
        ("dynamodb", "GetItem"): 1,
        ("dynamodb", "UpdateItem"): 1,
    }, json.dumps({f"{s}.{o}": n for (s, o), n in calls.items()})


@pytest.mark.parametrize("rounds", ["0", "-3", "x"])
def test_bench_refuses_a_number_of_pairs_that_is_not_one_or_more(
    rounds: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from bench.__main__ import main

    with pytest.raises(SystemExit) as exited:
        main(["--rounds", rounds])

    assert exited.value.code == 2
    assert f"--rounds: '{rounds}' is not a whole number of pairs" in capsys.readouterr().err
