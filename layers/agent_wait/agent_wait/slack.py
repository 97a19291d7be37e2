"""Post questions to a Slack channel, with buttons to answer them. Stdlib only (urllib).

:class:`SlackAnnounce` posts each ``wait.created`` envelope as a Block Kit message: what the agent
wants to do (the call and its arguments, or the question), who asked (the function and thread),
when it expires, and buttons to answer it. The buttons carry the question id and the digest the
message shows, so a click answers exactly what was shown: the deployment's
``POST /slack/interactions`` sends that digest as ``If-Match`` (``wait_service.channels.slack``).

Buttons by the policy's kind:

- ``approval`` and ``edit``: *Approve*, *Reject*, and *Edit or explain…* (a modal to edit the
  arguments or the value, or to give a reason);
- a request of LangChain's ``HumanInTheLoopMiddleware`` (``agent_wait.langchain_hitl``): only the
  decisions its ``allowed_decisions`` name: *Approve* and *Reject* when allowed, and a modal
  button when it can edit the arguments, respond with a message or give a reason;
- ``decision``: one button per option (the first five), and *Answer…* (a modal listing them all);
- ``text``: *Answer…* (a modal with a text box).

An envelope of any other type (a lifecycle event such as an expiry or a reminder) is posted as a
reply in the thread of the question's message, when this announcer posted that message.

Examples
--------
>>> from agent_wait.testing import sample_envelope
>>> posted = []
>>> slack = SlackAnnounce("C123", "xoxb-token", call=lambda method, body: posted.append(body) or
...                       {"ok": True, "channel": "C123", "ts": "1.0"})
>>> slack.announce(sample_envelope())
True
>>> posted[0]["channel"], posted[0]["blocks"][-1]["type"]
('C123', 'actions')
"""

from __future__ import annotations

import json
import logging
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from agent_wait import exact_json
from agent_wait.announce.base import BaseAnnounce
from agent_wait.envelope import EVENT_TYPE, Envelope
from agent_wait.errors import SlackApiError
from agent_wait.langchain_hitl import batch_of

if TYPE_CHECKING:
    from pydantic import JsonValue

    from agent_wait.policy import Policy

__all__ = [
    "ACTIONS_BLOCK_ID",
    "APPROVE_ACTION",
    "CHOOSE_ACTION",
    "METADATA_EVENT_TYPE",
    "MODAL_ACTION",
    "MessageStore",
    "REJECT_ACTION",
    "SlackAnnounce",
    "SlackClient",
    "allowed_decisions",
    "button_value",
    "question_blocks",
]

logger = logging.getLogger("agent_wait")

DEFAULT_API_URL = "https://slack.com/api/"
ACTIONS_BLOCK_ID = "agent_wait.actions"
APPROVE_ACTION = "agent_wait.approve"
REJECT_ACTION = "agent_wait.reject"
CHOOSE_ACTION = "agent_wait.choose"
MODAL_ACTION = "agent_wait.modal"
METADATA_EVENT_TYPE = "agent_wait_question"
# Block Kit limits: a section's text is at most 3000 characters, a button's value 2000.
_SECTION_LIMIT = 2900
_OPTION_BUTTONS = 5


class MessageStore(Protocol):
    """Where each question's Slack message is: question id → ``(channel, ts)``. A dict is one."""

    def get(self, question_id: str, /) -> tuple[str, str] | None: ...

    def __setitem__(self, question_id: str, where: tuple[str, str], /) -> None: ...


Call = Callable[[str, Mapping[str, Any]], Mapping[str, Any]]
"""``call(method, body) -> Slack's JSON answer``: one Web API call (tests pass a fake)."""


class SlackClient:
    """Slack's Web API over urllib: JSON bodies, a bot token, ``"ok": false`` raised.

    Parameters
    ----------
    token:
        The bot token (``xoxb-...``), or a callable returning it (read from a secret store when
        first needed, so a cached secret can rotate).
    api_url:
        ``https://slack.com/api/`` by default; the local stack points it at a stand-in.
    timeout:
        Seconds per call.

    Examples
    --------
    >>> SlackClient("xoxb-1", api_url="http://127.0.0.1:9/api").url_for("chat.postMessage")
    'http://127.0.0.1:9/api/chat.postMessage'
    """

    def __init__(
        self, token: str | Callable[[], str], *, api_url: str = DEFAULT_API_URL, timeout: float = 10.0
    ) -> None:
        self._token = token
        self.api_url = api_url if api_url.endswith("/") else api_url + "/"
        self.timeout = timeout

    def url_for(self, method: str) -> str:
        return self.api_url + method

    def token(self) -> str:
        return self._token() if callable(self._token) else self._token

    def call(self, method: str, body: Mapping[str, Any]) -> Mapping[str, Any]:
        """Call ``method`` with ``body``; return Slack's answer or raise :class:`SlackApiError`."""
        headers = {
            "Content-Type": "application/json; charset=utf-8",
            "Authorization": f"Bearer {self.token()}",
        }
        answer = post_json(self.url_for(method), body, headers=headers, timeout=self.timeout)
        if not answer.get("ok"):
            error = str(answer.get("error") or "unknown_error")
            raise SlackApiError(f"Slack {method} failed: {error}", slack_error=error)
        return answer

    def respond(self, response_url: str, body: Mapping[str, Any]) -> None:
        """Post to an interaction's ``response_url`` (no token: the URL is the credential)."""
        post_json(response_url, body, headers={"Content-Type": "application/json"}, timeout=self.timeout)


def post_json(
    url: str, body: Mapping[str, Any], *, headers: Mapping[str, str], timeout: float
) -> Mapping[str, Any]:
    """POST ``body`` as JSON; the answer parsed as JSON (``{"ok": true}`` for a bare ``ok``)."""
    data = json.dumps(body).encode("utf-8")
    request = urllib.request.Request(url, data=data, headers=dict(headers), method="POST")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 - Slack's URL or the operator's stand-in
            raw = response.read()
    except urllib.error.HTTPError as exc:
        raise SlackApiError(
            f"Slack answered HTTP {exc.code} at {url}", slack_error=f"http_{exc.code}"
        ) from None
    except OSError as exc:
        raise SlackApiError(f"cannot reach Slack at {url}: {exc}", slack_error="unreachable") from None
    text = raw.decode("utf-8", "replace").strip()
    if text in ("", "ok"):
        return {"ok": True}
    try:
        parsed = json.loads(text)
    except ValueError:
        raise SlackApiError(
            f"Slack answered something that is not JSON at {url}", slack_error="bad_json"
        ) from None
    return parsed if isinstance(parsed, Mapping) else {"ok": False, "error": "bad_json"}


def button_value(question_id: str, digest: str, choice: str | None = None) -> str:
    """What a button carries: the question and the digest its message showed (and a choice).

    Examples
    --------
    >>> button_value("q1", "abc")
    '{"q":"q1","d":"abc"}'
    """
    value: dict[str, str] = {"q": question_id, "d": digest}
    if choice is not None:
        value["c"] = choice
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _plain(text: str, limit: int = 150) -> dict[str, Any]:
    return {"type": "plain_text", "text": text[:limit] or " ", "emoji": True}


def _mrkdwn(text: str) -> dict[str, Any]:
    if len(text) > _SECTION_LIMIT:
        text = text[: _SECTION_LIMIT - 1] + "…"
    return {"type": "mrkdwn", "text": text}


def _code(value: Any) -> str:
    text = exact_json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)
    return "```" + text.replace("```", "`\u200b``") + "```"


def _when(value: datetime | str | None) -> str:
    if value is None:
        return "never expires"
    moment = (
        value if isinstance(value, datetime) else datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    )
    iso = moment.isoformat().replace("+00:00", "Z")
    # Slack renders <!date^...> in each reader's own time zone; the fallback text is UTC.
    return f"expires <!date^{int(moment.timestamp())}^{{date_short_pretty}} at {{time}}|{iso}>"


def _button(text: str, action_id: str, value: str, style: str | None = None) -> dict[str, Any]:
    button: dict[str, Any] = {
        "type": "button",
        "text": _plain(text, 75),
        "action_id": action_id,
        "value": value,
    }
    if style is not None:
        button["style"] = style
    return button


def allowed_decisions(question: Any) -> list[str] | None:
    """The decisions a middleware request allows, in its order; ``None`` for any other question.

    Examples
    --------
    >>> allowed_decisions({"function": "f", "args": {}, "allowed_decisions": ["approve", "respond"],
    ...                    "batch": {"interrupt_id": "i", "index": 0, "size": 1}})
    ['approve', 'respond']
    >>> allowed_decisions({"function": "f", "args": {}}) is None
    True
    """
    if batch_of(question) is None:
        return None
    return [str(d) for d in question.get("allowed_decisions") or ()]


def modal_label(allowed: list[str]) -> str | None:
    """The modal button's label for a middleware request (``None``: nothing to write in a modal).

    Examples
    --------
    >>> modal_label(["approve", "edit", "reject"]), modal_label(["respond"]), modal_label(["approve"])
    ('Edit or explain…', 'Respond…', None)
    """
    parts = [word for word, decision in (("Edit", "edit"), ("respond", "respond")) if decision in allowed]
    if "reject" in allowed:
        parts.append("explain")
    if not parts:
        return None
    label = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " or " + parts[-1]
    return label[0].upper() + label[1:] + "…"


def _buttons(question_id: str, digest: str, policy: Policy, question: Any = None) -> list[dict[str, Any]]:
    value = button_value(question_id, digest)
    allowed = allowed_decisions(question)
    if allowed is not None:
        buttons = []
        if "approve" in allowed:
            buttons.append(_button("Approve", APPROVE_ACTION, value, "primary"))
        if "reject" in allowed:
            buttons.append(_button("Reject", REJECT_ACTION, value, "danger"))
        label = modal_label(allowed)
        if label is not None:
            buttons.append(_button(label, MODAL_ACTION, value))
        return buttons
    if policy.kind in ("approval", "edit"):
        return [
            _button("Approve", APPROVE_ACTION, value, "primary"),
            _button("Reject", REJECT_ACTION, value, "danger"),
            _button("Edit or explain…", MODAL_ACTION, value),
        ]
    if policy.kind == "decision":
        options = list(policy.options or [])
        # Each option gets its own action id: Slack wants them distinct within a block.
        buttons = [
            _button(option, f"{CHOOSE_ACTION}.{index}", button_value(question_id, digest, option))
            for index, option in enumerate(options[:_OPTION_BUTTONS])
        ]
        return [*buttons, _button("Answer…", MODAL_ACTION, value)]
    return [_button("Answer…", MODAL_ACTION, value)]


def question_blocks(
    *,
    question_id: str,
    thread_id: str,
    digest: str,
    question: JsonValue,
    policy: Policy,
    source: Mapping[str, Any] | None,
    expires_at: datetime | str | None,
    buttons: bool = True,
) -> list[dict[str, Any]]:
    """The Block Kit blocks of a question's message (without buttons once it is answered).

    Examples
    --------
    >>> from agent_wait import Policy
    >>> blocks = question_blocks(question_id="q1", thread_id="t1", digest="d", policy=Policy(),
    ...     question={"function": "issue_refund", "args": {"amount": 40}}, source=None, expires_at=None)
    >>> [b["type"] for b in blocks]
    ['header', 'section', 'context', 'actions']
    """
    if isinstance(question, Mapping) and "function" in question:
        title = f"{policy.kind.capitalize()} needed: {question['function']}"
        body = f"*Call* `{question['function']}`\n*Arguments*\n{_code(question.get('args', {}))}"
    else:
        title = f"{policy.kind.capitalize()} needed"
        body = question if isinstance(question, str) else _code(question)
    if policy.prompt:
        body = f"{policy.prompt}\n{body}"
    if policy.kind == "decision":
        body += "\n*Options:* " + ", ".join(f"`{option}`" for option in policy.options or [])
    allowed = allowed_decisions(question)
    if allowed is not None:
        body += "\n*Decisions allowed:* " + ", ".join(f"`{d}`" for d in allowed)
    origin = source or {}
    asker = ".".join(str(origin[k]) for k in ("module", "function") if origin.get(k)) or "an agent"
    context = f"Asked by `{asker}` on thread `{thread_id}` · {_when(expires_at)} · question `{question_id}`"
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": _plain(title)},
        {"type": "section", "text": _mrkdwn(body)},
        {"type": "context", "elements": [_mrkdwn(context)]},
    ]
    elements = _buttons(question_id, digest, policy, question) if buttons else []
    if elements:
        blocks.append({"type": "actions", "block_id": ACTIONS_BLOCK_ID, "elements": elements})
    return blocks


def _summary(envelope: Envelope) -> str:
    question = envelope.question
    if isinstance(question, Mapping) and "function" in question:
        return f"{envelope.policy.kind.capitalize()} needed: {question['function']}"
    return f"{envelope.policy.kind.capitalize()} needed: {str(question)[:200]}"


class SlackAnnounce(BaseAnnounce):
    """Post each question to a Slack channel as a message with answer buttons.

    Parameters
    ----------
    channel:
        The channel id (``C...``) the bot was invited to.
    token:
        The bot token, or a callable returning it.
    api_url:
        Slack's Web API (default) or a stand-in.
    posted:
        Question id → ``(channel, ts)`` of its message (a :class:`MessageStore`). A question
        already in it is not posted again (a redelivered run republishes the same question), and
        lifecycle envelopes reply in that message's thread. A dict in memory by default; give a
        shared store to keep it across processes (the deployment keeps it on its ledger).
    call:
        ``call(method, body)`` instead of :class:`SlackClient` (tests).

    Examples
    --------
    >>> SlackAnnounce("C123", lambda: "xoxb-from-a-secret").name
    'slack'
    """

    def __init__(
        self,
        channel: str,
        token: str | Callable[[], str],
        *,
        api_url: str = DEFAULT_API_URL,
        posted: MessageStore | None = None,
        call: Call | None = None,
        timeout: float = 10.0,
        name: str = "slack",
    ) -> None:
        self.channel = channel
        self.client = SlackClient(token, api_url=api_url, timeout=timeout)
        self._call: Call = call or self.client.call
        self.posted: MessageStore = {} if posted is None else posted
        self._lock = threading.Lock()
        self.name = name

    def message_for(self, envelope: Envelope) -> dict[str, Any]:
        """The ``chat.postMessage`` body for a question: blocks, fallback text, metadata."""
        return {
            "channel": self.channel,
            "text": _summary(envelope),
            "blocks": question_blocks(
                question_id=envelope.question_id,
                thread_id=envelope.thread_id,
                digest=envelope.digest,
                question=envelope.question,
                policy=envelope.policy,
                source=envelope.source,
                expires_at=envelope.expires_at,
            ),
            "unfurl_links": False,
            # Message metadata lets other Slack apps and workflows read which question this is.
            "metadata": {
                "event_type": METADATA_EVENT_TYPE,
                "event_payload": {
                    "question_id": envelope.question_id,
                    "thread_id": envelope.thread_id,
                    "digest": envelope.digest,
                    "dedupe_key": envelope.dedupe_key,
                    "envelope": envelope.to_json(),
                },
            },
        }

    def deliver(self, envelope: Envelope) -> None:
        if envelope.type != EVENT_TYPE:
            self.follow_up(envelope.question_id, self.follow_up_text(envelope))
            return
        with self._lock:
            if self.posted.get(envelope.question_id) is not None:
                return
        try:
            answer = self._call("chat.postMessage", self.message_for(envelope))
        except SlackApiError as exc:
            raise SlackApiError(
                exc.message,
                slack_error=exc.slack_error,
                question_id=envelope.question_id,
                thread_id=envelope.thread_id,
            ) from exc
        with self._lock:
            self.posted[envelope.question_id] = (
                str(answer.get("channel") or self.channel),
                str(answer.get("ts")),
            )

    def post_escalation(self, envelope: Envelope, channel: str) -> None:
        """Post a ``wait.escalated`` question, with its buttons, in the escalation rung's ``channel``.

        The rung's responders may not read the channel the question was first posted in: they get
        the question itself, marked as escalated to them, answerable from there. Posted once per
        rung: the message is remembered under ``<question id>#rung-<n>`` in ``posted``.

        Examples
        --------
        >>> from agent_wait.testing import sample_envelope
        >>> sent = []
        >>> def call(method, body):
        ...     sent.append(body)
        ...     return {"ok": True, "ts": "2"}
        >>> slack = SlackAnnounce("C1", "t", call=call)
        >>> up = sample_envelope().follow_up("wait.escalated", 1, route="leads")
        >>> slack.post_escalation(up, "C2"); slack.post_escalation(up, "C2")
        >>> [body["channel"] for body in sent], sent[0]["blocks"][0]["text"]["text"][:27]
        (['C2'], 'Escalated to leads (rung 1)')
        """
        key = f"{envelope.question_id}#rung-{envelope.escalation}"
        with self._lock:
            if self.posted.get(key) is not None:
                return
        message = self.message_for(envelope)
        notice = f"Escalated to {envelope.route} (rung {envelope.escalation}): nobody answered in time."
        message |= {
            "channel": channel,
            "text": f"{notice} {message['text']}",
            "blocks": [{"type": "section", "text": _mrkdwn(notice)}, *message["blocks"]],
        }
        answer = self._call("chat.postMessage", message)
        with self._lock:
            self.posted[key] = (str(answer.get("channel") or channel), str(answer.get("ts")))

    def follow_up_text(self, envelope: Envelope) -> str:
        """The thread reply for an envelope that is not a new question: its event, and when.

        Examples
        --------
        >>> from agent_wait.testing import sample_envelope
        >>> expired = sample_envelope().model_copy(update={"type": "wait.expired"})
        >>> SlackAnnounce("C1", "t").follow_up_text(expired)
        'Expired (2026-11-30T10:00:00Z).'
        """
        kind = str(envelope.type).removeprefix("wait.").replace("_", " ")
        return f"{kind.capitalize()} ({envelope.created_at.isoformat().replace('+00:00', 'Z')})."

    def follow_up(self, question_id: str, text: str) -> None:
        """Reply ``text`` in the thread of the message this announcer posted for ``question_id``.

        Raises
        ------
        SlackApiError
            When no message is known for the question, or Slack refuses the reply.
        """
        with self._lock:
            where = self.posted.get(question_id)
        if where is None:
            raise SlackApiError(
                f"no Slack message is known for question {question_id}",
                slack_error="message_not_found",
                question_id=question_id,
            )
        channel, ts = where
        self._call("chat.postMessage", {"channel": channel, "thread_ts": ts, "text": text})
