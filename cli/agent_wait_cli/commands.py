"""``agent-wait``: answer and inspect questions from a terminal, and run the local stack.

Exit codes: 0 ok, 1 the api answered an error (4xx/5xx, its message printed), 2 usage or
configuration error, 3 the api (or queue) could not be reached.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import urllib.parse
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any, NoReturn, TextIO

from agent_wait_cli import render
from agent_wait_cli.client import ApiClient, ApiError, CliError, Opener, UsageError
from wait_service.settings import DEFAULT_GRAPH

DEFAULT_API = "http://127.0.0.1:8787"
API_ENV = "AGENT_WAIT_API"


def _json_arg(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not JSON: {exc}") from None


def _answer_arg(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        quoted = json.dumps(text)
        raise argparse.ArgumentTypeError(
            f"{text!r} is not JSON: to answer with text, send a JSON string: --answer '{quoted}'"
        ) from None


def usage_error(prog: str, message: str) -> str:
    """A usage error as one line: what is wrong, and the help of the command it was typed to.

    >>> usage_error("agent-wait reply", "unrecognized arguments: --bogus")
    'agent-wait reply: unrecognized arguments: --bogus (see agent-wait reply --help)\\n'
    """
    return f"{prog}: {message} (see {prog} --help)\n"


class OneLineParser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line saying what is wrong, not the whole usage."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, usage_error(self.prog, message))


def _positive_seconds(text: str) -> int:
    """``--inbox-visibility``: whole seconds from 0 to SQS's 12 hours."""
    if not text.isdigit() or int(text) > 43_200:
        raise argparse.ArgumentTypeError(f"expected whole seconds from 0 to 43200, got {text!r}")
    return int(text)


def _listing_shards(text: str) -> int:
    """``--listing-shards``: as the stack's ``listing_shards`` context, 1 to 64."""
    if not text.isdigit() or not 1 <= int(text) <= 64:
        raise argparse.ArgumentTypeError(f"expected a whole number of shards from 1 to 64, got {text!r}")
    return int(text)


def _key_arg(text: str) -> tuple[str, str]:
    key_id, sep, secret = text.partition("=")
    if not sep or not key_id or not secret:
        raise argparse.ArgumentTypeError("expected ID=SECRET")
    return key_id, secret


def _webhook_arg(text: str) -> tuple[str, str]:
    """``URL=SECRET``: the URL ends at its first ``=`` (so it has no query string), the secret is the rest."""
    url, sep, secret = text.partition("=")
    if not sep or not secret or not url.startswith(("http://", "https://")) or "?" in url:
        raise argparse.ArgumentTypeError("expected URL=SECRET, the URL http(s):// without a query string")
    return url, secret


def _global_options(
    parser: argparse.ArgumentParser, env: Mapping[str, str], *, suppress: bool
) -> argparse.ArgumentParser:
    """Options valid before or after the command (``agent-wait --json questions list`` or after).

    The copy on each subcommand defaults to ``SUPPRESS`` so that, when absent there, it leaves
    the value given before the command (or the top-level default) alone.
    """

    def default(value: Any) -> Any:
        return argparse.SUPPRESS if suppress else value

    parser.add_argument(
        "--api",
        default=default(env.get(API_ENV, DEFAULT_API)),
        help=f"api base URL (default: ${API_ENV} or {DEFAULT_API})",
    )
    parser.add_argument(
        "--region",
        default=default(None),
        help="region for SigV4 signing (default: from the URL or AWS config)",
    )
    parser.add_argument(
        "--jwt",
        default=default(None),
        metavar="TOKEN",
        help="send Authorization: Bearer TOKEN instead of SigV4",
    )
    parser.add_argument(
        "--principal",
        default=default(None),
        help="X-Wait-Principal header (honoured by the local stack only)",
    )
    parser.add_argument(
        "--hmac-key",
        dest="api_hmac_key",
        type=_key_arg,
        default=default(None),
        metavar="ID=SECRET",
        help="sign requests with this key (a local stack run with --hmac-key, or a deployed api's "
        "/signed routes, which POSTs then use)",
    )
    parser.add_argument(
        "--json", action="store_true", default=default(False), help="print JSON for scripts instead of tables"
    )
    parser.add_argument(
        "--timeout", type=float, default=default(30.0), help="HTTP timeout in seconds (default 30)"
    )
    return parser


def build_parser(environ: Mapping[str, str] | None = None) -> argparse.ArgumentParser:
    """The whole command line.

    Examples
    --------
    >>> args = build_parser({}).parse_args(["reply", "q1", "--approve"])
    >>> args.command, args.question_id, args.approve, args.api
    ('reply', 'q1', True, 'http://127.0.0.1:8787')
    """
    env = os.environ if environ is None else environ
    common = OneLineParser(add_help=False)
    _global_options(common, env, suppress=True)

    parser = OneLineParser(
        prog="agent-wait",
        description="Human-in-the-loop waits for agents: the local stack, and a client for its api.",
        epilog="exit codes: 0 ok, 1 api error, 2 usage error, 3 connection error",
    )
    _global_options(parser, env, suppress=False)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    local = sub.add_parser("local", help="run the local stack (moto on 127.0.0.1, api, runner)")
    local.add_argument("--port", type=int, default=8787, help="api port on 127.0.0.1 (default 8787, 0: free)")
    local.add_argument("--moto-port", type=int, default=0, help="moto server port (default: a free one)")
    local.add_argument(
        "--graph",
        "--agent",
        dest="graph",
        default=DEFAULT_GRAPH,
        help=f"module:attribute of the graph or agent (default: {DEFAULT_GRAPH})",
    )
    local.add_argument(
        "--framework",
        choices=("langgraph", "pydantic_ai", "strands"),
        default=None,
        help="the agent's framework, as the stack's `framework` context (default: detected from the "
        "object --agent names: a pydantic_ai.Agent, a factory taking session_manager= (Strands), "
        "else a LangGraph graph)",
    )
    local.add_argument(
        "--graph-source",
        metavar="DIR",
        default=None,
        help="folder put first on sys.path for --graph (as -c graph_source=DIR deploys it); the "
        "current directory is importable too. Install the agent's requirements into this environment",
    )
    local.add_argument(
        "--project",
        default=None,
        help="project folder with functions/ (default: the current dir if it has one, else the "
        "installed agent-wait project)",
    )
    local.add_argument(
        "--checkpointer",
        choices=("aws", "dynamodb"),
        default="aws",
        help="the runner's checkpointer, as the stack's `checkpointer` context: aws (default: "
        "langgraph-checkpoint-aws, one table and an offload bucket) or dynamodb "
        "(langgraph-checkpoint-dynamodb, its two tables, no offload)",
    )
    local.add_argument(
        "--listing-shards",
        type=_listing_shards,
        default=1,
        metavar="N",
        help="shards of each status listing of the ledger, as the stack's `listing_shards` context "
        "(default 1: a page of questions is one Query)",
    )
    local.add_argument(
        "--hmac-key",
        type=_key_arg,
        action="append",
        default=[],
        metavar="ID=SECRET",
        help="require requests signed with this key (repeatable); the principal is hmac:<key id>",
    )
    local.add_argument(
        "--webhook",
        type=_webhook_arg,
        action="append",
        default=[],
        metavar="URL=SECRET",
        help="POST every event of the topic to URL, signed with SECRET (X-Wait-Key-Id webhook-<n>), "
        "retried with backoff, as a deployed `webhooks` entry does (repeatable)",
    )
    local.add_argument("--log-level", default="WARNING", help="the handlers' LOG_LEVEL (default WARNING)")
    local.add_argument(
        "--slack-api",
        metavar="URL",
        help="post questions to this Slack Web API stand-in (e.g. http://127.0.0.1:9000/api/); "
        "a fake bot token is used",
    )
    local.add_argument(
        "--slack-signing-secret",
        metavar="SECRET",
        help="verify POST /slack/interactions with this Slack signing secret",
    )
    local.add_argument("--slack-channel", metavar="C", help="the Slack channel questions are posted to")
    local.add_argument(
        "--inbox-visibility",
        type=_positive_seconds,
        default=None,
        metavar="SECONDS",
        help="the inbox's visibility timeout: a failed run is retried after this long "
        "(default: the deployed one, six runner timeouts)",
    )
    local.add_argument(
        "--log-file",
        default=None,
        metavar="PATH",
        help="where the handlers' logs and tracebacks go (default: a new file in the temp folder, "
        "printed at start)",
    )

    local.add_argument(
        "--archive-dir",
        default=None,
        metavar="DIR",
        help="the audit archive's folder: every decided question as JSON Lines under "
        "audit/date=YYYY-MM-DD/ (default: a new folder in the temp folder, printed at start)",
    )

    questions = sub.add_parser("questions", help="list and show questions")
    qsub = questions.add_subparsers(dest="action", required=True, metavar="ACTION")
    qlist = qsub.add_parser("list", parents=[common], help="list questions")
    qlist.add_argument(
        "--status",
        help="only this status: pending (waiting for an answer), raised, delivered, answered, resumed, ...",
    )
    qlist.add_argument("--thread", help="only this thread")
    qlist.add_argument("--limit", type=int, help="page size")
    qlist.add_argument("--all", action="store_true", help="follow every page")
    qshow = qsub.add_parser("show", parents=[common], help="show one question and its lifecycle")
    qshow.add_argument("question_id")

    reply = sub.add_parser(
        "reply",
        parents=[common],
        help="answer a question (sends its digest as If-Match)",
        description="Fetch the question, show what is being answered, then reply with If-Match: <digest>.",
    )
    reply.add_argument("question_id")
    how = reply.add_mutually_exclusive_group(required=True)
    how.add_argument("--approve", action="store_true", help='{"action": "approve"}')
    how.add_argument("--reject", action="store_true", help='{"action": "reject"} (with --reason)')
    how.add_argument(
        "--edit",
        type=_json_arg,
        metavar="JSON",
        help='approve with edited arguments: {"action": "approve", "args": JSON} '
        '(edit questions: {"action": "edit", "value": JSON})',
    )
    how.add_argument(
        "--respond",
        metavar="MESSAGE",
        help='a LangChain middleware request: {"action": "respond", "message": MESSAGE} '
        "(the tool does not run; the agent gets the message)",
    )
    how.add_argument(
        "--answer",
        type=_answer_arg,
        metavar="JSON",
        help="send JSON as the answer as is (text is a JSON string: --answer '\"yes\"')",
    )
    reply.add_argument("--reason", help="why (recorded with the answer)")

    revoke = sub.add_parser(
        "revoke",
        parents=[common],
        help="withdraw an open question (the thread is resumed with a rejection)",
        description="Revoke a question nobody has answered: its thread resumes with "
        '{"action": "reject", "reason": "revoked: <reason>"}.',
    )
    revoke.add_argument("question_id")
    revoke.add_argument(
        "--reason", required=True, help="why it is withdrawn (recorded and sent to the thread)"
    )

    delegate = sub.add_parser(
        "delegate",
        parents=[common],
        help="hand an open question to another principal (a responder of this question only)",
        description="Delegate a question you may answer: --to becomes one of its responders.",
    )
    delegate.add_argument("question_id")
    delegate.add_argument("--to", required=True, metavar="PRINCIPAL", help="who may answer it too")
    delegate.add_argument("--reason", required=True, help="why it is handed over (recorded)")

    extend = sub.add_parser(
        "extend",
        parents=[common],
        help="move an open question's expiry later (within its policy's max_extension)",
        description="Give a question more time: --by SECONDS later, or --until an ISO 8601 moment.",
    )
    extend.add_argument("question_id")
    when = extend.add_mutually_exclusive_group(required=True)
    when.add_argument("--by", type=int, metavar="SECONDS", help="seconds to add to the expiry")
    when.add_argument(
        "--until", metavar="ISO", help="the new expiry, ISO 8601 with a timezone (2026-12-02T09:00:00Z)"
    )
    extend.add_argument("--reason", required=True, help="why more time is needed (recorded)")

    threads = sub.add_parser("threads", help="start and show threads")
    tsub = threads.add_subparsers(dest="action", required=True, metavar="ACTION")
    tshow = tsub.add_parser(
        "show", parents=[common], help="show a thread's status, pending questions and output"
    )
    tshow.add_argument("thread_id")
    tstart = tsub.add_parser("start", parents=[common], help="start a run of the graph on a thread")
    tstart.add_argument("thread_id")
    tstart.add_argument("--input", type=_json_arg, default={}, metavar="JSON", help="the run's input")
    tstart.add_argument(
        "--idempotency-key",
        metavar="KEY",
        help="sent as Idempotency-Key (default: a new one per command); repeat a start with the same "
        "KEY and input within 24 h and the api returns the first response without starting another run",
    )

    stats = sub.add_parser(
        "stats",
        parents=[common],
        help="approval analytics: outcomes, time to answer, edits by responder, function, rung, day",
        description="GET /stats: the figures of a window of days (UTC), as tables (--json: the api's body).",
    )
    stats.add_argument("--since", metavar="YYYY-MM-DD", help="first day (default: six days before --until)")
    stats.add_argument("--until", metavar="YYYY-MM-DD", help="last day (default: today)")
    stats.add_argument("--function", help="only this function's questions")
    stats.add_argument("--responder", help="only what this principal decided")

    inbox = sub.add_parser(
        "inbox",
        parents=[common],
        help="serve the inbox page on 127.0.0.1, its api calls signed with your credentials",
        description="For a deployed api with auth=iam (browsers cannot sign SigV4): open the printed URL.",
    )
    inbox.add_argument("--port", type=int, default=8788, help="port on 127.0.0.1 (default 8788, 0: free)")

    tail = sub.add_parser(
        "tail",
        parents=[common],
        help="follow envelopes from a queue (the outbox, or one subscribed to the topic)",
        description="Print each envelope as it arrives. tail is a subscriber: it deletes what it printed "
        "unless --peek is given.",
    )
    tail.add_argument("--queue-url", required=True, help="SQS queue URL (the local stack prints its own)")
    tail.add_argument("--endpoint-url", help="SQS endpoint (default: derived from a loopback queue URL)")
    tail.add_argument("--peek", action="store_true", help="leave messages in the queue")
    tail.add_argument("--once", action="store_true", help="exit when the queue has nothing more")
    tail.add_argument("--max", type=int, help="exit after this many envelopes")
    tail.add_argument(
        "--type",
        action="append",
        metavar="TYPE",
        help="print only events of this type (repeatable, or a comma list: wait.answered,thread.failed); "
        "the others are still consumed unless --peek is given",
    )

    dlq_common = OneLineParser(add_help=False)
    dlq_common.add_argument(
        "--stack",
        default=env.get("AGENT_WAIT_STACK", "agent-wait"),
        help="the stack's name, the prefix of its queues (default: $AGENT_WAIT_STACK or agent-wait)",
    )
    dlq_common.add_argument(
        "--endpoint-url",
        default=None,
        metavar="URL",
        help="the local stack's moto endpoint (`agent-wait local` prints it); default: AWS, with your "
        "credentials and --region",
    )
    dlq = sub.add_parser(
        "dlq",
        help="look into the dead-letter queues and redrive their messages",
        description="Every DLQ of the stack (the runbook in docs/operations.md says what each holds).",
    )
    dsub = dlq.add_subparsers(dest="action", required=True, metavar="ACTION")
    dlist = dsub.add_parser("list", parents=[common, dlq_common], help="each DLQ and the messages in it")
    dlist.add_argument("--dlq", metavar="NAME", help="only this DLQ (inbox, outbox, lifecycle, ...)")
    dshow = dsub.add_parser("show", parents=[common, dlq_common], help="one message, whole")
    dshow.add_argument("message_id", metavar="ID")
    dredrive = dsub.add_parser(
        "redrive",
        parents=[common, dlq_common],
        help="send messages back to work (a queue's message to its queue, a failed timer to its function)",
    )
    which = dredrive.add_mutually_exclusive_group(required=True)
    which.add_argument("message_id", metavar="ID", nargs="?", help="the message to redrive")
    which.add_argument("--all", action="store_true", help="every message (of --dlq NAME only, if given)")
    dredrive.add_argument("--dlq", metavar="NAME", help="with --all: only this DLQ")
    dredrive.add_argument(
        "--lambda-endpoint-url",
        default=None,
        metavar="URL",
        help="with --endpoint-url: the local stack's Lambda endpoint (`agent-wait local` prints it as "
        "`lambda:`), through which a ledger-stream batch is handed back to its dispatcher",
    )
    _audit_parser(sub, env)

    store_common = OneLineParser(add_help=False)
    store_common.add_argument(
        "--table",
        default=env.get("AGENT_WAIT_POLICY_TABLE"),
        help="the policy store's table (default: $AGENT_WAIT_POLICY_TABLE, else the stack's output "
        "PolicyTableName, or <stack>-policies on the local stack)",
    )
    policies = sub.add_parser(
        "policies",
        help="per-function policy overrides, changed without a deploy",
        description="Override ttl, responders, escalation, reminders (any policy field but kind, options "
        "and bind) per function. The next question each function raises uses the new version; questions "
        "already raised keep theirs (docs/policies.md).",
    )
    psub = policies.add_subparsers(dest="action", required=True, metavar="ACTION")
    parents = [common, dlq_common, store_common]
    psub.add_parser("list", parents=parents, help="every function with an override, at its current version")
    pshow = psub.add_parser("show", parents=parents, help="a function's current override")
    pshow.add_argument("name", metavar="NAME", help="the function's name (a question's `function`)")
    pset = psub.add_parser("set", parents=parents, help="write a new version of a function's override")
    pset.add_argument("name", metavar="NAME", help="the function's name (a question's `function`)")
    pset.add_argument(
        "--file", required=True, metavar="F", help="the override: a JSON object of policy fields"
    )
    pset.add_argument(
        "--if-version",
        type=int,
        default=None,
        metavar="N",
        help="refuse (409) unless the current version is N (0: none yet), e.g. the one `diff` showed",
    )
    pdiff = psub.add_parser("diff", parents=parents, help="JSON Patch from the current override to a file")
    pdiff.add_argument("name", metavar="NAME", help="the function's name (a question's `function`)")
    pdiff.add_argument("--file", required=True, metavar="F", help="the override to compare")
    return parser


def _audit_parser(sub: Any, env: Mapping[str, str]) -> None:
    """``audit query`` and ``audit reports``: SQL over the audit archive (DuckDB locally, Athena deployed)."""
    from wait_service.stream.archive_reports import REPORTS

    shared = OneLineParser(add_help=False)
    shared.add_argument(
        "--json",
        action="store_true",
        default=argparse.SUPPRESS,
        help="print JSON for scripts instead of a table",
    )
    shared.add_argument(
        "--report",
        choices=sorted(REPORTS),
        metavar="NAME",
        help=f"a saved report: {', '.join(sorted(REPORTS))}",
    )
    audit = sub.add_parser(
        "audit",
        help="query the audit archive (every decided question): DuckDB locally, Athena deployed",
        description="The same SQL runs on both: the archive is the table `audit` (docs/audit-query.md).",
    )
    asub = audit.add_subparsers(dest="action", required=True, metavar="ACTION")
    query = asub.add_parser(
        "query",
        parents=[shared],
        help="run SQL (or a saved --report) over the archive",
        description="Locally (the default) DuckDB reads the local stack's archive folder; with --api, "
        "Athena runs the statement in the stack's workgroup with your AWS credentials.",
    )
    query.add_argument("sql", nargs="?", metavar="SQL", help="the statement; the table is `audit`")
    query.add_argument(
        "--api",
        dest="athena",
        action="store_true",
        help="the deployed archive: run it through Athena (workgroup <stack>-audit), your AWS credentials",
    )
    query.add_argument(
        "--stack",
        default=env.get("AGENT_WAIT_STACK", "agent-wait"),
        help="the stack's name: its Glue database and workgroup (default: $AGENT_WAIT_STACK or agent-wait)",
    )
    query.add_argument("--region", default=argparse.SUPPRESS, help="with --api: the stack's region")
    query.add_argument(
        "--workgroup", default=None, help="with --api: the Athena workgroup (default <stack>-audit)"
    )
    query.add_argument(
        "--max-wait",
        type=float,
        default=300.0,
        metavar="SECONDS",
        help="with --api: stop the query if it has not finished by then (default 300)",
    )
    query.add_argument(
        "--archive-dir",
        default=env.get("AGENT_WAIT_ARCHIVE_DIR"),
        metavar="DIR",
        help="locally: the archive folder agent-wait local printed as `audit archive:` (default: "
        "$AGENT_WAIT_ARCHIVE_DIR, else the newest such folder in the temp folder)",
    )
    asub.add_parser(
        "reports",
        parents=[shared],
        help="the saved reports and what each answers (--report NAME prints its SQL)",
    )


def build_answer(
    kind: str,
    *,
    approve: bool = False,
    reject: bool = False,
    reason: str | None = None,
    edit: Any = None,
    answer: Any = None,
    respond: str | None = None,
) -> Any:
    """The answer a ``reply`` flag means for a question of ``kind``.

    Examples
    --------
    >>> build_answer("approval", edit={"amount": 25})
    {'action': 'approve', 'args': {'amount': 25}}
    >>> build_answer("edit", edit="new text")
    {'action': 'edit', 'value': 'new text'}
    >>> build_answer("approval", reject=True, reason="too much")
    {'action': 'reject', 'reason': 'too much'}
    >>> build_answer("approval", respond="use store credit")
    {'action': 'respond', 'message': 'use store credit'}
    """
    if answer is not None:
        return answer
    if respond is not None:
        # The api refuses it (422) unless the request's allowed decisions include respond.
        return {"action": "respond", "message": respond}
    if kind not in {"approval", "edit"}:
        raise UsageError(f"a {kind!r} question takes --answer JSON, not --approve/--reject/--edit")
    if approve:
        return {"action": "approve"}
    if reject:
        # Only an approval's answer has room for a reason; an edit's reason travels beside it.
        return (
            {"action": "reject", "reason": reason} if kind == "approval" and reason else {"action": "reject"}
        )
    if edit is not None:
        if kind == "approval":
            if not isinstance(edit, Mapping):
                raise UsageError("--edit for an approval takes a JSON object of the arguments to change")
            return {"action": "approve", "args": dict(edit)}
        return {"action": "edit", "value": edit}
    raise UsageError("give one of --approve, --reject, --edit JSON, --respond MESSAGE, --answer JSON")


class Cli:
    """Runs one parsed command; output goes to ``out``, problems to ``err``."""

    def __init__(
        self,
        args: argparse.Namespace,
        out: TextIO,
        err: TextIO,
        client: ApiClient | None = None,
        *,
        opener: Opener | None = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self.args = args
        self.out = out
        self.err = err
        self._client = client
        self._opener = opener
        self._clock = clock

    @property
    def client(self) -> ApiClient:
        if self._client is None:
            client = ApiClient(
                self.args.api,
                jwt=self.args.jwt,
                principal=self.args.principal,
                hmac_key=self.args.api_hmac_key,
                region=self.args.region,
                timeout=self.args.timeout,
            )
            self._client = client if self._opener is None else replace(client, opener=self._opener)
        return self._client

    def print(self, text: str = "") -> None:
        self.out.write(text + "\n")
        self.out.flush()

    def dump(self, value: Any) -> None:
        self.print(json.dumps(value, indent=2, ensure_ascii=False, default=str))

    # -- commands -----------------------------------------------------------------------------

    def questions_list(self) -> int:
        query = {"status": self.args.status, "thread_id": self.args.thread, "limit": self.args.limit}
        items: list[Any] = []
        next_token = None
        while True:
            body = self.client.request("GET", "/questions", query=query | {"next": next_token}).body or {}
            items.extend(body.get("items") or [])
            next_token = body.get("next")
            if not self.args.all or not next_token:
                break
        if self.args.json:
            self.dump({"items": items, "next": next_token})
            return 0
        self.print(render.question_rows(items) if items else "no questions")
        if next_token:
            self.print("(more: pass --all)")
        return 0

    def questions_show(self) -> int:
        question = self._get_question(self.args.question_id)
        if self.args.json:
            self.dump(question)
        else:
            self.print(render.question_detail(question))
        return 0

    def reply(self) -> int:
        qid = self.args.question_id
        response = self.client.request("GET", f"/questions/{_quote(qid)}")
        question = response.body if isinstance(response.body, Mapping) else {}
        policy = question.get("policy") if isinstance(question.get("policy"), Mapping) else {}
        kind = str((policy or {}).get("kind") or "approval")
        answer = build_answer(
            kind,
            approve=self.args.approve,
            reject=self.args.reject,
            reason=self.args.reason,
            edit=self.args.edit,
            answer=self.args.answer,
            respond=self.args.respond,
        )
        prompt = (policy or {}).get("prompt")
        asked = question.get("question")
        allowed = asked.get("allowed_decisions") if isinstance(asked, Mapping) else None
        etag = response.header("ETag") or (f'"{question["digest"]}"' if question.get("digest") else None)
        # Show what is being answered before it is sent, so what a person approves is what they saw.
        summary = render.fields(
            [
                ("question", qid),
                ("thread", question.get("thread_id")),
                ("status", question.get("status")),
                ("kind", kind),
                *([("prompt", prompt)] if prompt else []),
                ("asks", render.describe_question(question.get("question"))),
                *([("allowed", ", ".join(str(d) for d in allowed))] if isinstance(allowed, list) else []),
                ("digest", question.get("digest")),
                ("answer", answer),
            ]
        )
        (self.err if self.args.json else self.out).write(summary + "\n\n")
        body: dict[str, Any] = {"answer": answer}
        if self.args.reason:
            body["reason"] = self.args.reason
        headers = {"If-Match": etag} if etag else {}
        result = self.client.request("POST", f"/questions/{_quote(qid)}/reply", body=body, headers=headers)
        if self.args.json:
            self.dump({"status_code": result.status, "body": result.body})
        else:
            reply_body = result.body if isinstance(result.body, Mapping) else {}
            note = " (already recorded: the same answer)" if result.status == 200 else ""
            self.print(f"{result.status} {reply_body.get('status', '')}{note}".rstrip())
        return 0

    def revoke(self) -> int:
        qid = self.args.question_id
        result = self.client.request(
            "POST", f"/questions/{_quote(qid)}/revoke", body={"reason": self.args.reason}
        )
        if self.args.json:
            self.dump({"status_code": result.status, "body": result.body})
        else:
            question = result.body if isinstance(result.body, Mapping) else {}
            self.print(f"{result.status} {question.get('status', '')}".rstrip())
        return 0

    def delegate(self) -> int:
        qid = self.args.question_id
        result = self.client.request(
            "POST",
            f"/questions/{_quote(qid)}/delegate",
            body={"to": self.args.to, "reason": self.args.reason},
        )
        if self.args.json:
            self.dump({"status_code": result.status, "body": result.body})
        else:
            question = result.body if isinstance(result.body, Mapping) else {}
            delegates = ", ".join(str(d) for d in question.get("delegates") or [])
            self.print(f"{result.status} {question.get('status', '')} delegates: {delegates}".rstrip())
        return 0

    def extend(self) -> int:
        qid = self.args.question_id
        body: dict[str, Any] = {"reason": self.args.reason}
        if self.args.by is not None:
            body["by_seconds"] = self.args.by
        else:
            body["until"] = self.args.until
        result = self.client.request("POST", f"/questions/{_quote(qid)}/extend", body=body)
        if self.args.json:
            self.dump({"status_code": result.status, "body": result.body})
        else:
            question = result.body if isinstance(result.body, Mapping) else {}
            self.print(f"{result.status} {question.get('status', '')} expires {question.get('expires_at')}")
        return 0

    def threads_show(self) -> int:
        thread = self.client.request("GET", f"/threads/{_quote(self.args.thread_id)}").body
        if self.args.json:
            self.dump(thread)
        else:
            self.print(render.thread_detail(thread if isinstance(thread, Mapping) else {}))
        return 0

    def threads_start(self) -> int:
        key = self.args.idempotency_key or str(uuid.uuid4())
        result = self.client.request(
            "POST",
            f"/threads/{_quote(self.args.thread_id)}/runs",
            body={"input": self.args.input},
            headers={"Idempotency-Key": key},
        )
        if self.args.json:
            self.dump({"status_code": result.status, "body": result.body})
        else:
            body = result.body if isinstance(result.body, Mapping) else {}
            thread_id = body.get("thread_id", self.args.thread_id)
            self.print(f"{result.status} thread {thread_id} {body.get('status', '')}".rstrip())
        return 0

    def stats(self) -> int:
        from agent_wait_cli.stats import render_stats

        query = {name: getattr(self.args, name) for name in ("since", "until", "function", "responder")}
        body = self.client.request("GET", "/stats", query=query).body
        if self.args.json:
            self.dump(body)
        else:
            self.print(render_stats(body if isinstance(body, Mapping) else {}))
        return 0

    def tail(self) -> int:
        from agent_wait_cli.tail import follow

        return follow(self.args, self.out, self.err)

    def inbox(self) -> int:
        from agent_wait_cli.inbox import run_inbox

        return run_inbox(self.args, self.client, self.out)

    def dlq(self) -> int:
        from agent_wait_cli.dlq_command import run_dlq

        return run_dlq(self.args, self.out, now=self._clock)

    def audit(self) -> int:
        from agent_wait_cli.audit_query import run_audit

        return run_audit(self.args, self.out, self.err)

    def policies(self) -> int:
        from agent_wait_cli.policies_command import run_policies

        return run_policies(self.args, self.out)

    def _get_question(self, question_id: str) -> Mapping[str, Any]:
        body = self.client.request("GET", f"/questions/{_quote(question_id)}").body
        return body if isinstance(body, Mapping) else {}


def _quote(value: str) -> str:
    return urllib.parse.quote(value, safe="")


COMMANDS: dict[tuple[str, str | None], Callable[[Cli], int]] = {
    ("questions", "list"): Cli.questions_list,
    ("questions", "show"): Cli.questions_show,
    ("reply", None): Cli.reply,
    ("revoke", None): Cli.revoke,
    ("delegate", None): Cli.delegate,
    ("extend", None): Cli.extend,
    ("threads", "show"): Cli.threads_show,
    ("threads", "start"): Cli.threads_start,
    ("stats", None): Cli.stats,
    ("tail", None): Cli.tail,
    ("inbox", None): Cli.inbox,
    ("dlq", "list"): Cli.dlq,
    ("dlq", "show"): Cli.dlq,
    ("dlq", "redrive"): Cli.dlq,
    ("audit", "query"): Cli.audit,
    ("audit", "reports"): Cli.audit,
    ("policies", "list"): Cli.policies,
    ("policies", "show"): Cli.policies,
    ("policies", "set"): Cli.policies,
    ("policies", "diff"): Cli.policies,
}


def main(
    argv: Sequence[str] | None = None,
    *,
    out: TextIO | None = None,
    err: TextIO | None = None,
    client: ApiClient | None = None,
    opener: Opener | None = None,
    environ: Mapping[str, str] | None = None,
    clock: Callable[[], float] | None = None,
) -> int:
    """Entry point of the ``agent-wait`` console script; returns the exit code.

    Parameters
    ----------
    argv:
        The arguments; ``sys.argv[1:]`` when ``None``.
    out, err:
        Where output and problems go; stdout and stderr by default.
    client:
        The api client to use as is, instead of one built from the options.
    opener:
        Sends the HTTP requests of the client built from the options (tests pass a fake).
    environ:
        Read for ``AGENT_WAIT_API`` and ``AGENT_WAIT_STACK``; ``os.environ`` by default.
    clock:
        Seconds since the epoch for ``dlq redrive``'s deduplication window (tests); ``time.time``.

    Examples
    --------
    >>> main(["questions", "list", "--api", "http://127.0.0.1:9"])  # doctest: +SKIP
    3
    """
    out = out or sys.stdout
    err = err or sys.stderr
    parser = build_parser(environ)
    args, extras = parser.parse_known_args(argv)
    if extras:
        # Named where they were typed: the command's own help lists what it takes.
        command_prog = " ".join(
            [parser.prog, args.command, *([args.action] if getattr(args, "action", None) else [])]
        )
        parser.exit(2, usage_error(command_prog, f"unrecognized arguments: {' '.join(extras)}"))
    if args.command == "local":
        from agent_wait_cli.local_command import run_local

        return run_local(args, out, err)
    command = COMMANDS[(args.command, getattr(args, "action", None))]
    try:
        return command(Cli(args, out, err, client, opener=opener, clock=clock))
    except ApiError as exc:
        if getattr(args, "json", False):
            out.write(json.dumps({"status_code": exc.status, "body": exc.body}) + "\n")
        else:
            err.write(f"agent-wait: {exc}\n")
            standing = exc.body.get("standing_answer") if isinstance(exc.body, Mapping) else None
            if standing is not None:
                err.write(f"standing answer: {json.dumps(standing)}\n")
        return exc.exit_code
    except CliError as exc:
        err.write(f"agent-wait: {exc}\n")
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
