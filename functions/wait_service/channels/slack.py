"""Answering from Slack: ``POST /slack/interactions`` and the deployment's Slack announcer.

Slack posts a button click (``block_actions``) or a modal's submission (``view_submission``) to
the interactivity URL, form-encoded as ``payload=<json>`` and signed with the app's signing
secret: ``X-Slack-Signature: v0=<hex HMAC-SHA256(secret, "v0:{timestamp}:{raw body}")>`` and
``X-Slack-Request-Timestamp``, which must be within 5 minutes of the clock. A request that does
not verify gets 401 (the codes of :mod:`wait_service.channels.signing`), before its body is parsed.

A click is recorded through the same :class:`~wait_service.answers.replies.ReplyService` as
``POST /questions/{id}/reply``: the button carries the question id and the digest its message
showed, sent as ``If-Match``, so an answer is bound to what the responder saw; the principal is
``slack:<team id>:<user id>`` (usable in a policy's ``responders``). The message is then updated
through the interaction's ``response_url``: its buttons removed and who answered shown, or, when
the reply is refused, why, as a sentence (409 already answered, 410 expired or revoked, 412
changed since posted). A refusal that concerns only the clicker (403 not a responder, 422 an
answer that does not fit) is shown to them alone and leaves the buttons for others.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
import urllib.parse
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from agent_wait import Policy, exact_json, signing
from agent_wait.errors import (
    AgentWaitError,
    AnswerConflictError,
    AnswerInvalidError,
    PreconditionFailedError,
    QuestionClosedError,
    QuestionNotFoundError,
    ResponderNotAllowedError,
    SlackApiError,
)
from agent_wait.slack import (
    APPROVE_ACTION,
    CHOOSE_ACTION,
    DEFAULT_API_URL,
    MODAL_ACTION,
    REJECT_ACTION,
    SlackAnnounce,
    SlackClient,
    allowed_decisions,
    question_blocks,
)
from wait_service.answers.authority import quorum_summary
from wait_service.channels.signing import SECRET_CACHE_SECONDS, SignatureRejectedError, raw_body
from wait_service.clients import CLIENT_CONFIG
from wait_service.limits import DuplicateKeyError, loads, surrogate_problem
from wait_service.observability import logger

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from pydantic import JsonValue

    from wait_service.answers.replies import ReplyService
    from wait_service.ledger import QuestionRecord
    from wait_service.settings import Settings

SLACK_SIGNATURE_HEADER = "X-Slack-Signature"
SLACK_TIMESTAMP_HEADER = "X-Slack-Request-Timestamp"
SLACK_PRINCIPAL_PREFIX = "slack:"
MODAL_CALLBACK_ID = "agent_wait.answer"
JSON = "application/json"


# -- Slack's request signature -------------------------------------------------------------


def slack_signature(secret: str, timestamp: int | str, body: bytes) -> str:
    """Slack's ``X-Slack-Signature``: ``v0=`` + hex HMAC-SHA256 of ``v0:{timestamp}:{body}``.

    Examples
    --------
    >>> slack_signature("s", 1, b"payload=%7B%7D")[:3]
    'v0='
    """
    base = f"v0:{timestamp}:".encode() + body
    return "v0=" + hmac.new(secret.encode("utf-8"), base, hashlib.sha256).hexdigest()


def verify_slack(
    secret: str,
    timestamp: object,
    signature: object,
    body: bytes,
    *,
    now: float,
    tolerance: int = signing.TOLERANCE_SECONDS,
) -> str | None:
    """``None`` when Slack signed ``body``; otherwise the refusal's code. Never raises on input.

    Examples
    --------
    >>> sig = slack_signature("s", 100, b"x")
    >>> verify_slack("s", "100", sig, b"x", now=100), verify_slack("s", "100", sig, b"y", now=100)
    (None, 'signature_invalid')
    """
    if not timestamp or not signature:
        return "signature_missing"
    sent_at = signing.parse_timestamp(timestamp)
    if sent_at is None or not isinstance(signature, str) or not secret:
        return "signature_invalid"
    if abs(now - sent_at) > tolerance:
        return "timestamp_out_of_window"
    expected = slack_signature(secret, sent_at, body).encode("ascii")
    try:
        given = signature.encode("ascii")
    except UnicodeEncodeError:
        return "signature_invalid"
    return None if hmac.compare_digest(expected, given) else "signature_invalid"


# -- sentences -----------------------------------------------------------------------------


def who(principal: str | None) -> str:
    """A principal as Slack shows it: a mention for ``slack:<team>:<user>``, else the principal.

    Examples
    --------
    >>> who("slack:T1:U2"), who("hmac:ops"), who(None)
    ('<@U2>', '`hmac:ops`', 'someone')
    """
    if not principal:
        return "someone"
    if principal.startswith(SLACK_PRINCIPAL_PREFIX) and principal.count(":") == 2:
        return f"<@{principal.rsplit(':', 1)[1]}>"
    return f"`{principal}`"


def describe(answer: JsonValue) -> str:
    """An answer in a few words.

    Examples
    --------
    >>> describe({"action": "approve"}), describe({"action": "reject"}), describe({"choice": "credit"})
    ('approved', 'rejected', 'chose `credit`')
    """
    if isinstance(answer, Mapping):
        action = answer.get("action")
        if action == "approve":
            return "approved with edited arguments" if answer.get("args") else "approved"
        if action == "reject":
            return "rejected"
        if action == "respond":
            return "responded"
        if action == "edit":
            return "approved an edited value"
        if "choice" in answer:
            return f"chose `{answer['choice']}`"
        if "text" in answer:
            return "answered"
    return "answered"


def refusal_sentence(error: AgentWaitError, record: QuestionRecord | None) -> str:
    """Why a reply from Slack was not recorded, for people (409, 410, 412, 403, 422, 404).

    Examples
    --------
    >>> refusal_sentence(QuestionClosedError("x", status="expired"), None)
    'Not recorded: this question has expired and takes no more answers.'
    """
    if isinstance(error, AnswerConflictError):
        by = f" by {who(record.answered_by)}" if record is not None and record.answered_by else ""
        return (
            f"Not recorded: this question was already answered{by}, and the first answer stands "
            f"({describe(error.standing_answer)})."
        )
    if isinstance(error, QuestionClosedError):
        state = {"expired": "has expired", "revoked": "was revoked"}.get(error.status, f"is {error.status}")
        return f"Not recorded: this question {state} and takes no more answers."
    if isinstance(error, PreconditionFailedError):
        return (
            "Not recorded: the question changed after this message was posted, so this answer "
            "would not be bound to what the agent now asks."
        )
    if isinstance(error, ResponderNotAllowedError):
        if error.rung:
            return (
                "Not recorded: you are not one of the people who may answer this question on its "
                f"escalation rung {error.rung} ({error.route})."
            )
        return "Not recorded: you are not one of the people who may answer this question."
    if isinstance(error, QuestionNotFoundError):
        return "Not recorded: this question no longer exists."
    if isinstance(error, AnswerInvalidError):
        return f"Not recorded: {error.message}."
    return f"Not recorded: {error.message}."


# Refusals about the clicker only: shown to them, the buttons stay for the others.
_PERSONAL = (ResponderNotAllowedError, AnswerInvalidError)


# -- interactions --------------------------------------------------------------------------


def _response(status: int, body: Any = None) -> dict[str, Any]:
    return {
        "statusCode": status,
        "headers": {"Content-Type": JSON},
        "multiValueHeaders": {},
        "body": "" if body is None else json.dumps(body),
        "isBase64Encoded": False,
    }


def _header(event: Mapping[str, Any], name: str) -> str | None:
    wanted = name.lower()
    for key, value in (event.get("headers") or {}).items():
        if str(key).lower() == wanted:
            return None if value is None else str(value)
    return None


def _input(values: Mapping[str, Any], block: str) -> Any:
    element = (values.get(block) or {}).get("value") or {}
    if "selected_option" in element:
        return (element.get("selected_option") or {}).get("value")
    return element.get("value")


class SlackInteractions:
    """Handles ``POST /slack/interactions``: verify, record through the reply service, update the message.

    Parameters
    ----------
    replies:
        The reply service (the same one ``POST /questions/{id}/reply`` uses).
    signing_secret:
        Returns the app's signing secret (cached by the caller).
    client:
        Slack's Web API (``views.open``) and ``response_url`` posts.
    clock:
        Unix seconds; injected by tests.
    """

    def __init__(
        self,
        replies: ReplyService,
        signing_secret: Callable[[], str],
        client: SlackClient,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.replies = replies
        self._signing_secret = signing_secret
        self.client = client
        self._clock = clock

    def handle(self, event: Mapping[str, Any]) -> dict[str, Any]:
        """One interaction event in, an API Gateway proxy response out (never a 5xx)."""
        body = raw_body(event)
        try:
            secret = self._signing_secret()
        except Exception:
            logger.exception("cannot read the Slack signing secret")
            return _response(
                401, SignatureRejectedError("unknown_key", "the signing secret cannot be read").to_dict()
            )
        refused = verify_slack(
            secret,
            _header(event, SLACK_TIMESTAMP_HEADER),
            _header(event, SLACK_SIGNATURE_HEADER),
            body,
            now=self._clock(),
        )
        if refused is not None:
            logger.info("Slack interaction refused", extra={"error": refused})
            return _response(
                401, SignatureRejectedError(refused, "Slack's signature does not verify").to_dict()
            )
        try:
            form = urllib.parse.parse_qs(body.decode("utf-8"), strict_parsing=False)
            payload = json.loads(form["payload"][0])
            if not isinstance(payload, dict):
                raise ValueError("payload is not an object")
        except (KeyError, ValueError, UnicodeDecodeError):
            return _response(
                400, {"error": "invalid_request", "message": "expected a form field payload=<json>"}
            )
        try:
            kind = payload.get("type")
            if kind == "block_actions":
                self._on_action(payload)
            elif kind == "view_submission":
                return self._on_submission(payload)
        except Exception:
            # Slack shows its own error on a non-2xx; the message keeps its buttons to try again.
            logger.exception("Slack interaction failed")
            return _response(200, None)
        return _response(200, None)

    # -- clicks ----------------------------------------------------------------------------

    @staticmethod
    def principal(payload: Mapping[str, Any]) -> str:
        user = payload.get("user") or {}
        team = (payload.get("team") or {}).get("id") or user.get("team_id") or "-"
        return f"{SLACK_PRINCIPAL_PREFIX}{team}:{user.get('id') or '-'}"

    def _on_action(self, payload: Mapping[str, Any]) -> None:
        actions = payload.get("actions") or []
        if not actions:
            return
        action = actions[0]
        action_id = str(action.get("action_id") or "")
        try:
            value = json.loads(action.get("value") or "{}")
            question_id, digest = str(value["q"]), str(value["d"])
        except (ValueError, KeyError, TypeError):
            logger.info("Slack action without a question", extra={"action_id": action_id})
            return
        response_url = payload.get("response_url")
        if action_id == MODAL_ACTION:
            self._open_modal(payload, question_id, digest, response_url)
            return
        answer: JsonValue
        if action_id == APPROVE_ACTION:
            answer = {"action": "approve"}
        elif action_id == REJECT_ACTION:
            answer = {"action": "reject"}
        elif action_id.startswith(CHOOSE_ACTION) and "c" in value:
            answer = {"choice": value["c"]}
        else:
            return
        self.answer(question_id, digest, answer, self.principal(payload), response_url=response_url)

    def answer(
        self,
        question_id: str,
        digest: str,
        answer: JsonValue,
        principal: str,
        *,
        reason: str | None = None,
        response_url: str | None = None,
    ) -> AgentWaitError | None:
        """Record ``answer`` and show the outcome on the message; returns the refusal, if any."""
        error: AgentWaitError | None = None
        created = voted = False
        try:
            outcome = self.replies.reply(
                question_id, answer, principal=principal, if_match=f'"{digest}"', reason=reason
            )
            created = outcome.created
            voted = outcome.status == "voted"
        except AgentWaitError as exc:
            error = exc
        logger.info(
            "Slack answer",
            extra={
                "question_id": question_id,
                "principal": principal,
                "refused": error.code if error else None,
            },
        )
        if response_url:
            self._show(question_id, answer, principal, created, error, response_url, voted=voted)
        return error

    def _show(
        self,
        question_id: str,
        answer: JsonValue,
        principal: str,
        created: bool,
        error: AgentWaitError | None,
        response_url: str,
        *,
        voted: bool = False,
    ) -> None:
        """Update the question's message with what the click did.

        A quorum vote that did not decide keeps the buttons, for the others who still vote, and
        says where the count stands ("1 of 2 approvals").
        """
        record = None
        if not isinstance(error, QuestionNotFoundError):
            try:
                record = self.replies.ledger.get_question(question_id)
            except AgentWaitError:
                record = None
        if error is not None and isinstance(error, _PERSONAL):
            message: dict[str, Any] = {
                "response_type": "ephemeral",
                "replace_original": False,
                "text": refusal_sentence(error, record),
            }
        else:
            summary = quorum_summary(record) if record is not None else None
            if error is not None:
                sentence = refusal_sentence(error, record)
            elif voted:
                sentence = f"{describe(answer).capitalize()} by {who(principal)}"
                sentence += f": {summary}." if summary else "."
            elif created:
                sentence = f"{describe(answer).capitalize()} by {who(principal)}."
            else:
                by = who(record.answered_by) if record is not None else who(principal)
                sentence = f"Already {describe(answer)} by {by}."
            still_open = record is not None and record.is_open and summary is not None
            blocks = self._blocks(record, buttons=still_open) + [
                {"type": "section", "text": {"type": "mrkdwn", "text": sentence}}
            ]
            message = {"replace_original": True, "text": sentence, "blocks": blocks}
        try:
            self.client.respond(response_url, message)
        except SlackApiError:
            # The answer stands whether or not the message could be updated.
            logger.exception("cannot update the Slack message", extra={"question_id": question_id})

    @staticmethod
    def _blocks(record: QuestionRecord | None, *, buttons: bool = False) -> list[dict[str, Any]]:
        if record is None:
            return []
        return question_blocks(
            question_id=record.question_id,
            thread_id=record.thread_id,
            digest=record.digest,
            question=record.question,
            policy=Policy.model_validate(record.policy),
            source=record.source,
            expires_at=record.expires_at,
            buttons=buttons,
        )

    # -- the modal -------------------------------------------------------------------------

    def _open_modal(
        self, payload: Mapping[str, Any], question_id: str, digest: str, response_url: str | None
    ) -> None:
        trigger_id = payload.get("trigger_id")
        if not trigger_id:
            return
        try:
            record = self.replies.ledger.get_question(question_id)
        except QuestionNotFoundError as exc:
            if response_url:
                self._show(question_id, None, self.principal(payload), False, exc, response_url)
            return
        view = answer_modal(record, digest, response_url)
        self.client.call("views.open", {"trigger_id": trigger_id, "view": view})

    def _on_submission(self, payload: Mapping[str, Any]) -> dict[str, Any]:
        view = payload.get("view") or {}
        if view.get("callback_id") != MODAL_CALLBACK_ID:
            return _response(200, None)
        meta = json.loads(view.get("private_metadata") or "{}")
        question_id, digest = str(meta["q"]), str(meta["d"])
        values = (view.get("state") or {}).get("values") or {}
        record = self.replies.ledger.get_question(question_id)
        answer, reason, field_errors = answer_from_modal(record, values)
        if field_errors:
            return _response(200, {"response_action": "errors", "errors": field_errors})
        error = self.answer(
            question_id, digest, answer, self.principal(payload), reason=reason, response_url=meta.get("r")
        )
        if isinstance(error, AnswerInvalidError):
            return _response(
                200, {"response_action": "errors", "errors": {_error_block(error, values): error.message}}
            )
        return _response(200, None)


def _error_block(error: AnswerInvalidError, values: Mapping[str, Any]) -> str:
    """The modal block a refused answer's field points at (one the modal has)."""
    field = error.field or ""
    if field.startswith("answer.args") and "args" in values:
        return "args"
    if field == "answer.message" and "message" in values:
        return "message"
    if field == "answer.action" and "decision" in values:
        return "decision"
    return "reason"


def _text_input(
    block_id: str, label: str, *, initial: str | None, optional: bool, multiline: bool
) -> dict[str, Any]:
    element: dict[str, Any] = {"type": "plain_text_input", "action_id": "value", "multiline": multiline}
    if initial:
        element["initial_value"] = initial[:3000]
    return {
        "type": "input",
        "block_id": block_id,
        "optional": optional,
        "label": {"type": "plain_text", "text": label},
        "element": element,
    }


def _option(value: str, text: str) -> dict[str, Any]:
    return {"text": {"type": "plain_text", "text": text[:75]}, "value": value}


# A middleware request's decisions, as the modal offers them (only those it allows).
_REVIEW_CHOICES = {
    "approve": "Approve",
    "edit": "Approve with the arguments below",
    "reject": "Reject",
    "respond": "Respond with the message below (the tool does not run)",
}


def _decision_input(choices: list[dict[str, Any]]) -> dict[str, Any]:
    """The modal's decision: radio buttons over ``choices``, the first one picked."""
    return {
        "type": "input",
        "block_id": "decision",
        "label": {"type": "plain_text", "text": "Decision"},
        "element": {
            "type": "radio_buttons",
            "action_id": "value",
            "options": choices,
            "initial_option": choices[0],
        },
    }


def _review_blocks(question: Any, allowed: list[str]) -> list[dict[str, Any]]:
    """The decision, arguments and message inputs of a middleware request's modal."""
    choices = [_option(d, _REVIEW_CHOICES[d]) for d in allowed if d in _REVIEW_CHOICES]
    blocks: list[dict[str, Any]] = [_decision_input(choices)]
    if "edit" in allowed:
        initial = exact_json.dumps(question.get("args"), indent=2, ensure_ascii=False)
        blocks.append(
            _text_input(
                "args",
                "Arguments (JSON): edit to change them",
                initial=initial,
                optional=True,
                multiline=True,
            )
        )
    if "respond" in allowed:
        blocks.append(
            _text_input(
                "message", "Message to the agent (respond)", initial=None, optional=True, multiline=True
            )
        )
    return blocks


def answer_modal(record: QuestionRecord, digest: str, response_url: str | None) -> dict[str, Any]:
    """The modal that edits arguments or a value, picks an option, writes text, or gives a reason."""
    policy = Policy.model_validate(record.policy)
    question = record.question
    blocks: list[dict[str, Any]] = []
    allowed = allowed_decisions(question)
    if allowed is not None:
        blocks += _review_blocks(question, allowed)
    elif policy.kind in ("approval", "edit"):
        choices = [_option("approve", "Approve"), _option("reject", "Reject")]
        if policy.kind == "edit":
            choices.insert(1, _option("edit", "Approve with the value below"))
        blocks.append(_decision_input(choices))
        if policy.kind == "approval" and isinstance(question, Mapping) and "args" in question:
            initial = exact_json.dumps(question.get("args"), indent=2, ensure_ascii=False)
            blocks.append(
                _text_input(
                    "args",
                    "Arguments (JSON): edit to change them",
                    initial=initial,
                    optional=True,
                    multiline=True,
                )
            )
        if policy.kind == "edit":
            initial = exact_json.dumps(question, indent=2, ensure_ascii=False)
            blocks.append(
                _text_input("value", "Value (JSON)", initial=initial, optional=True, multiline=True)
            )
    elif policy.kind == "decision":
        options = [_option(option, option) for option in policy.options or []][:100]
        blocks.append(
            {
                "type": "input",
                "block_id": "decision",
                "label": {"type": "plain_text", "text": "Choice"},
                "element": {"type": "static_select", "action_id": "value", "options": options},
            }
        )
    else:
        blocks.append(_text_input("text", "Answer", initial=None, optional=False, multiline=True))
    blocks.append(
        _text_input(
            "reason", "Reason (recorded with the answer)", initial=None, optional=True, multiline=True
        )
    )
    return {
        "type": "modal",
        "callback_id": MODAL_CALLBACK_ID,
        "private_metadata": json.dumps({"q": record.question_id, "d": digest, "r": response_url}),
        "title": {"type": "plain_text", "text": "Answer the agent"},
        "submit": {"type": "plain_text", "text": "Send"},
        "close": {"type": "plain_text", "text": "Cancel"},
        "blocks": blocks,
    }


def answer_from_modal(
    record: QuestionRecord, values: Mapping[str, Any]
) -> tuple[JsonValue, str | None, dict[str, str]]:
    """The answer a submitted modal gives, its reason, and errors by block (JSON that does not parse).

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> record = SimpleNamespace(policy={"kind": "approval"}, question={"function": "f", "args": {"a": 1}})
    >>> answer_from_modal(record, {"decision": {"value": {"selected_option": {"value": "approve"}}},
    ...                            "args": {"value": {"value": '{"a": 2}'}}})
    ({'action': 'approve', 'args': {'a': 2}}, None, {})
    """
    policy = Policy.model_validate(record.policy)
    reason = (_input(values, "reason") or "").strip() or None
    decision = _input(values, "decision")
    # A middleware request's edit always carries its arguments: approve may not be allowed.
    review_edit = allowed_decisions(record.question) is not None and decision == "edit"
    if allowed_decisions(record.question) is not None and decision == "respond":
        message = (_input(values, "message") or "").strip()
        if not message:
            return None, reason, {"message": "Write the message the agent gets instead of the tool's result."}
        return {"action": "respond", "message": message}, reason, {}
    if policy.kind == "decision":
        return {"choice": decision}, reason, {}
    if policy.kind == "text":
        return {"text": _input(values, "text") or ""}, reason, {}
    if decision == "reject":
        answer: dict[str, Any] = {"action": "reject"}
        if reason:
            answer["reason"] = reason
        return answer, reason, {}
    block = "args" if policy.kind == "approval" else "value"
    text = _input(values, block)
    if decision == "approve" and policy.kind == "edit":
        return {"action": "approve"}, reason, {}
    if (not text or not text.strip()) and review_edit:
        return None, reason, {block: "Write the arguments the tool runs with (JSON)."}
    if not text or not text.strip():
        return (
            ({"action": "approve"} if policy.kind == "approval" else {"action": "edit", "value": None}),
            reason,
            {},
        )
    try:
        # Read as the api reads a body: exact numbers, each key once, no lone surrogates.
        edited = loads(text)
    except DuplicateKeyError as exc:
        return None, reason, {block: f"The key {exc.key!r} appears twice: keep one."}
    except json.JSONDecodeError as exc:
        return None, reason, {block: f"This is not JSON: {exc.msg} (line {exc.lineno})."}
    except (ValueError, RecursionError):
        return None, reason, {block: "This is not JSON this form can take."}
    if surrogate_problem(edited, "") is not None:
        return (
            None,
            reason,
            {block: "This holds a lone surrogate escape (\\ud800-\\udfff), which is not text."},
        )
    if policy.kind == "edit":
        return {"action": "edit", "value": edited}, reason, {}
    question = record.question
    published = question.get("args") if isinstance(question, Mapping) else None
    if edited == published and not review_edit:
        return {"action": "approve"}, reason, {}
    return {"action": "approve", "args": edited}, reason, {}


# -- where each question's message is ------------------------------------------------------


class LedgerSlackMessages:
    """Each question's Slack message, on the ledger: item ``slack-message:<question id>``.

    Holds ``channel`` and ``ts`` (``kind = slack_message``, ``expires_ttl`` like a finished
    question's), so that any runner instance skips a question already posted and any function can
    reply in the message's thread (expiry, escalation, reminders). A separate item, not an
    attribute of the question: the ledger announcer writes the question with a conditional put at
    the same moment. No ``status`` or ``created_at``: never in the question indexes.
    """

    def __init__(
        self,
        table: str,
        client: DynamoDBClient | None = None,
        *,
        ttl_days: int = 90,
        clock: Callable[[], float] = time.time,
    ) -> None:
        import boto3

        self.table = table
        self._client = client or boto3.client("dynamodb", config=CLIENT_CONFIG)
        self.ttl_days = ttl_days
        self._clock = clock

    @staticmethod
    def key(question_id: str) -> dict[str, Any]:
        return {"dedupe_key": {"S": f"slack-message:{question_id}"}}

    def get(self, question_id: str, /) -> tuple[str, str] | None:
        item = self._client.get_item(
            TableName=self.table, Key=self.key(question_id), ConsistentRead=True
        ).get("Item")
        if not item:
            return None
        return item["channel"]["S"], item["ts"]["S"]

    def __setitem__(self, question_id: str, where: tuple[str, str], /) -> None:
        channel, ts = where
        expires = int(self._clock()) + self.ttl_days * 86400
        self._client.put_item(
            TableName=self.table,
            Item={
                **self.key(question_id),
                "kind": {"S": "slack_message"},
                "question_id": {"S": question_id},
                "channel": {"S": channel},
                "ts": {"S": ts},
                "expires_ttl": {"N": str(expires)},
            },
        )


# -- wiring --------------------------------------------------------------------------------


def secret_reader(arn: str, *, client: Any = None, max_age: int = SECRET_CACHE_SECONDS) -> Callable[[], str]:
    """A function returning the secret string of ``arn``, cached with Powertools Parameters."""
    provider: Any = None

    def read() -> str:
        nonlocal provider
        if provider is None:
            from aws_lambda_powertools.utilities.parameters import SecretsProvider

            provider = SecretsProvider(boto3_client=client)
        value = provider.get(arn, max_age=max_age)
        return value.decode("utf-8") if isinstance(value, bytes) else str(value)

    return read


def build_slack_interactions(
    settings: Settings, replies: ReplyService, *, secretsmanager: Any = None
) -> SlackInteractions | None:
    """``POST /slack/interactions`` when the settings name a signing secret; ``None`` otherwise."""
    if not settings.slack_signing_secret:
        return None
    token = (
        secret_reader(settings.slack_bot_token_secret, client=secretsmanager)
        if settings.slack_bot_token_secret
        else ""
    )
    client = SlackClient(token, api_url=settings.slack_api_url or DEFAULT_API_URL)
    return SlackInteractions(
        replies, secret_reader(settings.slack_signing_secret, client=secretsmanager), client
    )


def build_slack_announce(
    settings: Settings, *, secretsmanager: Any = None, dynamodb: DynamoDBClient | None = None
) -> SlackAnnounce | None:
    """The Slack announcer when the settings name a channel and a bot token secret; ``None`` otherwise.

    Its messages are remembered on the ledger (:class:`LedgerSlackMessages`).
    """
    if not settings.slack_channel or not settings.slack_bot_token_secret:
        return None
    return SlackAnnounce(
        settings.slack_channel,
        secret_reader(settings.slack_bot_token_secret, client=secretsmanager),
        api_url=settings.slack_api_url or DEFAULT_API_URL,
        posted=LedgerSlackMessages(
            settings.require("ledger_table"), dynamodb, ttl_days=settings.ledger_ttl_days
        ),
    )
