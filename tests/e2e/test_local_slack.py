"""Answering from Slack on the local stack: a fake Slack API on 127.0.0.1, signed interaction payloads."""

from __future__ import annotations

import json
import time
import urllib.parse
import urllib.request
import uuid
from typing import TYPE_CHECKING, Any

import pytest
from e2e_support import eventually, http, start_local
from fake_slack import FakeSlack

from agent_wait.slack import APPROVE_ACTION, REJECT_ACTION
from wait_service.channels.slack import slack_signature

if TYPE_CHECKING:
    from collections.abc import Iterator

pytestmark = pytest.mark.e2e

SIGNING_SECRET = "e2e-slack-signing-secret"
CHANNEL = "C-E2E"


@pytest.fixture(scope="module")
def fake_slack() -> Iterator[FakeSlack]:
    fake = FakeSlack()
    fake.start()
    try:
        yield fake
    finally:
        fake.stop()


def post_interaction(api: str, payload: dict[str, Any], secret: str = SIGNING_SECRET) -> int:
    """POST a signed interaction the way Slack does: form-encoded payload=<json>."""
    body = ("payload=" + urllib.parse.quote(json.dumps(payload))).encode()
    timestamp = int(time.time())
    request = urllib.request.Request(
        f"{api}/slack/interactions",
        data=body,
        method="POST",
        headers={
            "Content-Type": "application/x-www-form-urlencoded",
            "X-Slack-Request-Timestamp": str(timestamp),
            "X-Slack-Signature": slack_signature(secret, timestamp, body),
        },
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


def click(message: dict[str, Any], action_id: str, user: str, response_url: str) -> dict[str, Any]:
    [actions] = [block for block in message["blocks"] if block["type"] == "actions"]
    [button] = [element for element in actions["elements"] if element["action_id"] == action_id]
    return {
        "type": "block_actions",
        "team": {"id": "T-E2E"},
        "user": {"id": user, "team_id": "T-E2E"},
        "response_url": response_url,
        "trigger_id": "trigger-e2e",
        "actions": [{"action_id": action_id, "block_id": actions["block_id"], "value": button["value"]}],
    }


def test_a_question_posted_to_slack_is_answered_by_a_button_and_the_thread_resumes(
    fake_slack: FakeSlack,
) -> None:
    local = start_local(
        "--slack-api",
        f"{fake_slack.url}/api/",
        "--slack-signing-secret",
        SIGNING_SECRET,
        "--slack-channel",
        CHANNEL,
    )
    try:
        api = local.api
        thread_id = f"e2e-slack-{uuid.uuid4().hex[:6]}"
        status, _, _ = http(
            "POST", f"{api}/threads/{thread_id}/runs", {"input": {"customer": "c-17", "amount": 40}}
        )
        assert status == 202

        # The question reaches the fake Slack as a Block Kit message, with the fake bot token
        posted = eventually(lambda: fake_slack.recorded("/api/chat.postMessage"), what="the Slack message")
        message = posted[0]
        assert message.token == "xoxb-local-fake-token" and message.body["channel"] == CHANNEL
        question_id = message.body["metadata"]["event_payload"]["question_id"]
        assert thread_id in json.dumps(message.body["blocks"])

        # A forged click is refused before anything is answered
        first_url = f"{fake_slack.url}/response/1"
        assert (
            post_interaction(api, click(message.body, APPROVE_ACTION, "U1", first_url), secret="forged")
            == 401
        )

        # A signed Approve click answers it, the thread resumes, and the message says who approved
        assert post_interaction(api, click(message.body, APPROVE_ACTION, "U1", first_url)) == 200
        done = eventually(
            lambda: (lambda s, _, b: b if s == 200 and b["status"] in ("done", "failed") else None)(
                *http("GET", f"{api}/threads/{thread_id}")
            ),
            what="the resumed run",
        )
        assert done["status"] == "done"
        status, _, question = http("GET", f"{api}/questions/{question_id}")
        assert (question["status"], question["answered_by"]) == ("resumed", "slack:T-E2E:U1")
        [update] = fake_slack.recorded("/response/1")
        assert update.body["text"] == "Approved by <@U1>." and update.body["replace_original"] is True

        # A second click, Reject from someone else, shows why it was not recorded (409)
        second_url = f"{fake_slack.url}/response/2"
        assert post_interaction(api, click(message.body, REJECT_ACTION, "U2", second_url)) == 200
        [refused] = fake_slack.recorded("/response/2")
        assert refused.body["text"] == (
            "Not recorded: this question was already answered by <@U1>, "
            "and the first answer stands (approved)."
        )
    finally:
        assert local.stop() == 0, "\n".join(local.lines)
