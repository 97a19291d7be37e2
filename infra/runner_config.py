"""The runner's "bring your own agent" settings, read from CDK context and checked before anything is built.

A team deploys its own graph without editing the project: ``graph_source`` (a folder bundled at the
root of the runner's code), ``graph_requirements`` (a requirements file installed into the graph
layer), ``runner_policy`` (IAM statements for the runner's role), ``runner_environment`` and
``runner_secrets`` (the runner's environment, secrets read at init), ``runner_memory`` and
``runner_timeout``. Every error is a :class:`~infra.config.ConfigError` whose message names the key.

Pure Python (no ``aws_cdk``): the constructs turn these values into resources (``infra/functions.py``).

Examples
--------
>>> runner_environment('{"MODEL_ID": "anthropic.claude"}')
{'MODEL_ID': 'anthropic.claude'}
>>> secret_grant("arn:aws:secretsmanager:eu-west-1:123456789012:secret:openai")
'arn:aws:secretsmanager:eu-west-1:123456789012:secret:openai-??????'
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from infra.constants import REPO_ROOT
from infra.errors import ConfigError as ConfigError  # re-exported: infra.config and constructs use it

# Lambda's own variables (it refuses to deploy a function that sets them) and ours.
RESERVED_PREFIXES: tuple[str, ...] = ("AWS_", "LAMBDA_", "_AWS_", "AGENT_WAIT_", "POWERTOOLS_")
RESERVED_NAMES: frozenset[str] = frozenset({"_HANDLER", "_X_AMZN_TRACE_ID", "TZ", "LOG_LEVEL"})
# Lambda: a key starts with a letter and holds letters, digits and underscores.
_ENV_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
# arn:aws:secretsmanager:<region>:<account>:secret:<name>, the name with or without its suffix.
_SECRET_ARN = re.compile(r"^arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:\d{12}:secret:[A-Za-z0-9/_+=.@-]+$")
# Secrets Manager appends "-" and six random characters to a secret's name in its full ARN.
_SECRET_SUFFIX = re.compile(r"-[A-Za-z0-9]{6}$")

RUNNER_MEMORY_RANGE = (128, 10240)  # MB, Lambda's limits
RUNNER_TIMEOUT_RANGE = (1, 900)  # seconds, Lambda's limits


@dataclass(frozen=True)
class RunnerPolicy:
    """The statements of a ``runner_policy`` file and the cdk-nag findings its author acknowledges.

    ``acknowledgements`` are ``(rule id, reason)`` pairs, e.g. ``("AwsSolutions-IAM5", "...")``
    or a single finding ``("AwsSolutions-IAM5[Resource::*]", "...")``.
    """

    path: Path
    statements: tuple[dict[str, Any], ...]
    acknowledgements: tuple[tuple[str, str], ...] = ()


def context_path(key: str, value: Any, *, folder: bool) -> Path | None:
    """``value`` as an existing file (or folder); relative paths are relative to the project root."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if not isinstance(value, str):
        raise ConfigError(f"context {key}: expected a path, got {json.dumps(value)}")
    path = (REPO_ROOT / Path(value.strip()).expanduser()).resolve()
    kind = "folder" if folder else "file"
    if not (path.is_dir() if folder else path.is_file()):
        raise ConfigError(
            f"context {key}: {kind} {path} not found",
            fix=f"set {key} to an existing {kind}, absolute or relative to {REPO_ROOT}",
        )
    return path


def context_json(key: str, value: Any, expected: str) -> Any:
    """``value`` from ``cdk.json`` as it is, or parsed from the JSON text ``-c key=...`` gives."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError as exc:
            raise ConfigError(f"context {key}: not JSON ({exc}); expected {expected}") from exc
    return value


def context_int(key: str, value: Any, default: int, bounds: tuple[int, int], unit: str) -> int:
    """An integer within ``bounds`` (inclusive), or ``default`` when unset."""
    if value is None or str(value).strip() == "":
        return default
    text = str(value).strip()
    low, high = bounds
    if not text.isdigit() or not low <= int(text) <= high:
        raise ConfigError(f"context {key}={text!r}: expected a whole number of {unit} from {low} to {high}")
    return int(text)


def _check_env_name(key: str, name: Any) -> str:
    if not isinstance(name, str) or not name:
        raise ConfigError(f"context {key}: variable name {name!r} is not a string")
    if name in RESERVED_NAMES or name.startswith(RESERVED_PREFIXES):
        raise ConfigError(
            f"context {key}: {name} is reserved (Lambda's own variables, AWS_*, LAMBDA_*, _HANDLER, TZ, and "
            "the runner's AGENT_WAIT_*, POWERTOOLS_*, LOG_LEVEL); choose another name"
        )
    if not _ENV_NAME.match(name):
        raise ConfigError(
            f"context {key}: variable name {name!r} must start with a letter and hold only letters, digits "
            "and underscores"
        )
    return name


def runner_environment(value: Any) -> dict[str, str]:
    """``runner_environment``: ``{"NAME": "value"}`` (string values, no reserved names)."""
    value = context_json("runner_environment", value, '{"NAME": "value"}')
    if value is None or value == "":
        return {}
    if not isinstance(value, dict):
        raise ConfigError('context runner_environment: expected a JSON object {"NAME": "value"}')
    environment: dict[str, str] = {}
    for name, text in value.items():
        _check_env_name("runner_environment", name)
        if not isinstance(text, str):
            raise ConfigError(
                f"context runner_environment: {name} must be a string, got {json.dumps(text)} "
                '(quote it: "1", "true")'
            )
        environment[name] = text
    return environment


def runner_secrets(value: Any) -> dict[str, str]:
    """``runner_secrets``: ``{"ENV_NAME": "<Secrets Manager secret ARN>"}``."""
    value = context_json("runner_secrets", value, '{"ENV_NAME": "<secret ARN>"}')
    if value is None or value == "":
        return {}
    if not isinstance(value, dict):
        raise ConfigError('context runner_secrets: expected a JSON object {"ENV_NAME": "<secret ARN>"}')
    secrets: dict[str, str] = {}
    for name, arn in value.items():
        _check_env_name("runner_secrets", name)
        if not isinstance(arn, str) or not _SECRET_ARN.match(arn):
            raise ConfigError(
                f"context runner_secrets: {name}={json.dumps(arn)} is not a Secrets Manager secret ARN",
                fix="its full ARN, arn:aws:secretsmanager:<region>:<account>:secret:<name>-<6 characters>",
            )
        secrets[name] = arn
    return secrets


def secret_grant(arn: str) -> str:
    """The IAM resource that lets the runner read exactly the secret ``arn`` names.

    A full ARN (its name ends in ``-`` and the six characters Secrets Manager appends) is granted
    as it is. A partial ARN (the secret's name without that suffix) is granted as ``<arn>-??????``:
    ``?`` matches exactly one character, so only that name with its suffix matches, never a
    longer name that starts the same. A name that itself ends in a hyphen and six letters or
    digits cannot be told from a full ARN: give such a secret's full ARN.

    Examples
    --------
    >>> secret_grant("arn:aws:secretsmanager:eu-west-1:123456789012:secret:prod/openai-AbC123")
    'arn:aws:secretsmanager:eu-west-1:123456789012:secret:prod/openai-AbC123'
    """
    return arn if _SECRET_SUFFIX.search(arn) else f"{arn}-??????"


def runner_policy(value: Any) -> RunnerPolicy | None:
    """``runner_policy``: a JSON file ``{"Statement": [...], "acknowledge": [{"id", "reason"}]}``."""
    if isinstance(value, dict | list):
        raise ConfigError("context runner_policy: expected the path of a JSON file, not the policy itself")
    path = context_path("runner_policy", value, folder=False)
    if path is None:
        return None
    where = f"context runner_policy: {path}"
    try:
        document = json.loads(path.read_text())
    except ValueError as exc:
        raise ConfigError(
            f"{where}: not JSON ({exc})", fix='a JSON object {"Statement": [...], "acknowledge": [...]}'
        ) from exc
    if not isinstance(document, dict):
        raise ConfigError(f'{where}: expected {{"Statement": [...]}}')
    unknown = sorted(set(document) - {"Version", "Statement", "acknowledge"})
    if unknown:
        raise ConfigError(f"{where}: unknown field(s) {', '.join(unknown)} (expected Statement, acknowledge)")
    statements = document.get("Statement")
    if isinstance(statements, dict):
        statements = [statements]
    if not isinstance(statements, list) or not statements:
        raise ConfigError(f"{where}: Statement must be a non-empty list of statements")
    for index, statement in enumerate(statements):
        if not isinstance(statement, dict):
            raise ConfigError(f"{where}: Statement[{index}] is not an object")
        if "Principal" in statement or "NotPrincipal" in statement:
            raise ConfigError(
                f"{where}: Statement[{index}] names a Principal (the runner's role is the principal)"
            )
        if not ({"Action", "NotAction"} & set(statement)) or not (
            {"Resource", "NotResource"} & set(statement)
        ):
            raise ConfigError(f"{where}: Statement[{index}] needs an Action and a Resource")
    acknowledgements: list[tuple[str, str]] = []
    entries = document.get("acknowledge", [])
    if not isinstance(entries, list):
        raise ConfigError(f'{where}: acknowledge must be a list of {{"id": ..., "reason": ...}}')
    for index, entry in enumerate(entries):
        rule = entry.get("id") if isinstance(entry, dict) else None
        reason = entry.get("reason") if isinstance(entry, dict) else None
        if not isinstance(rule, str) or not rule.strip():
            raise ConfigError(f'{where}: acknowledge[{index}] needs an "id" (e.g. "AwsSolutions-IAM5")')
        if not isinstance(reason, str) or not reason.strip():
            raise ConfigError(f'{where}: acknowledge[{index}] ({rule}) needs a "reason"')
        acknowledgements.append((rule.strip(), reason.strip()))
    return RunnerPolicy(path, tuple(statements), tuple(acknowledgements))


def wildcard_findings(statements: tuple[dict[str, Any], ...]) -> list[str]:
    """The ids of cdk-nag's ``AwsSolutions-IAM5`` findings on ``statements``: one per wildcard.

    Examples
    --------
    >>> wildcard_findings(({"Action": "s3:Get*", "Resource": ["arn:aws:s3:::b/*", "arn:aws:s3:::b"]},))
    ['AwsSolutions-IAM5[Action::s3:Get*]', 'AwsSolutions-IAM5[Resource::arn:aws:s3:::b/*]']
    """
    findings: list[str] = []
    for statement in statements:
        for field, kind in (("Action", "Action"), ("NotAction", "Action"), ("Resource", "Resource")):
            values = statement.get(field, [])
            for value in [values] if isinstance(values, str) else values:
                finding = f"AwsSolutions-IAM5[{kind}::{value}]"
                if isinstance(value, str) and "*" in value and finding not in findings:
                    findings.append(finding)
    return findings


def acknowledged_findings(policy: RunnerPolicy) -> list[tuple[str, str]]:
    """``(finding id, reason)`` for each acknowledgement; a bare rule id covers each of its findings.

    CDK's validations match a finding by its exact id (``AwsSolutions-IAM5[Resource::...]``), so a
    file acknowledging ``AwsSolutions-IAM5`` acknowledges every wildcard of its own statements.
    """
    findings = wildcard_findings(policy.statements)
    expanded: list[tuple[str, str]] = []
    for rule, reason in policy.acknowledgements:
        expanded.append((rule, reason))
        if "[" not in rule:
            expanded += [(finding, reason) for finding in findings if finding.startswith(f"{rule}[")]
    return expanded


def check_names_apart(environment: dict[str, str], secrets: dict[str, str]) -> None:
    """A name is set by ``runner_environment`` or filled from ``runner_secrets``, never both."""
    both = sorted(set(environment) & set(secrets))
    if both:
        raise ConfigError(
            f"context runner_environment and runner_secrets both set {', '.join(both)}; keep each name in one"
        )
