"""The api's request and response models, its path parameters, who the caller is, and what routes read."""

from __future__ import annotations

import ipaddress
from typing import TYPE_CHECKING, Annotated, Any, Literal, Protocol

from aws_lambda_powertools.event_handler.openapi.params import Path
from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, JsonValue, model_validator

from agent_wait import Policy
from wait_service.answer_limits import DYNAMODB_ITEM_BYTES
from wait_service.answers.audit import audit_of
from wait_service.answers.authority import AuthorityService, current_authority, delegates_of, quorum_summary

# Pydantic reads the field annotations when the models are built: this name exists at run time.
from wait_service.ledger import RunStatus  # noqa: TC001
from wait_service.limits import THREAD_ID_MAX, THREAD_ID_PATTERN, ExactJson

if TYPE_CHECKING:
    from collections.abc import Mapping

    from wait_service.answers.replies import ReplyService
    from wait_service.http.inbox_page import InboxSignIn
    from wait_service.ledger import Ledger, QuestionRecord, ThreadRecord
    from wait_service.runs.idempotent_starts import IdempotentStarts
    from wait_service.runs.starts import RunService
    from wait_service.stream.analytics import StatsService


JSON = "application/json"
# `pending` lists every question still waiting for an answer (raised, delivered or escalated);
# the others are the statuses of `wait_service.ledger.statuses` (a test holds the two together).
# An answer this large or less fits beside any question item the runner can write (the item's other
# attributes stay far below the rest of DynamoDB's 400 KB), so only a larger one costs a read of
# its question before the reply service runs.
ANSWER_FITS_ANY_QUESTION_BYTES = DYNAMODB_ITEM_BYTES // 4
QuestionStatus = Literal[
    "pending",
    "raised",
    "delivered",
    "answered",
    "resumed",
    "expired",
    "escalated",
    "revoked",
    "resume_failed",
]


ThreadIdPath = Annotated[
    str,
    Path(
        pattern=THREAD_ID_PATTERN,
        min_length=1,
        max_length=THREAD_ID_MAX,
        description="letters, digits and . _ : - (1 to 80), after percent-decoding",
    ),
]

# -- request and response models -----------------------------------------------------------


class RunRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    input: ExactJson = Field(default_factory=dict, description="the graph's input")


class RunAccepted(BaseModel):
    thread_id: str
    status: Literal["queued"] = "queued"


class ThreadView(BaseModel):
    thread_id: str
    status: RunStatus
    pending: list[str] = Field(default_factory=list, description="question ids the thread waits on")
    output: JsonValue = Field(default=None, description="final output values of a done run")
    error: str | None = None
    updated_at: str | None = None
    deferred_runs: int = Field(
        default=0, description="runs waiting for the thread's questions to be answered"
    )
    attempt: int | None = Field(
        default=None, description="while retrying: the attempt that failed (the inbox allows 5)"
    )
    output_omitted: int | None = Field(
        default=None,
        description="the size in bytes of an output too large for the ledger (`output` is null): "
        "the whole output is in the thread's checkpoint",
    )

    @classmethod
    def of(cls, record: ThreadRecord) -> ThreadView:
        return cls(
            thread_id=record.thread_id,
            status=record.run_status,
            pending=record.pending,
            output=record.output,
            error=record.error,
            updated_at=record.updated_at,
            deferred_runs=len(record.deferred),
            attempt=record.attempt if record.run_status == "retrying" else None,
            output_omitted=record.output_omitted,
        )


class LifecycleStage(BaseModel):
    stage: str
    at: str
    actor: str | None = None
    detail: JsonValue = Field(
        default=None, description="the sink (delivered), route (escalated), number (reminded) or reason"
    )


class CallView(BaseModel):
    function: str
    args: dict[str, ExactJson] = Field(default_factory=dict)


class ReceiptView(BaseModel):
    ran: bool = Field(description="whether the function's body ran")
    args: dict[str, ExactJson] | None = Field(default=None, description="the arguments it ran with")
    outcome: Literal["returned", "raised"] | None = None
    error: str | None = None
    at: str


class AuditView(BaseModel):
    """What was proposed, what was authorized (and the JSON Patch between them), by whom, and what ran."""

    proposed: CallView | None = None
    authorized: CallView | None = None
    diff: list[dict[str, ExactJson]] = Field(
        default_factory=list, description="RFC 6902 JSON Patch from proposed to authorized args"
    )
    answered_by: str | None = None
    if_match: str | None = Field(default=None, description="the tag the responder sent")
    answered_at: str | None = None
    receipt: ReceiptView | None = None
    requested_by: str | None = Field(default=None, description="who started the run that raised it")
    delegations: list[dict[str, ExactJson]] = Field(
        default_factory=list, description="each hand-over: {to, by, reason, at}"
    )
    extensions: list[dict[str, ExactJson]] = Field(
        default_factory=list, description="each move of the expiry: {from, to, seconds, by, reason, at}"
    )


class QuorumView(BaseModel):
    """Where a quorum stands: ``summary`` reads "2 of 3 approvals"; ``votes`` says who voted how."""

    summary: str
    approvals: int
    approvals_required: int
    rejections: int
    rejections_required: int
    votes: list[dict[str, ExactJson]] = Field(default_factory=list)

    @classmethod
    def of(cls, record: QuestionRecord) -> QuorumView | None:
        required = record.policy.get("approvals_required")
        if required is None:
            return None
        rejections_required = int(record.policy.get("rejections_required") or 1)
        return cls(
            summary=quorum_summary(record) or "",
            approvals=len(record.approvers),
            approvals_required=int(required),
            rejections=len(record.rejecters),
            rejections_required=rejections_required,
            votes=[dict(v) for v in record.votes],
        )


class QuestionView(BaseModel):
    question_id: str
    thread_id: str
    status: str
    digest: str
    question: ExactJson = None
    policy: dict[str, JsonValue] = Field(default_factory=dict)
    policy_version: int | None = Field(
        default=None,
        description="the version of the policy store's override the question was raised under "
        "(null: the policy in the agent's code)",
    )
    source: dict[str, JsonValue] | None = None
    created_at: str | None = None
    expires_at: str | None = None
    updated_at: str | None = None
    lifecycle: list[LifecycleStage] = Field(default_factory=list)
    answer: ExactJson = None
    answered_by: str | None = None
    answered_at: str | None = None
    reason: str | None = None
    escalation: int = Field(default=0, description="the escalation rung the question is on (0: none)")
    route: str | None = Field(default=None, description="the route of that rung (null: not escalated)")
    responders: list[str] = Field(
        default_factory=list,
        description="who may answer on that rung: the policy's responders, joined or replaced by the "
        "rungs' own (empty: any authenticated caller); delegates are listed apart",
    )
    resumed_at: str | None = None
    error: str | None = Field(default=None, description="why the resume failed (resume_failed)")
    requested_by: str | None = Field(default=None, description="who started the run that raised it")
    delegates: list[str] = Field(
        default_factory=list, description="principals a responder delegated this question to"
    )
    quorum: QuorumView | None = Field(default=None, description="a quorum question's count and votes")
    audit: AuditView | None = None

    @classmethod
    def of(cls, record: QuestionRecord) -> QuestionView:
        # The view's fields are the record's public ones, by name; the audit is assembled.
        view = cls.model_validate(record, from_attributes=True)
        view.audit = AuditView.model_validate(audit_of(record))
        view.quorum = QuorumView.of(record)
        authority = current_authority(record, Policy.model_validate(record.policy))
        view.route, view.responders = authority.route, list(authority.responders)
        view.delegates = list(delegates_of(record, authority))
        return view


class QuestionPage(BaseModel):
    items: list[QuestionView]
    next: str | None = Field(default=None, description="pass as ?next= for the following page")


class ReplyRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    answer: ExactJson = Field(description="the answer; its shape depends on the policy's kind")
    reason: str | None = Field(default=None, max_length=4096)


class RevokeRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    reason: str = Field(min_length=1, max_length=4096, description="why the question is withdrawn")


class DelegateRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    to: str = Field(
        min_length=1,
        max_length=1024,
        # Explicit ranges: Python's and JSON Schema's (ECMA) `\s` disagree on some characters.
        pattern=r"^[^\x00-\x20\x7f-\xa0]+$",
        description="the principal who may answer this question too (no spaces or control characters)",
    )
    reason: str = Field(min_length=1, max_length=4096, description="why it is handed over")


def _one_of_by_seconds_or_until(schema: dict[str, Any]) -> None:
    """The document says what the model checks: exactly one of the two, and neither is null."""
    for name in ("by_seconds", "until"):
        field = schema["properties"][name]
        [value] = [option for option in field.pop("anyOf") if option.get("type") != "null"]
        field.update(value)
        field.pop("default", None)
    schema["oneOf"] = [{"required": ["by_seconds"]}, {"required": ["until"]}]


class ExtendRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra=_one_of_by_seconds_or_until)

    by_seconds: int | None = Field(
        default=None,
        gt=0,
        le=366 * 86400,
        description="move the expiry this many seconds later (at most a year)",
    )
    until: AwareDatetime | None = Field(
        default=None, description="or move it to this moment (with a timezone)"
    )
    reason: str = Field(min_length=1, max_length=4096, description="why more time is needed")

    @model_validator(mode="after")
    def _one_of(self) -> ExtendRequest:
        if (self.by_seconds is None) == (self.until is None):
            raise ValueError("give exactly one of by_seconds and until")
        return self


class ReplyAccepted(BaseModel):
    question_id: str
    status: Literal["answered", "voted"] = Field(
        default="answered", description="voted: a quorum vote was counted; the question waits for more"
    )


# -- principal -----------------------------------------------------------------------------


def principal_of(event: Mapping[str, Any]) -> str | None:
    """The caller's principal from an API Gateway proxy event's request context.

    IAM (SigV4) caller ARN first, then a JWT subject (REST Cognito ``claims`` or HTTP API
    ``jwt.claims``), then a Lambda authorizer's ``principalId`` (e.g. a signing key id).

    Examples
    --------
    >>> principal_of({"requestContext": {"identity": {"userArn": "arn:aws:iam::1:user/ann"}}})
    'arn:aws:iam::1:user/ann'
    >>> principal_of({"requestContext": {"authorizer": {"jwt": {"claims": {"sub": "u-1"}}}}})
    'u-1'
    >>> principal_of({"requestContext": {}}) is None
    True
    """
    context = event.get("requestContext") or {}
    identity = context.get("identity") or {}
    authorizer = context.get("authorizer") or {}
    candidates = (
        identity.get("userArn"),
        (authorizer.get("claims") or {}).get("sub"),
        ((authorizer.get("jwt") or {}).get("claims") or {}).get("sub"),
        authorizer.get("principalId"),
    )
    return next((str(c) for c in candidates if c), None)


def is_local(event: Mapping[str, Any]) -> bool:
    """Whether the request came from this machine (the local gateway): API Gateway never says so."""
    source_ip = ((event.get("requestContext") or {}).get("identity") or {}).get("sourceIp")
    if not isinstance(source_ip, str):
        return False
    try:
        return ipaddress.ip_address(source_ip).is_loopback
    except ValueError:
        return False


class RouteContext(Protocol):
    """What the route groups read of the api (:class:`~wait_service.http.api.WaitApi`).

    Read at each request, never copied: a test may swap a collaborator of a built api.
    """

    ledger: Ledger
    replies: ReplyService
    runs: RunService
    authority: AuthorityService
    starts: IdempotentStarts | None
    input_schema: dict[str, Any] | None
    inbox_sign_in: InboxSignIn | None
    stats: StatsService | None

    def openapi_json(self) -> str: ...

    def _principal(self) -> str: ...

    def _caller(self) -> str | None: ...

    def _check_answer_fits(self, question_id: str, request: ReplyRequest) -> None: ...
