"""Context settings for operating the stack: tags, WAF, a customer-managed key, other accounts, alarms.

Each reader takes the raw context value and returns a checked one, or raises
:class:`~infra.runner_config.ConfigError` with one line naming the key. Values come either from
``cdk.json`` (JSON types) or from ``-c key=value`` (always text, JSON where a list or object is meant).

Examples
--------
>>> context_accounts("subscriber_accounts", "111122223333, 444455556666")
('111122223333', '444455556666')
>>> context_tags({"team": "payments"})
{'team': 'payments'}
>>> context_bool("deletion_protection", "false", default=True)
False
"""

from __future__ import annotations

import json
import re
from typing import Any

from infra.runner_config import ConfigError

# The longest name built from the stack name is the lifecycle function's, `<stack_name>-lifecycle`,
# and Lambda allows 64 characters; CloudFormation wants a letter first, then letters, digits and '-'.
LIFECYCLE_SUFFIX = "-lifecycle"
STACK_NAME_MAX = 64 - len(LIFECYCLE_SUFFIX)
_STACK_NAME = re.compile(rf"^[A-Za-z][A-Za-z0-9-]{{0,{STACK_NAME_MAX - 1}}}$")
_ACCOUNT = re.compile(r"^\d{12}$")
_WAF_ACL_ARN = re.compile(
    r"^arn:aws[a-z-]*:wafv2:[a-z0-9-]+:\d{12}:regional/webacl/[A-Za-z0-9_-]{1,128}/[0-9a-f-]{36}$"
)
# A key by its ARN (an alias cannot be granted to): a plain key id, or a multi-Region one (mrk-).
_KMS_KEY_ARN = re.compile(r"^arn:aws[a-z-]*:kms:[a-z0-9-]+:\d{12}:key/([0-9a-f-]{36}|mrk-[0-9a-f]{32})$")
_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
# Tags: the characters every service accepts (the strictest of them), 128 / 256 characters.
_TAG_TEXT = re.compile(r"^[\w .:/=+\-@]*$")
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def _blank(value: Any) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


def context_bool(key: str, value: Any, *, default: bool) -> bool:
    """``true``/``false`` (also ``1``/``0``, ``yes``/``no``, ``on``/``off``, or a JSON boolean)."""
    if _blank(value):
        return default
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ConfigError(f"context {key}={value!r}: expected true or false")


def context_stack_name(value: Any, default: str) -> str:
    """A CloudFormation stack name short enough for every resource name built from it."""
    if _blank(value):
        return default
    name = str(value).strip()
    if not _STACK_NAME.match(name):
        raise ConfigError(
            f"context stack_name={name!r}: expected a letter, then letters, digits or '-', at most "
            f"{STACK_NAME_MAX} characters (the lifecycle function is named <stack_name>{LIFECYCLE_SUFFIX}, "
            "64 characters at most)"
        )
    return name


def context_accounts(key: str, value: Any) -> tuple[str, ...]:
    """AWS account ids: a JSON list, or text of ids separated by commas or spaces."""
    if _blank(value):
        return ()
    items: Any = value
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            try:
                items = json.loads(text)
            except ValueError as exc:
                raise ConfigError(
                    f"context {key}: not JSON ({exc})", fix='a JSON list of account ids: ["111122223333"]'
                ) from exc
        else:
            items = [part for part in re.split(r"[,\s]+", text) if part]
    if not isinstance(items, list):
        raise ConfigError(f'context {key}: expected a list of 12-digit account ids, e.g. ["111122223333"]')
    accounts: list[str] = []
    for item in items:
        account = str(item).strip()
        if not _ACCOUNT.match(account):
            raise ConfigError(
                f"context {key}: {item!r} is not a 12-digit AWS account id",
                fix="list 12-digit account ids, as a JSON list or separated by commas",
            )
        if account not in accounts:
            accounts.append(account)
    return tuple(accounts)


def context_tags(value: Any) -> dict[str, str]:
    """``tags``: a JSON object of tag keys to values, applied to every resource of the stack."""
    if _blank(value):
        return {}
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError as exc:
            raise ConfigError(f"context tags: not JSON ({exc})", fix='JSON {"key": "value"}') from exc
    if not isinstance(value, dict):
        raise ConfigError('context tags: expected a JSON object {"key": "value"}')
    tags: dict[str, str] = {}
    for key, text in value.items():
        if not isinstance(key, str) or not 1 <= len(key) <= 128 or not _TAG_TEXT.match(key):
            raise ConfigError(
                f"context tags: key {key!r} must be 1-128 of letters, digits, spaces and _.:/=+-@"
            )
        if key.lower().startswith("aws:"):
            raise ConfigError(
                f"context tags: key {key!r} uses the reserved prefix aws:", fix="choose another tag key"
            )
        if not isinstance(text, str) or len(text) > 256 or not _TAG_TEXT.match(text):
            raise ConfigError(
                f"context tags[{key!r}]={text!r}: expected text of at most 256 letters, digits, "
                "spaces and _.:/=+-@"
            )
        tags[key] = text
    return tags


def context_arn(key: str, value: Any, kind: str) -> str | None:
    """An ARN of ``kind`` (``waf_acl``, ``kms_key``), checked by its shape."""
    if _blank(value):
        return None
    arn = str(value).strip()
    pattern, example = {
        "waf_acl": (_WAF_ACL_ARN, "arn:aws:wafv2:<region>:<account>:regional/webacl/<name>/<id>"),
        "kms_key": (_KMS_KEY_ARN, "arn:aws:kms:<region>:<account>:key/<key id>"),
    }[kind]
    if not pattern.match(arn):
        raise ConfigError(f"context {key}={arn!r}: expected {example}")
    return arn


def context_choice(key: str, value: Any, choices: tuple[str, ...], *, default: str) -> str:
    """One of ``choices`` (any case; ``default`` when unset), as ``choices`` spells it.

    Examples
    --------
    >>> context_choice("lambda_system_log_level", "warn", ("DEBUG", "INFO", "WARN"), default="INFO")
    'WARN'
    """
    if _blank(value):
        return default
    text = str(value).strip().upper()
    for choice in choices:
        if text == choice.upper():
            return choice
    raise ConfigError(f"context {key}={value!r}: expected one of {', '.join(choices)}")


def context_email(key: str, value: Any) -> str | None:
    """An email address (``alarm_email``)."""
    if _blank(value):
        return None
    email = str(value).strip()
    if not _EMAIL.match(email):
        raise ConfigError(f"context {key}={email!r}: expected an email address")
    return email
