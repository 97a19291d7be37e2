"""``make capacity``'s arithmetic: DynamoDB's request units, the Step Functions walk, the costs, the rates."""

from __future__ import annotations

import math
from collections import Counter
from typing import TYPE_CHECKING, Any

import boto3
import pytest
from moto import mock_aws

from bench import capacity_report, costs, stepfunctions
from bench.prices import PRICES, SECONDS_PER_MONTH
from bench.recorder import Call, CallRecorder, TableShape, Usage, current_function, item_size

if TYPE_CHECKING:
    from pathlib import Path

REGION = "us-east-1"


# -- request units, from the stored item sizes --------------------------------------------------


@pytest.fixture
def table() -> Any:
    """A table with an ALL index on ``status`` and a KEYS_ONLY index on ``owner``, and a recorder."""
    with mock_aws():
        setup = boto3.client("dynamodb", region_name=REGION)
        keys = [("pk", "S"), ("status", "S"), ("created", "S"), ("owner", "S")]
        setup.create_table(
            TableName="t",
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": n, "AttributeType": t} for n, t in keys],
            BillingMode="PAY_PER_REQUEST",
            GlobalSecondaryIndexes=[
                {
                    "IndexName": "by-status",
                    "KeySchema": [
                        {"AttributeName": "status", "KeyType": "HASH"},
                        {"AttributeName": "created", "KeyType": "RANGE"},
                    ],
                    "Projection": {"ProjectionType": "ALL"},
                },
                {
                    "IndexName": "by-owner",
                    "KeySchema": [{"AttributeName": "owner", "KeyType": "HASH"}],
                    "Projection": {"ProjectionType": "KEYS_ONLY"},
                },
            ],
        )
        recorder = CallRecorder(lambda: boto3.client("dynamodb", region_name=REGION))
        with recorder.installed():
            client = boto3.client("dynamodb", region_name=REGION)
            token = current_function.set("api")
            try:
                yield recorder, client
            finally:
                current_function.reset(token)


def _item(status: str, body_bytes: int) -> dict[str, Any]:
    return {
        "pk": {"S": "q-1"},
        "status": {"S": status},
        "created": {"S": "2026-12-01"},
        "owner": {"S": "ann"},
        "body": {"S": "x" * body_bytes},
    }


def _usage(recorder: CallRecorder) -> list[tuple[str, str, float, float]]:
    return [(u.where, u.partition, u.wru, u.rru) for c in recorder.calls for u in c.usage]


def test_a_put_costs_a_unit_per_started_kib_on_the_table_and_each_index_it_enters(table: Any) -> None:
    recorder, client = table
    item = _item("raised", 1500)
    size = item_size(item)  # names + values: a little over 1.5 KiB
    assert 1024 < size <= 2048

    client.put_item(TableName="t", Item=item)

    assert _usage(recorder) == [
        ("t", "q-1", 2.0, 0.0),  # 2 KiB started
        ("t/by-status", "raised", 2.0, 0.0),  # ALL: the whole item again
        ("t/by-owner", "ann", 1.0, 0.0),  # KEYS_ONLY: the keys, under 1 KiB
    ]
    assert recorder.calls[0].function == "api"


def test_changing_an_index_key_deletes_and_puts_the_entry_and_a_keys_only_index_is_untouched(
    table: Any,
) -> None:
    recorder, client = table
    client.put_item(TableName="t", Item=_item("raised", 100))
    recorder.clear()

    client.update_item(
        TableName="t",
        Key={"pk": {"S": "q-1"}},
        UpdateExpression="SET #s = :s",
        ExpressionAttributeNames={"#s": "status"},
        ExpressionAttributeValues={":s": {"S": "answered"}},
    )

    assert _usage(recorder) == [
        ("t", "q-1", 1.0, 0.0),
        ("t/by-status", "raised", 1.0, 0.0),  # the old entry deleted
        ("t/by-status", "answered", 1.0, 0.0),  # the new entry put
        # by-owner projects keys only and its key did not change: no write
    ]


def test_a_failed_condition_costs_the_stored_item_and_writes_no_index(table: Any) -> None:
    recorder, client = table
    client.put_item(TableName="t", Item=_item("raised", 3000))
    recorder.clear()

    with pytest.raises(client.exceptions.ConditionalCheckFailedException):
        client.put_item(
            TableName="t", Item=_item("answered", 10), ConditionExpression="attribute_not_exists(pk)"
        )

    assert _usage(recorder) == [("t", "q-1", 3.0, 0.0)]
    assert recorder.calls[0].ok is False


def test_a_transaction_doubles_the_table_writes(table: Any) -> None:
    recorder, client = table
    client.transact_write_items(TransactItems=[{"Put": {"TableName": "t", "Item": _item("raised", 100)}}])

    assert _usage(recorder)[0] == ("t", "q-1", 2.0, 0.0)


def test_reads_cost_a_unit_per_4_kib_halved_when_eventually_consistent_and_a_query_sums_first(
    table: Any,
) -> None:
    recorder, client = table
    for n in range(3):
        item = _item("raised", 1500) | {"pk": {"S": f"q-{n}"}}
        client.put_item(TableName="t", Item=item)
    recorder.clear()

    client.get_item(TableName="t", Key={"pk": {"S": "q-0"}}, ConsistentRead=True)
    client.get_item(TableName="t", Key={"pk": {"S": "q-0"}}, ProjectionExpression="pk")
    client.query(
        TableName="t",
        IndexName="by-status",
        KeyConditionExpression="#s = :s",
        ExpressionAttributeNames={"#s": "status"},
        ExpressionAttributeValues={":s": {"S": "raised"}},
    )

    assert _usage(recorder) == [
        ("t", "q-0", 0.0, 1.0),  # strongly consistent, under 4 KiB
        ("t", "q-0", 0.0, 0.5),  # eventually consistent; the projection does not shrink the read
        ("t/by-status", "raised", 0.0, 1.0),  # 3 × ~1.5 KiB summed = 2 units of 4 KiB, halved
    ]


# -- the Step Functions flow --------------------------------------------------------------------


def test_the_sample_flow_walks_six_states_of_the_asl() -> None:
    entered = stepfunctions.walk(stepfunctions.load_asl(), stepfunctions.sample_flow(questions=1))

    # Run (parks) → Parked? → WaitForAnswer (the reply's SendTaskSuccess) → Run (ends) → Parked? → Done
    assert entered == ["Run", "Parked?", "WaitForAnswer", "Run", "Parked?", "Done"]
    assert stepfunctions.transitions() == 6


def test_reminders_and_the_expiry_are_transitions_too() -> None:
    # Two reminders time the wait out before the answer: WaitForAnswer → Timer → Expired? twice more.
    assert stepfunctions.transitions(1, timers_fired=2) == 6 + 2 * 3
    # The expiry's default answer resumes the run:
    # Run, Parked?, WaitForAnswer, Timer, Expired?, Run, Parked?, Done
    assert stepfunctions.transitions(1, timers_fired=1, expires=True) == 8


def test_the_walker_refuses_what_it_does_not_understand() -> None:
    asl = {"StartAt": "P", "States": {"P": {"Type": "Parallel", "Branches": [], "End": True}}}
    with pytest.raises(ValueError, match="Parallel"):
        stepfunctions.walk(asl, {})
    with pytest.raises(ValueError, match="no outcome left"):
        stepfunctions.walk(stepfunctions.load_asl(), {})


# -- costs --------------------------------------------------------------------------------------

TINY = costs.PerQuestion(
    lambda_requests={"api": 2},
    lambda_gb_seconds={"api": 0.5},
    dynamodb_wru_tables=4,
    dynamodb_wru_indexes=2,
    dynamodb_rru=1,
    sqs_requests={"inbox.fifo": 3},
    sns_publishes=1,
    api_requests=2,
    scheduler_invocations=1,
    log_bytes=1000,
    firehose_billed_bytes=3 * 5 * 1024,
)


def test_costs_per_million_questions_on_a_tiny_made_up_count() -> None:
    usd = {line.item.split(" (")[0]: round(line.usd, 4) for line in costs.itemised(TINY)}

    assert usd == {
        "Lambda requests": 0.40,  # 2 M requests × $0.20/M
        "Lambda GB-s": 6.6667,  # 0.5 M GB-s × $0.0000133334
        "DynamoDB writes, tables": 2.50,  # 4 M WRU × $0.625/M
        "DynamoDB writes, index replication": 1.25,  # 2 M WRU × $0.625/M
        "DynamoDB reads": 0.125,  # 1 M RRU × $0.125/M
        "DynamoDB Streams": 0.0,
        "SQS inbox.fifo": 1.50,  # 3 M requests × $0.50/M
        "SNS publishes": 0.50,  # 1 M × $0.50/M
        "API Gateway REST requests": 7.00,  # 2 M × $3.50/M
        "EventBridge Scheduler invocations": 1.00,  # 1 M × $1.00/M
        "CloudWatch Logs ingested": 0.50,  # 1,000 B × 1 M = 1 GB × $0.50
        # three archive records, each billed as 5 KiB: 15 KiB × 1 M = 14.305 GiB × $0.029
        "Firehose ingestion, audit archive": 0.4148,
    }
    assert costs.total(costs.itemised(TINY)) == pytest.approx(21.4417 + 0.4148, abs=1e-4)


def test_firehose_bills_each_archive_record_rounded_up_to_5_kb() -> None:
    sizes = [1, 2303, 5120, 5121]
    assert [capacity_report.firehose_billed(size) for size in sizes] == [5120, 5120, 5120, 10240]


def test_step_functions_drops_the_inbox_and_scheduler_adds_transitions_and_the_token_task() -> None:
    token = costs.TokenTask(gb_seconds=0.1, wru=3)

    lines = costs.step_functions(TINY, transitions=6, waits=1, token=token, inbox="inbox.fifo")

    items = [line.item for line in lines]
    assert "SQS inbox.fifo" not in items
    assert not any(item.startswith("EventBridge Scheduler") for item in items)
    # 21.4417 − 1.50 (inbox) − 1.00 (Scheduler) + 150 (6 M transitions × $0.025/1,000)
    # + 0.20 (1 M requests) + 1.3333 (0.1 M GB-s) + 1.875 (3 M WRU); the audit archive stays (0.4148)
    expected = 21.4417 - 2.5 + 150 + 0.2 + 1.3333 + 1.875 + 0.4148
    assert costs.total(lines) == pytest.approx(expected, abs=1e-3)


# -- rates --------------------------------------------------------------------------------------


def _sample(calls: list[Call], questions: int) -> capacity_report.Sample:
    return capacity_report.Sample(
        questions=questions,
        timed=0,
        calls=calls,
        invocations=[capacity_report.Invocation("api", 0.1, f"t{n}") for n in range(questions)],
        log_bytes=Counter(),
        tables={"t": TableShape("t", "pk", None)},
        queues={"inbox.fifo": {}},
        ledger_table="t",
        inbox="inbox.fifo",
        per_thread_ids={f"t{n}": f"t{n}" for n in range(questions)},
        questions_raised=questions,
        seconds=1.0,
    )


def test_a_shared_key_heats_up_with_the_rate_and_a_per_question_key_does_not() -> None:
    # Four questions: each writes 3 WRU to the shared "raised" partition and 5 WRU to its own key.
    calls = []
    for n in range(4):
        call = Call("dynamodb", "PutItem", "api", f"t{n}", target="t")
        call.usage = [Usage("t/by-status", "raised", wru=3), Usage("t", f"q:t{n}", wru=5)]
        calls.append(call)

    report = capacity_report.analyse(_sample(calls, 4), rate=200, answer_after=None)
    rows = {row.figure.split(":")[0]: row for row in report.rows}

    shared = rows["hottest shared partition, writes"]
    assert shared.at_rate == 3 * 200  # 3 WRU a question × 200 questions a second
    assert shared.share == pytest.approx(0.6)
    assert shared.flag == "above 50%"
    own = rows["hottest per-question partition, writes over its whole life (any rate)"]
    assert own.at_rate == 5  # one question's key: the same at any rate
    assert own.flag == "ok"
    api = rows["Lambda api concurrency"]
    assert api.at_rate == pytest.approx(0.1 * 200)  # 0.1 s per question × 200 a second


def test_a_counter_shard_one_question_happened_to_touch_is_still_a_shared_key() -> None:
    # One question writes 20 WRU to a counter shard no other question of the sample touched, and
    # 3 WRU to its run's item (keyed on the run's id, which the sample records for its thread)
    call = Call("dynamodb", "TransactWriteItems", "dispatcher", "t0", target="t")
    call.usage = [Usage("stats", "stats#2026-12#11", wru=20), Usage("t", "run:01RUN", wru=3)]
    sample = _sample([call], 1)
    sample.per_thread_ids["01RUN"] = "t0"

    rows = {
        row.figure.split(":")[0]: row for row in capacity_report.analyse(sample, 200, answer_after=None).rows
    }

    # Then the shard heats with the rate (more questions land on it), the run's key does not
    assert rows["hottest shared partition, writes"].at_rate == 20 * 200
    assert rows["hottest per-question partition, writes over its whole life (any rate)"].at_rate == 3


def test_a_sharded_listing_is_also_shown_at_an_even_spread_over_its_shards() -> None:
    # Sixteen questions, unevenly hashed: twelve in shard 3, four in shard 7, 4 WRU each.
    calls = []
    for n in range(16):
        call = Call("dynamodb", "UpdateItem", "api", f"t{n}", target="t")
        call.usage = [Usage("t/by-status", "answered#3" if n < 12 else "answered#7", wru=4)]
        calls.append(call)

    report = capacity_report.analyse(_sample(calls, 16), rate=160, answer_after=None)
    rows = {row.figure.split(":")[0]: row for row in report.rows}

    # The sample's hottest shard: 48 WRU over 16 questions, at 10 samples a second.
    assert rows["hottest shared partition, writes"].at_rate == 48 * 10
    # At an even spread over the shards docs/performance.md sets for 160 questions a second (three:
    # 8 WRU a question on the open listing, 500 a shard): the listing's 64 WRU at 10 samples a second.
    even = rows["hottest sharded listing, writes per shard at an even spread"]
    assert even.at_rate == pytest.approx(64 / 3 * 10)
    assert "answered#0..2" in even.figure
    assert "listing_shards=3" in even.figure


def test_the_section_is_replaced_in_place_and_make_bench_keeps_it(tmp_path: Path) -> None:
    from bench import figures

    results = tmp_path / "results.md"
    results.write_text("# Benchmark results\n\nmake bench's table\n")

    capacity_report.write_section(["## Capacity and cost", "first"], results)
    capacity_report.write_section(["## Capacity and cost", "second"], results)
    figures.write_results([], results, "header")

    text = results.read_text()
    assert text.count("## Capacity and cost") == 1
    assert "second" in text and "first" not in text
    assert text.startswith("# Benchmark results\n\nheader")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--rate", "0"], "'0' is not a number above 0"),
        (["--questions", "many"], "'many' is not a number above 0"),
        (["--timed-share", "1.5"], "'1.5' is not a share from 0 to 1"),
    ],
)
def test_a_bad_setting_is_a_one_line_usage_error(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from bench import capacity

    with pytest.raises(SystemExit) as exited:
        capacity.main(args)

    assert exited.value.code == 2
    assert message in capsys.readouterr().err


def test_live_schedules_are_creations_a_second_times_how_long_each_lives() -> None:
    # Two questions, each creating a timer due in an hour and one due in ten minutes.
    calls = []
    for n in range(2):
        for lifetime in (3600.0, 600.0):
            call = Call("scheduler", "CreateSchedule", "runner", f"t{n}", target="timers")
            call.schedule_lifetime = lifetime
            calls.append(call)

    def live(answer_after: float | None) -> float:
        report = capacity_report.analyse(_sample(calls, 2), rate=10, answer_after=answer_after)
        return next(r.at_rate for r in report.rows if r.figure.startswith("Scheduler schedules live"))

    # Little's law: 10 questions a second × (3,600 + 600) s of timer per question.
    assert live(None) == 10 * (3600 + 600)
    # Answered after five minutes: both timers are deleted then.
    assert live(300) == 10 * (300 + 300)


def test_calls_made_at_once_wait_as_long_as_the_slowest_of_them() -> None:
    # A resume's first round trip: the question read and the thread's mark sent together (the
    # mark's pool thread), then a transaction alone.
    from bench.recorder import round_trips

    timed = [
        ("dynamodb.GetItem", 0.000, 0.004),
        ("dynamodb.UpdateItem", 0.001, 0.006),
        ("dynamodb.TransactWriteItems", 0.007, 0.010),
    ]
    rounds = round_trips(timed)
    assert rounds == (("dynamodb.GetItem", "dynamodb.UpdateItem"), ("dynamodb.TransactWriteItems",))
    invocation = capacity_report.Invocation(
        "runner", 0.5, "t0", cpu_seconds=0.0, calls=tuple(name for name, _, _ in timed), rounds=rounds
    )
    # 10 ms (the longer of the two reads at once) + 20 ms (the transaction), not 10 + 10 + 20
    assert invocation.modelled_seconds(1769) == pytest.approx(0.030)
    in_turn = capacity_report.Invocation("runner", 0.5, "t0", cpu_seconds=0.0, calls=invocation.calls)
    assert in_turn.modelled_seconds(1769) == pytest.approx(0.040)


def test_calls_one_after_another_are_round_trips_of_their_own_even_back_to_back() -> None:
    from bench.recorder import round_trips

    # answered at 0.004, the next sent at 0.004: not at once
    timed = [("sqs.SendMessage", 0.004, 0.008), ("dynamodb.GetItem", 0.0, 0.004)]
    assert round_trips(timed) == (("dynamodb.GetItem",), ("sqs.SendMessage",))
    assert round_trips([]) == ()


def test_lambda_durations_are_modelled_from_cpu_time_and_calls_not_the_wall_time() -> None:
    # 20 ms of CPU at 512 MB (a 512/1769 share of a vCPU) and three calls in a row: a GetItem
    # (10 ms), a transaction (20 ms) and an SQS send (28 ms); the 900 ms wall time on a loaded
    # machine is shown beside it, not billed.
    invocation = capacity_report.Invocation(
        "api",
        0.9,
        "t0",
        cpu_seconds=0.020,
        calls=("dynamodb.GetItem", "dynamodb.TransactWriteItems", "sqs.SendMessage"),
    )

    modelled = invocation.modelled_seconds(512)

    assert modelled == pytest.approx(0.020 * 1769 / 512 + 0.058)
    assert invocation.modelled_seconds(2048) == pytest.approx(0.020 + 0.058)  # a whole vCPU and more
    sample = _sample([], 1)
    sample.invocations = [invocation]
    report = capacity_report.analyse(sample, rate=100, answer_after=None)
    rows = {row.figure: row for row in report.rows}
    assert rows["Lambda api concurrency"].at_rate == pytest.approx(modelled * 100)
    # Billed per started millisecond, at the api's 512 MB
    assert report.per_question.lambda_gb_seconds["api"] == pytest.approx(
        math.ceil(modelled * 1000) / 1000 * 512 / 1024
    )
    assert any("measured wall time 900 ms" in note for note in report.notes)


def test_batch_sends_are_billed_per_64_kib_of_the_batch_and_count_each_message_against_snss_quota() -> None:
    with mock_aws():
        sns, sqs = boto3.client("sns", region_name=REGION), boto3.client("sqs", region_name=REGION)
        topic = sns.create_topic(Name="events")["TopicArn"]
        queue = sqs.create_queue(QueueName="outbox.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
        recorder = CallRecorder(lambda: boto3.client("dynamodb", region_name=REGION))
        with recorder.installed():
            sns, sqs = boto3.client("sns", region_name=REGION), boto3.client("sqs", region_name=REGION)
            token = current_function.set("dispatcher")
            try:
                # Three small messages in one call each way; one 70 KiB message alone
                sns.publish_batch(
                    TopicArn=topic,
                    PublishBatchRequestEntries=[{"Id": str(n), "Message": "x" * 100} for n in range(3)],
                )
                sqs.send_message_batch(
                    QueueUrl=queue,
                    Entries=[
                        {
                            "Id": str(n),
                            "MessageBody": "y" * 100,
                            "MessageGroupId": f"t-{n}",
                            "MessageDeduplicationId": f"d-{n}",
                        }
                        for n in range(3)
                    ],
                )
                sns.publish(TopicArn=topic, Message="z" * 70 * 1024)
            finally:
                current_function.reset(token)
    batch, send, single = [c for c in recorder.calls if c.service in ("sns", "sqs")]
    assert (batch.action, batch.messages, batch.billable) == ("PublishBatch", 3, 1)
    assert (send.action, send.messages, send.billable) == ("SendMessageBatch", 3, 1)
    assert (single.action, single.messages, single.billable) == ("Publish", 1, 2)

    report = capacity_report.analyse(_sample(recorder.calls, 1), rate=10, answer_after=None)
    [row] = [r for r in report.rows if r.figure.startswith("SNS")]
    assert row.at_rate == 10 * (3 + 1)
    assert report.per_question.sns_publishes == 1 + 2
    assert report.per_question.sqs_requests == {"outbox.fifo": 1}


def test_a_stream_shard_carries_the_records_of_its_share_of_the_ledgers_writes_against_full_batches() -> None:
    # Two questions, each writing 20 WRU to the ledger "t" and making 12 stream records
    calls = []
    for n in range(2):
        call = Call("dynamodb", "PutItem", "api", f"t{n}", target="t")
        call.usage = [Usage("t", f"q{n}", wru=20.0), Usage("t/by-status", "open#0", wru=100.0)]
        calls.append(call)
    sample = _sample(calls, 2)
    sample.invocations += [capacity_report.Invocation("dispatcher", 0.1, None, records=4) for _ in range(6)]
    # Full batches of 100 records, each 0.05 s of CPU (×6.91 at 256 MB) and two 10 ms round trips
    sample.full_batches = [
        capacity_report.Invocation(
            capacity_report.FULL_BATCH,
            9.0,
            None,
            records=100,
            cpu_seconds=0.05,
            calls=("dynamodb.PutItem", "dynamodb.PutItem"),
        )
        for _ in range(3)
    ]

    shard = capacity_report.stream_shard(sample, calls, rate=1000)

    # 20 WRU a question on the table (the index's are not the table's partitions): 20,000 WRU/s at
    # 1,000 questions/s, so at least 20 shards; 12,000 records/s over them
    assert shard is not None
    assert shard.shards == 20 and shard.records_per_second == 600
    batch_seconds = 0.05 * capacity_report.cpu_scale(capacity_report.DISPATCHER_MEMORY_MB) + 0.02
    assert shard.taken_per_batch == pytest.approx(100 / batch_seconds)
    # The deployment's default batches of a shard at once
    from infra.constants import DISPATCHER_PARALLELIZATION

    assert shard.parallelization == DISPATCHER_PARALLELIZATION
    # Under half busy: enough batches of a shard at once for twice the records
    assert shard.needed() == math.ceil(600 / (shard.taken_per_batch / 2))
    report = capacity_report.analyse(sample, 1000, answer_after=None)
    [row] = [r for r in report.rows if "stream" in r.figure]
    # In full batches: 12,000 records a second make 120 batches, each busy 0.37 s, two puts each
    [note] = [n for n in report.notes if n.startswith("under load")]
    assert "120 invocations a second, about 44 executions at once, and make dynamodb.PutItem 240/s" in note
    assert (row.at_rate, row.limit) == (
        600,
        pytest.approx(shard.taken_per_batch * DISPATCHER_PARALLELIZATION),
    )


def test_at_the_rate_the_dispatchers_work_is_priced_as_the_rates_batches_make_it() -> None:
    # Two questions. In the sample the dispatcher took 8 invocations, each 2 WRU of counters, an SQS
    # send and 300 B of log; replayed in the rate's batches it took 1 invocation doing the same work once.
    def dispatcher_call(function: str) -> Call:
        call = Call("dynamodb", "TransactWriteItems", function, None, target="stats")
        call.usage = [Usage("stats", "stats#0", wru=2.0)]
        return call

    def send(function: str) -> Call:
        return Call("sqs", "SendMessageBatch", function, None, target="outbox.fifo", messages=3, billable=1)

    api_call = Call("dynamodb", "PutItem", "api", "t0", target="t")
    api_call.usage = [Usage("t", "q-t0", wru=5.0)]
    calls = [api_call]
    for _ in range(8):
        calls += [dispatcher_call("dispatcher"), send("dispatcher")]
    sample = _sample(calls, 2)
    sample.invocations += [capacity_report.Invocation("dispatcher", 0.05, None, records=3) for _ in range(8)]
    sample.log_bytes = Counter({"api": 100, "dispatcher": 8 * 300})
    at_rate = capacity_report.AT_RATE_BATCH
    sample.at_rate = capacity_report.Replay(
        size=24,
        invocations=[capacity_report.Invocation(at_rate, 0.05, None, records=24)],
        calls=[dispatcher_call(at_rate), send(at_rate)],
        log_bytes=300,
    )

    report = capacity_report.analyse(sample, rate=1000, answer_after=None)

    # The figures at the rate count the replay's calls and invocations: 0.5 SQS calls and
    # invocations (0.05 s each) a question, not the sample's 4
    [sends] = [r for r in report.rows if r.figure.startswith("SQS outbox.fifo SendMessageBatch")]
    assert sends.at_rate == 500
    [busy] = [r for r in report.rows if r.figure == "Lambda dispatcher concurrency"]
    assert busy.at_rate == pytest.approx(1000 * 0.5 * 0.05)
    q = report.per_question
    assert q.lambda_requests == {"api": 1.0, "dispatcher": 0.5}
    assert q.dynamodb_wru_tables == (5.0 + 2.0) / 2
    assert q.sqs_requests == {"outbox.fifo": 0.5}
    platform = capacity_report.platform_log_bytes("dispatcher", capacity_report.DISPATCHER_MEMORY_MB)
    api_platform = capacity_report.platform_log_bytes("api", capacity_report.API_MEMORY_MB)
    assert q.log_bytes == (100 + 300 + 2 * api_platform + platform) / 2
    # The sample's own batches are priced beside it, and cost more
    assert report.sample_batches is not None
    ours_sample, sfn_sample = report.sample_batches
    assert costs.total(ours_sample) > costs.total(report.ours)
    assert costs.total(sfn_sample) - costs.total(report.sfn) == pytest.approx(
        costs.total(ours_sample) - costs.total(report.ours), abs=1e-9
    )
    text = "\n".join(capacity_report.render(report))
    assert "| item | ours at 1000/s | Step Functions at 1000/s | ours, the sample's batches |" in text
    assert "in batches of 24 records" in text
    [requests] = [line for line in text.splitlines() if line.startswith("| Lambda requests")]
    # Named by the rate's counts, priced both ways: 1.5 and 5 requests a question
    named = "| Lambda requests (api 1, dispatcher 0.5 per question) |"
    assert requests.startswith(f"{named} $0.30 | $0.30 | $1.00 |")
    # The month at the rate is named, with the tiers it fills and the low rate's first tier
    assert "a month of 730 hours holds 2.63e+09 questions" in text
    assert "The sample's-batches columns, a low rate's, are priced at the first tier." in text


def test_without_a_replay_at_the_rate_the_sample_is_priced_as_it_ran() -> None:
    sample = _sample([], 2)
    sample.invocations += [capacity_report.Invocation("dispatcher", 0.05, None, records=3)]

    report = capacity_report.analyse(sample, rate=10, answer_after=None)

    assert report.sample_batches is None
    assert report.per_question.lambda_requests == {"api": 1.0, "dispatcher": 0.5}
    assert "| item | ours | Step Functions |" in capacity_report.render(report)


def test_the_runner_is_priced_at_other_memory_sizes_from_the_same_cpu_and_calls() -> None:
    # One question, two warm runner invocations: 20 ms of CPU on a whole vCPU and one 10 ms write each
    sample = _sample([], 1)
    sample.invocations += [
        capacity_report.Invocation("runner", 1.0, "t0", cpu_seconds=0.02, calls=("dynamodb.PutItem",))
        for _ in range(2)
    ]

    note = capacity_report.runner_memory_note(sample)

    # 512 MB: 20 ms × 3.46 + 10 ms = 79.2 ms, billed 80 ms × 0.5 GB twice: 0.080 GB-s, $1.07 a million
    # 1,769 MB (a whole vCPU): 30 ms, billed 30 ms × 1.728 GB twice: 0.1037 GB-s, $1.38
    assert note is not None
    assert "512 MB 79 ms, $1.07" in note
    assert "1024 MB (deployed) 45 ms, $1.20" in note
    assert "1769 MB 30 ms, $1.38" in note
    assert "runner_memory" in note


def test_no_runner_invocation_measured_prices_no_memory_sizes() -> None:
    assert capacity_report.runner_memory_note(_sample([], 1)) is None


def test_the_sample_records_its_questions_with_a_deployed_reply_url_and_principal() -> None:
    # A question item's size decides its write units at each move, so the sample's items hold a
    # reply URL shaped as the stack's (a REST API id is 10 characters; infra.functions sets it)
    # and a principal as the default auth (IAM) records one.
    from bench.capacity import DEPLOYED_PRINCIPAL, DEPLOYED_REPLY_URL
    from infra import constants

    stage_url = f"https://{'x' * 10}.execute-api.us-east-1.amazonaws.com/{constants.API_STAGE}/"
    assert len(DEPLOYED_REPLY_URL) == len(f"{stage_url}questions/{{question_id}}/reply")
    assert DEPLOYED_REPLY_URL.format(question_id="q").endswith("/questions/q/reply")
    assert DEPLOYED_PRINCIPAL.startswith("arn:aws:sts::") and ":assumed-role/" in DEPLOYED_PRINCIPAL


def test_a_price_with_volume_tiers_averages_the_tiers_a_month_fills() -> None:
    rest, gb = PRICES["apigw_rest_request"], PRICES["lambda_gb_second"]
    # A low rate, or a month inside the first tier, pays the first tier's price
    assert rest.blended(None) == rest.blended(100e6) == rest.usd == 3.50
    assert gb.blended(1e9) == gb.usd
    # Two billion REST requests: 333 million at $3.50, 667 million at $2.80, a billion at $2.38
    assert rest.blended(2e9) == pytest.approx((333 * 3.50 + 667 * 2.80 + 1000 * 2.38) / 2000)
    # Thirty billion arm64 GB-s: 7.5 at the first price, 11.25 at 10% off, 11.25 at 20% off
    assert gb.blended(30e9) == pytest.approx(
        (7.5 * 0.0000133334 + 11.25 * 0.0000120001 + 11.25 * 0.0000106667) / 30
    )


def test_the_rate_prices_at_the_months_tiers_and_a_low_rate_at_the_first() -> None:
    q = costs.PerQuestion(api_requests=3, lambda_gb_seconds={"runner": 0.4}, sqs_requests={"inbox": 4})
    month = 1000 * SECONDS_PER_MONTH  # questions a month at 1,000 a second
    low = {line.item: line.usd for line in costs.itemised(q)}
    high = {line.item: line.usd for line in costs.itemised(q, month)}
    api, gb = "API Gateway REST requests", "Lambda GB-s (runner 0.400 per question)"
    assert low[api] == pytest.approx(10.50)
    assert high[api] == pytest.approx(3 * PRICES["apigw_rest_request"].blended(3 * month))
    assert high[api] < low[api]
    # 1.05 billion GB-s a month: still the first tier; and a flat price stays flat
    assert high[gb] == low[gb]
    assert high["SQS inbox"] == low["SQS inbox"]
    # The Step Functions design pays the same tiers for the same requests
    token = costs.TokenTask(gb_seconds=0.0, wru=0.0)
    sfn = costs.step_functions(q, 6, 1, token, inbox="inbox", monthly_questions=month)
    assert {line.item: line.usd for line in sfn}[api] == high[api]


def test_lambda_logs_are_priced_at_the_vended_logs_tiers() -> None:
    logs = PRICES["logs_ingested_gb"]
    assert logs.blended(5e3) == 0.50
    # 60,000 GB: 10,000 at $0.50, 20,000 at $0.25, 20,000 at $0.10, 10,000 at $0.05
    assert logs.blended(60e3) == pytest.approx((10 * 0.50 + 20 * 0.25 + 20 * 0.10 + 10 * 0.05) / 60)
