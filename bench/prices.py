"""List prices and default quotas the capacity run sets its counts against (us-east-1, one place).

Prices: on-demand list prices for us-east-1 as the AWS pricing pages publish them, free tiers left
out (at a million questions a day they are a rounding error). Where a price falls with the month's
volume (API Gateway's REST requests, Lambda's GB-seconds and logs), :attr:`Price.tiers` lists its
tiers and :meth:`Price.blended` the average a month of a given volume pays: a rate sustained for a
month (:data:`SECONDS_PER_MONTH`) fills tiers a low rate never reaches. Read 2026-12-01 from the
pages named in ``source``; check them again before quoting a figure to anyone.

Quotas: the default (unraised) value of each quota as the service's quota page names it, for
us-east-1. ``adjustable`` says whether a Service Quotas request can raise it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final

PRICES_DATE: Final = "2026-12-01"
REGION: Final = "us-east-1"
# The month AWS's pricing calculator bills: 730 hours.
SECONDS_PER_MONTH: Final = 730 * 3600


@dataclass(frozen=True)
class Price:
    usd: float  # per ``per`` units: the first tier's price
    per: float
    unit: str
    source: str
    # Volume tiers, in order: (the month's cumulative quantity the tier ends at, usd per ``per``).
    # Empty: one price whatever the volume.
    tiers: tuple[tuple[float, float], ...] = ()

    def blended(self, monthly: float | None) -> float:
        """USD per ``per`` units, averaged over a month of ``monthly`` units (the tiers it fills);
        the first tier's price when ``monthly`` is ``None`` (a low rate).

        Tiers count an account's whole month in a Region (every function's GB-seconds, every API's
        requests): other use in the same account reaches the cheaper tiers sooner, so this is what
        the flow pays at most.

        Examples
        --------
        >>> rest = Price(3.5, 1e6, "request", "", tiers=((333e6, 3.5), (1e9, 2.8), (math.inf, 2.38)))
        >>> rest.blended(None), rest.blended(100e6), round(rest.blended(2e9), 4)
        (3.5, 3.5, 2.7066)
        """
        if monthly is None or monthly <= 0 or not self.tiers:
            return self.usd
        paid, start = 0.0, 0.0
        for up_to, usd in self.tiers:
            taken = min(monthly, up_to) - start
            if taken <= 0:
                break
            paid, start = paid + taken * usd, up_to
        return paid / monthly

    def cost(self, quantity: float, monthly: float | None = None) -> float:
        """USD for ``quantity`` units, at the tiers a month of ``monthly`` units fills.

        Examples
        --------
        >>> round(Price(0.20, 1e6, "request", "").cost(2e6), 2)
        0.4
        """
        return self.blended(monthly) * quantity / self.per


_LAMBDA = "https://aws.amazon.com/lambda/pricing/"
_DYNAMODB = "https://aws.amazon.com/dynamodb/pricing/on-demand/"
_SQS = "https://aws.amazon.com/sqs/pricing/"
_SNS = "https://aws.amazon.com/sns/pricing/"
_APIGW = "https://aws.amazon.com/api-gateway/pricing/"
_SCHEDULER = "https://aws.amazon.com/eventbridge/pricing/"
_LOGS = "https://aws.amazon.com/cloudwatch/pricing/"
_SFN = "https://aws.amazon.com/step-functions/pricing/"
_FIREHOSE = "https://aws.amazon.com/firehose/pricing/"

PRICES: Final[dict[str, Price]] = {
    # Arm64 (the deployment's architecture): 10% off past 7.5 billion GB-s a month, 20% past 18.75.
    "lambda_gb_second": Price(
        0.0000133334,
        1,
        "GB-second (arm64)",
        _LAMBDA,
        tiers=((7.5e9, 0.0000133334), (18.75e9, 0.0000120001), (math.inf, 0.0000106667)),
    ),
    "lambda_request": Price(0.20, 1e6, "request", _LAMBDA),
    # On-demand throughput since the 2024-11-01 price cut.
    "dynamodb_wru": Price(0.625, 1e6, "write request unit", _DYNAMODB),
    "dynamodb_rru": Price(0.125, 1e6, "read request unit", _DYNAMODB),
    # GetRecords by a Lambda trigger are free; other consumers pay per streams read request unit.
    "dynamodb_stream_read": Price(0.02, 1e5, "streams read request unit (non-Lambda consumers)", _DYNAMODB),
    # Every 64 KiB chunk of a request's payload is one request.
    "sqs_fifo_request": Price(0.50, 1e6, "FIFO request (64 KiB chunk)", _SQS),
    "sns_publish": Price(0.50, 1e6, "standard topic publish (64 KiB chunk)", _SNS),
    "apigw_rest_request": Price(
        3.50,
        1e6,
        "REST API request",
        _APIGW,
        tiers=((333e6, 3.50), (1e9, 2.80), (20e9, 2.38), (math.inf, 1.51)),
    ),
    # Scheduler bills invocations; its create and delete calls are not billed.
    "scheduler_invocation": Price(1.00, 1e6, "scheduled invocation (after 14 million free)", _SCHEDULER),
    # A Lambda function's logs are billed as vended logs since 2025-05-01: tiered by the month's GB.
    "logs_ingested_gb": Price(
        0.50,
        1,
        "GB of Lambda logs ingested (standard class)",
        _LOGS,
        tiers=((10e3, 0.50), (30e3, 0.25), (50e3, 0.10), (math.inf, 0.05)),
    ),
    # Direct PUT, first 500 TB a month; each record is billed rounded up to the next 5 KB.
    "firehose_ingested_gb": Price(
        0.029, 1, "GB ingested (Direct PUT, records rounded up to 5 KB)", _FIREHOSE
    ),
    "sfn_standard_transition": Price(0.025, 1e3, "Standard workflow state transition", _SFN),
}


@dataclass(frozen=True)
class Quota:
    value: float
    name: str
    adjustable: bool
    source: str


_DDB_Q = "https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/ServiceQuotas.html"
_SQS_Q = "https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/quotas-messages.html"
_SNS_Q = "https://docs.aws.amazon.com/general/latest/gr/sns.html"
_APIGW_Q = "https://docs.aws.amazon.com/apigateway/latest/developerguide/limits.html"
_SCHED_Q = "https://docs.aws.amazon.com/scheduler/latest/UserGuide/scheduler-quotas.html"
_LAMBDA_Q = "https://docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html"
_FIREHOSE_Q = "https://docs.aws.amazon.com/firehose/latest/dev/limits.html"

QUOTAS: Final[dict[str, Quota]] = {
    "partition_wru": Quota(1000, "DynamoDB per-partition write throughput", False, _DDB_Q),
    "partition_rru": Quota(3000, "DynamoDB per-partition read throughput", False, _DDB_Q),
    "table_wru": Quota(40000, "DynamoDB on-demand throughput per table or index, writes", True, _DDB_Q),
    "table_rru": Quota(40000, "DynamoDB on-demand throughput per table or index, reads", True, _DDB_Q),
    # Per API action (SendMessage, ReceiveMessage, DeleteMessage...), per queue.
    "sqs_fifo_tps": Quota(
        300, "SQS FIFO transactions per second per API action (no high throughput)", False, _SQS_Q
    ),
    "sqs_fifo_ht_tps": Quota(
        70000, "SQS FIFO high-throughput transactions per second per API action (us-east-1)", False, _SQS_Q
    ),
    "sns_publish_tps": Quota(
        30000, "SNS Publish per second (us-east-1), each message of a PublishBatch counted", True, _SNS_Q
    ),
    "apigw_account_rps": Quota(10000, "API Gateway throttle quota per account per Region", True, _APIGW_Q),
    "scheduler_create_tps": Quota(5000, "EventBridge Scheduler CreateSchedule request rate", True, _SCHED_Q),
    "scheduler_delete_tps": Quota(1000, "EventBridge Scheduler DeleteSchedule request rate", True, _SCHED_Q),
    "scheduler_live": Quota(
        10_000_000, "EventBridge Scheduler number of schedules per Region", True, _SCHED_Q
    ),
    "scheduler_invocations_tps": Quota(
        1000, "EventBridge Scheduler invocations throttle limit", True, _SCHED_Q
    ),
    # Direct PUT, per delivery stream, PutRecord and PutRecordBatch together; the three scale together.
    "firehose_requests": Quota(
        2000, "Firehose Direct PUT requests per second per stream (us-east-1)", True, _FIREHOSE_Q
    ),
    "firehose_records": Quota(
        500_000, "Firehose Direct PUT records per second per stream (us-east-1)", True, _FIREHOSE_Q
    ),
    "firehose_mib": Quota(5, "Firehose Direct PUT MiB per second per stream (us-east-1)", True, _FIREHOSE_Q),
    "lambda_concurrency": Quota(1000, "Lambda concurrent executions per Region (account)", True, _LAMBDA_Q),
}


# -- the Lambda duration model ------------------------------------------------------------------
#
# What Lambda bills is each invocation's duration in-region, not this machine's wall time against
# moto. The capacity run models it from what does not depend on the machine's load: the CPU the
# handler spent (measured in-process, per thread), scaled to the function's share of a vCPU, plus
# each AWS call it made, one after another, at the latency below.

_LAMBDA_MEMORY = "https://docs.aws.amazon.com/lambda/latest/dg/configuration-memory-console.html"
_DDB_LATENCY = "https://repost.aws/knowledge-center/dynamodb-high-latency"
_MESSAGING_LATENCY = "https://bitesizedserverless.com/bite/serverless-messaging-latency-compared/"
# At 1,769 MB a function has the equivalent of one vCPU; below it, CPU in proportion to memory.
LAMBDA_ONE_VCPU_MB: Final = 1769


@dataclass(frozen=True)
class Latency:
    """One AWS call's round trip from a Lambda function in the same Region, as the model takes it."""

    ms: float
    basis: str
    source: str


LATENCIES: Final[dict[str, Latency]] = {
    # "Most atomic operations, such as GetItem and PutItem, have an average latency in single-digit
    # milliseconds": the top of that range, for every single-item call and query.
    "dynamodb": Latency(
        10, "average GetItem/PutItem latency is single-digit ms: its top, 10 ms", _DDB_LATENCY
    ),
    "dynamodb.TransactWriteItems": Latency(
        20, "a transaction prepares and commits: twice a single write (assumed)", _DDB_LATENCY
    ),
    "dynamodb.TransactGetItems": Latency(20, "twice a single read (assumed)", _DDB_LATENCY),
    # Producer-to-consumer p50 measured in-region (eu-west-1, 2022): the send alone takes less.
    "sqs": Latency(
        28,
        "FIFO queue, send to receive, p50 28.1 ms in-region: an upper bound of the send",
        _MESSAGING_LATENCY,
    ),
    "sns": Latency(
        73, "standard topic, publish to delivery, p50 73 ms in-region: an upper bound", _MESSAGING_LATENCY
    ),
    # No published figure for these; taken as a slow call.
    "scheduler": Latency(50, "no published figure: assumed 50 ms", ""),
    "firehose": Latency(50, "no published figure: assumed 50 ms", ""),
}
# Any other service's call.
DEFAULT_LATENCY: Final = Latency(50, "no published figure: assumed 50 ms", "")


def latency_ms(call: str) -> float:
    """The modelled round trip of one call (``"service.Action"``): the action's figure, else the service's.

    Examples
    --------
    >>> latency_ms("dynamodb.GetItem"), latency_ms("dynamodb.TransactWriteItems")
    (10, 20)
    >>> latency_ms("sqs.SendMessage"), latency_ms("iot.Publish")
    (28, 50)
    """
    service = call.split(".", 1)[0]
    return (LATENCIES.get(call) or LATENCIES.get(service) or DEFAULT_LATENCY).ms


def cpu_scale(memory_mb: int) -> float:
    """How much longer a CPU-second of work takes at ``memory_mb`` than on one whole vCPU.

    Examples
    --------
    >>> cpu_scale(1769), cpu_scale(3008), round(cpu_scale(512), 2)
    (1.0, 1.0, 3.46)
    """
    return max(1.0, LAMBDA_ONE_VCPU_MB / memory_mb)
