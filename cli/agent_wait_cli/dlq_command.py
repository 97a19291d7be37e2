"""``agent-wait dlq list | show ID | redrive (ID | --all)``: the commands over :mod:`agent_wait_cli.dlq`.

Deployed, the calls are signed with your AWS credentials (profile, SSO, environment...) in
``--region``; the inbox's queue policy must admit you (context ``operator_principals``). With
``--endpoint-url`` they go to the local stack's moto server instead, with its fake credentials.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any, TextIO

from agent_wait_cli import render
from agent_wait_cli.client import CliError, UsageError, aws_errors, local_stack_clients
from agent_wait_cli.dlq import DeadLetter, DeadLetters, DlqError, LambdaInvoker, LocalInvoker, iso, summary

if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable, Mapping


def dead_letters(args: argparse.Namespace, now: Callable[[], float] | None = None) -> DeadLetters:
    """The stack's DLQs, on AWS or (``--endpoint-url``) on the local stack."""
    try:
        import boto3
    except ImportError:
        raise UsageError("agent-wait dlq needs boto3: pip install 'agent-wait[aws]'") from None
    prefix = f"{args.stack}-"
    endpoint = args.endpoint_url
    if endpoint is None and getattr(args, "lambda_endpoint_url", None) is not None:
        raise UsageError("--lambda-endpoint-url is for the local stack: pass its moto --endpoint-url too")
    if endpoint is not None:
        local = local_stack_clients(endpoint, args.region)
        sqs = boto3.client("sqs", **local)
        lambda_endpoint = getattr(args, "lambda_endpoint_url", None)
        if lambda_endpoint is None:
            return DeadLetters(
                sqs, prefix, LocalInvoker(boto3.client("scheduler", **local), prefix), now=now or time.time
            )
        # The dispatcher runs in the `agent-wait local` process; its Lambda endpoint takes the same
        # synchronous Invoke the deployed function does.
        functions = boto3.client(
            "lambda", **local_stack_clients(lambda_endpoint, args.region, flag="--lambda-endpoint-url")
        )
        return DeadLetters(
            sqs,
            prefix,
            LocalInvoker(boto3.client("scheduler", **local), prefix),
            now=now or time.time,
            streams=boto3.client("dynamodbstreams", **local),
            batch_invoker=LambdaInvoker(functions),
        )
    session = boto3.session.Session(region_name=args.region)
    if session.region_name is None:
        raise UsageError("cannot tell the stack's region; pass --region or set AWS_REGION")
    invoker = LambdaInvoker(session.client("lambda"))
    return DeadLetters(
        session.client("sqs"),
        prefix,
        invoker,
        now=now or time.time,
        streams=session.client("dynamodbstreams"),
        batch_invoker=invoker,
    )


def run_dlq(args: argparse.Namespace, out: TextIO, *, now: Callable[[], float] | None = None) -> int:
    """Run ``dlq list``, ``dlq show`` or ``dlq redrive``; AWS errors become one-line :class:`CliError`."""

    def write(text: str) -> None:
        out.write(text + "\n")
        out.flush()

    with aws_errors("SQS"):
        try:
            dlqs = dead_letters(args, now)
            if args.action == "list":
                return _list(dlqs, args, write)
            if args.action == "show":
                return _show(dlqs, args, write)
            return _redrive(dlqs, args, write)
        except DlqError as exc:
            raise CliError(str(exc)) from None


def _list(dlqs: DeadLetters, args: argparse.Namespace, write: Callable[[str], None]) -> int:
    queues = [entry for entry in dlqs.queues() if args.dlq is None or entry[0].name == args.dlq]
    if args.dlq is not None and not queues:
        raise DlqError(
            f"no dead-letter queue named {args.dlq!r} (known: {', '.join(s.name for s in dlqs.specs)})"
        )
    letters = dlqs.messages(args.dlq)
    if args.json:
        write(
            json.dumps(
                {
                    "queues": [
                        {
                            "name": spec.name,
                            "queue": dlqs.prefix + spec.queue_name,
                            "url": url,
                            "messages": count,
                            "redrive": spec.redrive,
                            "holds": spec.holds,
                        }
                        for spec, url, count in queues
                    ],
                    "messages": [_as_json(letter) for letter in letters],
                },
                indent=2,
            )
        )
        return 0
    write(
        render.table(
            ["DLQ", "QUEUE", "MESSAGES", "HOLDS"],
            [
                [spec.name, dlqs.prefix + spec.queue_name, count if url else "not deployed", spec.holds]
                for spec, url, count in queues
            ],
            max_width=100,
        )
    )
    write("")
    if not letters:
        write("no messages")
        return 0
    write(
        render.table(
            ["ID", "DLQ", "SENT", "WHAT", "ERROR"],
            [
                [letter.message_id, letter.dlq.name, iso(letter.sent_at), summary(letter), letter.error()]
                for letter in letters
            ],
        )
    )
    return 0


def _show(dlqs: DeadLetters, args: argparse.Namespace, write: Callable[[str], None]) -> int:
    letter = dlqs.find(args.message_id)
    if args.json:
        write(json.dumps(_as_json(letter), indent=2))
        return 0
    pairs: list[tuple[str, Any]] = [
        ("id", letter.message_id),
        ("dlq", f"{letter.dlq.name} ({dlqs.prefix}{letter.dlq.queue_name})"),
        ("holds", letter.dlq.holds),
        ("sent", iso(letter.sent_at)),
        ("receives", letter.attributes.get("ApproximateReceiveCount")),
        ("group", letter.group),
        ("dedup id", letter.deduplication_id),
        ("what", summary(letter)),
        ("error", letter.error()),
        (
            "redrive",
            f"{'send to' if letter.dlq.redrive == 'queue' else 'invoke'} {dlqs.prefix}{letter.dlq.source}",
        ),
    ]
    write(render.fields(pairs))
    write("")
    write(json.dumps(letter.payload(), indent=2, ensure_ascii=False, default=str))
    return 0


def _redrive(dlqs: DeadLetters, args: argparse.Namespace, write: Callable[[str], None]) -> int:
    if args.all:
        outcomes = dlqs.redrive(None, name=args.dlq)
    else:
        outcomes = dlqs.redrive([args.message_id])
    if args.json:
        write(
            json.dumps(
                [
                    {
                        "id": o.letter.message_id,
                        "dlq": o.letter.dlq.name,
                        "status": o.status,
                        "detail": o.detail,
                    }
                    for o in outcomes
                ],
                indent=2,
            )
        )
    else:
        for outcome in outcomes:
            letter = outcome.letter
            write(
                f"{outcome.status} {letter.message_id} ({letter.dlq.name}, {summary(letter)}): "
                + outcome.detail
            )
        if not outcomes:
            write("no messages")
    return 1 if any(o.status != "redriven" for o in outcomes) else 0


def _as_json(letter: DeadLetter) -> Mapping[str, Any]:
    return {
        "id": letter.message_id,
        "dlq": letter.dlq.name,
        "sent": iso(letter.sent_at),
        "receives": letter.attributes.get("ApproximateReceiveCount"),
        "group": letter.group,
        "deduplication_id": letter.deduplication_id,
        "what": summary(letter),
        "error": letter.error(),
        "body": letter.payload(),
    }
