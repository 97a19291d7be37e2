"""The reply-throughput benchmark measures what it says: both halves answered 202 through real boto3
clients whose requests never leave the process, each making the same two calls (read the question,
write the answer: the resume follows from the ledger's stream), ours through the api Lambda's real
handler and the bare resolver behind the same wrappers."""

from __future__ import annotations

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


def test_the_real_handler_and_the_bare_resolver_make_the_same_calls_and_trace_alike() -> None:
    # Both sides behind Lambda's wrappers in processes of their own; tracing as deployed sends X-Ray
    # documents to the daemon's address, and none when tracing is disabled.
    workers = [
        figures.ReplyWorker("ours", tracing=True),
        figures.ReplyWorker("bare", tracing=True),
        figures.ReplyWorker("ours", tracing=False),
    ]
    try:
        calls = [w.calls() for w in workers]
        for w in workers:
            w.segments()
        spent = [w(3) for w in workers]
        segments = [w.segments() for w in workers]
    finally:
        for w in workers:
            w.close()

    assert calls == [{"dynamodb.GetItem": 1, "dynamodb.UpdateItem": 1}] * 3
    assert all(s > 0 for s in spent)
    # Traced: a subsegment per AWS call and one for the handler, for each of the 3 replies.
    assert segments[0] >= 3 * 3 and segments[1] >= 3 * 3
    assert segments[2] == 0


def test_our_code_over_the_framework_alone_is_measured_against_the_same_calls() -> None:
    found = figures.framework_throughput(rounds=1, batch=figures.CHUNKS)

    assert found.ratio is not None and found.ratio > 0
    assert found.goal == "—" and found.passed is None
    assert not [n for n in found.notes if "routes differ" in n]


@pytest.mark.parametrize("rounds", ["0", "-3", "x"])
def test_bench_refuses_a_number_of_pairs_that_is_not_one_or_more(
    rounds: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from bench.__main__ import main

    with pytest.raises(SystemExit) as exited:
        main(["--rounds", rounds])

    assert exited.value.code == 2
    assert f"--rounds: '{rounds}' is not a whole number of pairs" in capsys.readouterr().err
