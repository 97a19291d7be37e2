"""Deployed webhooks against the moto server: topic -> filtered delivery queue -> signed POSTs.

The delivery function's own handler (``functions/webhooks/handler.py``, its ``handle``) is driven
batch by batch with :func:`wait_service.runs.sqs_events.consume_batch`, the emulation of Lambda's SQS
event source mapping. A failed delivery hides its message for the backoff delay; the test records
each ``ChangeMessageVisibility`` the function makes and then makes the message visible at once
(``release_failed``), so no test waits for a real backoff.
"""

from __future__ import annotations

import itertools
import json
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from agent_wait import signing
from agent_wait.aws import SnsAnnounce
from agent_wait.testing import sample_envelope
from agent_wait_cli.local.runtime import load_handler
from wait_service.channels.webhooks import Webhook, WebhookDelivery
from wait_service.constants import WEBHOOK_MAX_ATTEMPTS, WEBHOOK_MAX_DELAY_SECONDS
from wait_service.resources import WEBHOOK_QUEUES, create_webhook_queues
from wait_service.runs.secrets import secret_getter
from wait_service.runs.sqs_events import consume_batch

if TYPE_CHECKING:
    from collections.abc import Iterator

    from wait_service.resources import LocalResources

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
SECRET = "whsec-3f9a"
# Seed 002, "Resumed": the rule the delivery queue's visibility carries out.
SEED_RETRY_RULE = (
    "If your BFA's endpoint doesn't return 2xx, Ved retries with exponential backoff "
    "(up to 5 attempts, capped at 30 minutes between tries)."
)
handle = load_handler(ROOT / "functions" / "webhooks" / "handler.py", "webhooks_handler_under_test", "handle")


class Receiver:
    """An HTTP receiver on 127.0.0.1 (free port) answering each POST with the next scripted status."""

    def __init__(self, statuses: list[int], default: int) -> None:
        self.statuses = list(statuses)
        self.default = default
        self.requests: list[dict[str, Any]] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                status = receiver.statuses.pop(0) if receiver.statuses else receiver.default
                receiver.requests.append({"path": self.path, "headers": dict(self.headers), "body": body})
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks/tickets"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)


class Deployment:
    """One webhook wired as the stack wires it, on the moto server, with its calls recorded."""

    def __init__(
        self, resources: LocalResources, aws_client: Any, receiver: Receiver, types: tuple[str, ...]
    ):
        self.sqs = aws_client("sqs")
        self.sns = aws_client("sns")
        prefix = f"w{uuid.uuid4().hex[:8]}-"
        created = create_webhook_queues(self.sqs, self.sns, resources.topic_arn, [types], prefix=prefix)
        [(self.queue_url, self.queue_arn)] = created.queues
        self.dlq_url = created.dlq_url
        secrets = aws_client("secretsmanager")
        secret_name = f"{prefix}hooks/tickets"
        secrets.create_secret(Name=secret_name, SecretString=SECRET)
        self.visibility: list[int] = []
        delivery_sqs = aws_client("sqs")
        delivery_sqs.meta.events.register(
            "before-parameter-build.sqs.ChangeMessageVisibility", self._record_visibility
        )
        self.delivery = WebhookDelivery(
            [Webhook(self.queue_url, receiver.url, secret_name, "tickets", types)],
            sqs=delivery_sqs,
            dlq_url=self.dlq_url,
            get_secret=secret_getter(client=secrets),
        )
        self.announce = SnsAnnounce(resources.topic_arn, client=self.sns)

    def _record_visibility(self, params: dict[str, Any], **_: Any) -> None:
        self.visibility.append(int(params["VisibilityTimeout"]))

    def invoke(self) -> Any:
        """One event source mapping poll; failed messages are made visible again at once."""
        return consume_batch(
            self.sqs,
            self.queue_url,
            lambda event, context: handle(event, context, self.delivery),
            None,
            queue_arn=self.queue_arn,
            release_failed=True,
        )

    def messages(self, url: str) -> list[dict[str, Any]]:
        return self.sqs.receive_message(
            QueueUrl=url, MaxNumberOfMessages=10, MessageAttributeNames=["All"], AttributeNames=["All"]
        ).get("Messages", [])


@pytest.fixture
def receiver_factory() -> Iterator[Any]:
    made: list[Receiver] = []

    def make(statuses: list[int], default: int) -> Receiver:
        made.append(Receiver(statuses, default))
        return made[-1]

    yield make
    for receiver in made:
        receiver.close()


def test_a_receiver_failing_four_times_gets_the_event_on_the_fifth_with_growing_capped_backoff(
    resources: LocalResources, aws_client: Any, receiver_factory: Any
) -> None:
    # Given a receiver that answers 503 four times, then 204
    receiver = receiver_factory([503, 503, 503, 503], 204)
    hook = Deployment(resources, aws_client, receiver, ("wait.created",))
    envelope = sample_envelope("q-hook", "t-hook")

    # When the event is published and the function is invoked until the queue is empty
    assert hook.announce.announce(envelope)
    outcomes = []
    while (batch := hook.invoke()).received:
        outcomes.append((batch.succeeded, batch.failed))
        assert len(outcomes) <= WEBHOOK_MAX_ATTEMPTS

    # Then it took five attempts, the fifth delivered and deleted
    assert len(receiver.requests) == 5 == WEBHOOK_MAX_ATTEMPTS
    assert [bool(failed) for _, failed in outcomes] == [True, True, True, True, False]
    # and the visibility set after each failure grew exponentially, capped at 30 minutes
    assert "up to 5 attempts, capped at 30 minutes between tries" in SEED_RETRY_RULE
    assert hook.visibility == [300, 600, 1200, 1800]
    assert all(b == 2 * a or b == WEBHOOK_MAX_DELAY_SECONDS for a, b in itertools.pairwise(hook.visibility))
    assert max(hook.visibility) == WEBHOOK_MAX_DELAY_SECONDS
    # and every attempt was the exact published body, signed (v0 scheme) with a key id and dedupe key
    for request in receiver.requests:
        headers = request["headers"]
        assert request["body"] == envelope.to_json().encode()
        assert headers[signing.KEY_ID_HEADER] == "tickets"
        assert headers["X-Wait-Dedupe-Key"] == "wait.created:q-hook"
        assert signing.verify(
            SECRET,
            headers[signing.TIMESTAMP_HEADER],
            headers[signing.SIGNATURE_HEADER],
            "POST",
            request["path"],
            request["body"],
        )
        assert not signing.verify(
            "another-secret",
            headers[signing.TIMESTAMP_HEADER],
            headers[signing.SIGNATURE_HEADER],
            "POST",
            request["path"],
            request["body"],
        )
    assert hook.messages(hook.queue_url) == [] and hook.messages(hook.dlq_url) == []


def test_a_receiver_that_always_fails_ends_in_the_dlq_after_five_attempts(
    resources: LocalResources, aws_client: Any, receiver_factory: Any
) -> None:
    receiver = receiver_factory([], 500)
    hook = Deployment(resources, aws_client, receiver, ("wait.created",))
    envelope = sample_envelope("q-dead", "t-dead")

    assert hook.announce.announce(envelope)
    invocations = 0
    while hook.invoke().received:
        invocations += 1
        assert invocations <= WEBHOOK_MAX_ATTEMPTS

    assert len(receiver.requests) == WEBHOOK_MAX_ATTEMPTS == WEBHOOK_QUEUES.max_receive_count
    assert hook.visibility == [300, 600, 1200, 1800]  # no backoff after the last attempt
    assert hook.messages(hook.queue_url) == []
    [dead] = hook.messages(hook.dlq_url)
    assert dead["Body"] == envelope.to_json()
    attributes = {name: value["StringValue"] for name, value in dead["MessageAttributes"].items()}
    assert attributes["type"] == "wait.created"
    assert attributes["webhook"] == receiver.url
    assert attributes["attempts"] == "5"
    assert attributes["error"] == "HTTP 500"


def test_a_permanent_refusal_goes_to_the_dlq_without_retries(
    resources: LocalResources, aws_client: Any, receiver_factory: Any
) -> None:
    # A 4xx other than 408 and 429 would be refused again: one attempt, then the DLQ.
    receiver = receiver_factory([], 401)
    hook = Deployment(resources, aws_client, receiver, ("wait.created",))
    assert hook.announce.announce(sample_envelope("q-401", "t-401"))

    batch = hook.invoke()

    assert batch.succeeded and not batch.failed
    assert len(receiver.requests) == 1 and hook.visibility == []
    [dead] = hook.messages(hook.dlq_url)
    assert dead["MessageAttributes"]["error"]["StringValue"] == "HTTP 401"


def test_an_unreachable_receiver_is_retried_like_a_5xx(
    resources: LocalResources, aws_client: Any, receiver_factory: Any
) -> None:
    receiver = receiver_factory([], 204)
    receiver.close()  # nothing listens on its port any more
    hook = Deployment(resources, aws_client, receiver, ("wait.created",))
    assert hook.announce.announce(sample_envelope("q-down", "t-down"))

    batch = hook.invoke()

    assert batch.failed and hook.visibility == [300]


def test_the_filter_policy_keeps_other_event_types_out_of_the_delivery_queue(
    resources: LocalResources, aws_client: Any, receiver_factory: Any
) -> None:
    receiver = receiver_factory([], 204)
    hook = Deployment(resources, aws_client, receiver, ("wait.escalated",))
    created = sample_envelope("q-f", "t-f")
    escalated = created.follow_up("wait.escalated", 1, route="secondary")

    assert hook.announce.announce(created) and hook.announce.announce(escalated)
    while hook.invoke().received:
        pass

    assert [json.loads(r["body"])["type"] for r in receiver.requests] == ["wait.escalated"]


def test_an_escalation_rungs_event_types_reach_the_webhooks_subscribed_to_them(
    resources: LocalResources, aws_client: Any, receiver_factory: Any
) -> None:
    # A team lead's pager subscribes to the VP rung's own type; the tickets system to every escalation
    pager, tickets = receiver_factory([], 204), receiver_factory([], 204)
    vp_hook = Deployment(resources, aws_client, pager, ("escalation.vp",))
    all_hook = Deployment(resources, aws_client, tickets, ("wait.escalated",))
    created = sample_envelope("q-r", "t-r")
    to_managers = created.follow_up("wait.escalated", 1, route="managers")
    to_vp = created.follow_up("wait.escalated", 2, route="vp", event_types=["escalation.vp"])

    assert all(vp_hook.announce.announce(e) for e in (created, to_managers, to_vp))
    for hook in (vp_hook, all_hook):
        while hook.invoke().received:
            pass

    def routes(receiver: Receiver) -> list[tuple[str, str]]:
        return [(json.loads(r["body"])["type"], json.loads(r["body"])["route"]) for r in receiver.requests]

    assert routes(pager) == [("wait.escalated", "vp")]
    assert sorted(routes(tickets)) == [("wait.escalated", "managers"), ("wait.escalated", "vp")]
    # The body is the event as published, signed as every other delivery
    assert json.loads(pager.requests[0]["body"])["event_types"] == ["escalation.vp"]
    assert pager.requests[0]["headers"]["X-Wait-Dedupe-Key"] == "wait.escalated:q-r:2"


def test_the_function_skips_a_type_its_webhook_did_not_ask_for(
    resources: LocalResources, aws_client: Any, receiver_factory: Any
) -> None:
    # A message that reached the queue some other way (a hand-made send, a wider subscription) is
    # dropped, not delivered.
    receiver = receiver_factory([], 204)
    hook = Deployment(resources, aws_client, receiver, ("wait.escalated",))
    hook.sqs.send_message(
        QueueUrl=hook.queue_url,
        MessageBody=sample_envelope("q-s", "t-s").to_json(),
        MessageAttributes={"type": {"DataType": "String", "StringValue": "wait.created"}},
    )

    batch = hook.invoke()

    assert batch.succeeded and receiver.requests == []


def test_a_missing_secret_fails_the_record_and_the_redrive_policy_catches_it(
    resources: LocalResources, aws_client: Any, receiver_factory: Any
) -> None:
    # The function itself failing (here: its secret is gone) is not a delivery failure: no backoff,
    # nothing sent; the queue hands the message back and, after maxReceiveCount, moves it to the DLQ.
    receiver = receiver_factory([], 204)
    hook = Deployment(resources, aws_client, receiver, ("wait.created",))
    [webhook] = hook.delivery.webhooks.values()
    hook.delivery.webhooks[webhook.queue_name] = Webhook(
        webhook.queue_url, webhook.url, "no-such-secret", webhook.key_id, webhook.types
    )
    assert hook.announce.announce(sample_envelope("q-nosecret", "t-nosecret"))

    failures = 0
    while (batch := hook.invoke()).received:
        assert batch.failed and not batch.succeeded
        failures += 1
        assert failures <= WEBHOOK_QUEUES.max_receive_count

    assert failures == WEBHOOK_QUEUES.max_receive_count
    assert receiver.requests == [] and hook.visibility == []
    [dead] = hook.messages(hook.dlq_url)
    assert json.loads(dead["Body"])["dedupe_key"] == "wait.created:q-nosecret"
