"""``agent-wait policies list | show NAME | set NAME --file F | diff NAME --file F``: the policy store.

The commands go straight to the store's table with your AWS credentials, as ``agent-wait dlq``
does with the queues: the stack's operator policy (output ``OperatorPolicyArn``) grants the
reads and the conditional write, and CloudTrail records who called. The table is found from the
stack's output ``PolicyTableName`` (``--table`` names it directly); with ``--endpoint-url`` the
commands go to the local stack's moto server, where the table is ``<stack>-policies``.

A rejected override is reported as the api reports a rejected body: ``422 invalid_policy``,
naming the field; a set that lost to another set of the same version: ``409 policy_conflict``.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from agent_wait_cli import render
from agent_wait_cli.client import (
    ApiError,
    UsageError,
    aws_errors,
    local_stack_clients,
)
from wait_service.answers.policy_store import (
    PolicyConflictError,
    PolicyInvalidError,
    PolicyStore,
    StoredPolicy,
    check_override,
)

if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable

# The stack output that names the table (infra.stack).
TABLE_OUTPUT = "PolicyTableName"


def policy_store(args: argparse.Namespace) -> tuple[PolicyStore, Callable[[], str]]:
    """The store, on AWS or (``--endpoint-url``) on the local stack, and who is setting."""
    try:
        import boto3
    except ImportError:
        raise UsageError("agent-wait policies needs boto3: pip install 'agent-wait[aws]'") from None
    endpoint = args.endpoint_url
    if endpoint is not None:
        local = local_stack_clients(endpoint, args.region)
        sts = boto3.client("sts", **local)
        table = args.table or f"{args.stack}-policies"
        return PolicyStore(table, boto3.client("dynamodb", **local)), lambda: sts.get_caller_identity()["Arn"]
    session = boto3.session.Session(region_name=args.region)
    if session.region_name is None:
        raise UsageError("cannot tell the stack's region; pass --region or set AWS_REGION")
    table = args.table or _table_of_stack(session.client("cloudformation"), args.stack)
    sts = session.client("sts")
    return PolicyStore(table, session.client("dynamodb")), lambda: sts.get_caller_identity()["Arn"]


def _table_of_stack(cloudformation: Any, stack: str) -> str:
    outputs = cloudformation.describe_stacks(StackName=stack)["Stacks"][0].get("Outputs") or []
    for output in outputs:
        if output.get("OutputKey") == TABLE_OUTPUT:
            return str(output["OutputValue"])
    raise UsageError(f"stack {stack} has no output {TABLE_OUTPUT}: deploy this version, or pass --table")


def run_policies(
    args: argparse.Namespace,
    out: TextIO,
    *,
    store: PolicyStore | None = None,
    now: Callable[[], datetime] | None = None,
) -> int:
    """Run ``policies list | show | set | diff``; AWS errors become one-line :class:`CliError`."""

    def write(text: str) -> None:
        out.write(text + "\n")
        out.flush()

    with aws_errors("DynamoDB"):
        try:
            who: Callable[[], str]
            if store is None:
                store, who = policy_store(args)
            else:
                who = lambda: "local"  # noqa: E731
            if args.action == "list":
                return _list(store, args, write)
            if args.action == "show":
                return _show(store, args, write)
            if args.action == "diff":
                return _diff(store, args, write)
            return _set(store, args, write, who, now or (lambda: datetime.now(UTC)))
        except (PolicyInvalidError, PolicyConflictError) as exc:
            from wait_service.http.errors_http import error_body, status_for

            body = error_body(exc)
            if isinstance(exc, PolicyConflictError):
                body["current_version"] = exc.current_version
            raise ApiError(status_for(exc), body) from None


def _read_file(path: str) -> Any:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ApiError(
            422, {"error": "invalid_policy", "message": f"{path} is not JSON: {exc}", "field": "policy"}
        ) from None


def _current(store: PolicyStore, name: str) -> StoredPolicy:
    current = store.current(name, consistent=True)
    if current is None:
        raise ApiError(404, {"error": "policy_not_found", "message": f"{name} has no policy override"})
    return current


def _list(store: PolicyStore, args: argparse.Namespace, write: Callable[[str], None]) -> int:
    policies = store.list()
    if args.json:
        write(json.dumps([p.to_json() for p in policies], indent=2))
        return 0
    if not policies:
        write("no policy overrides")
        return 0
    write(
        render.table(
            ["FUNCTION", "VERSION", "SET BY", "SET AT", "OVERRIDES"],
            [
                [p.function, p.version, p.set_by, p.set_at, ", ".join(sorted(p.policy)) or "-"]
                for p in policies
            ],
        )
    )
    return 0


def _show(store: PolicyStore, args: argparse.Namespace, write: Callable[[str], None]) -> int:
    current = _current(store, args.name)
    if args.json:
        write(json.dumps(current.to_json(), indent=2))
        return 0
    write(
        render.fields(
            [
                ("function", current.function),
                ("version", current.version),
                ("set by", current.set_by),
                ("set at", current.set_at),
            ]
        )
    )
    write("")
    write(json.dumps(current.policy, indent=2, sort_keys=True))
    return 0


def _diff(store: PolicyStore, args: argparse.Namespace, write: Callable[[str], None]) -> int:
    import jsonpatch

    wanted = check_override(_read_file(args.file))
    current = store.current(args.name, consistent=True)
    before = current.policy if current is not None else {}
    patch = jsonpatch.make_patch(before, wanted)
    if args.json:
        write(json.dumps({"version": current.version if current else 0, "patch": patch.patch}, indent=2))
    else:
        write(f"--- {args.name} version {current.version if current else 0}")
        write(f"+++ {args.file}")
        for operation in patch.patch:
            write(json.dumps(operation, sort_keys=True))
        if not patch.patch:
            write("no changes")
    # As diff(1): 1 when they differ.
    return 1 if patch.patch else 0


def _set(
    store: PolicyStore,
    args: argparse.Namespace,
    write: Callable[[str], None],
    who: Callable[[], str],
    now: Callable[[], datetime],
) -> int:
    override = _read_file(args.file)
    check_override(override)
    stored = store.set(
        args.name,
        override,
        set_by=who(),
        set_at=now().astimezone(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z"),
        expected_version=args.if_version,
    )
    if args.json:
        write(json.dumps(stored.to_json(), indent=2))
    else:
        write(f"set {stored.function} version {stored.version} (by {stored.set_by})")
    return 0
