"""The runner's secrets: values read from Secrets Manager into its environment before the graph is built.

The deployment names them (context ``runner_secrets``: ``{"ENV_NAME": "<secret ARN>"}``) and the
runner gets the mapping in ``AGENT_WAIT_RUNNER_SECRETS``: names and ARNs only, so no value is ever
in the template or the function's configuration. At init the runner reads each secret with
Powertools Parameters (cached) and sets ``ENV_NAME`` to its value, so a graph reads
``os.environ["OPENAI_API_KEY"]`` like anywhere else.

Examples
--------
>>> environ: dict[str, str] = {}
>>> export_secrets({"API_KEY": "arn:aws:secretsmanager:eu-west-1:1:secret:k"}, environ,
...                get=lambda arn: "s3cr3t")
['API_KEY']
>>> environ
{'API_KEY': 's3cr3t'}
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, MutableMapping

# How long Powertools keeps a value before reading it again (the runner reads each once per
# execution environment, at init).
SECRET_MAX_AGE_SECONDS = 300


class SecretUnavailableError(RuntimeError):
    """A secret named in ``AGENT_WAIT_RUNNER_SECRETS`` cannot be put in the environment."""


def secret_getter(*, client: Any = None, max_age: int = SECRET_MAX_AGE_SECONDS) -> Callable[[str], Any]:
    """A function reading a secret's value with Powertools Parameters (cached ``max_age`` seconds).

    ``client``: a ``secretsmanager`` boto3 client (tests pass a stubbed one); ``None``: Powertools'
    own default provider (``parameters.get_secret``).
    """
    from aws_lambda_powertools.utilities import parameters

    if client is None:
        return lambda arn: parameters.get_secret(arn, max_age=max_age)
    provider = parameters.SecretsProvider(boto3_client=client)
    return lambda arn: provider.get(arn, max_age=max_age)


def export_secrets(
    secrets: Mapping[str, str],
    environ: MutableMapping[str, str],
    *,
    get: Callable[[str], Any] | None = None,
) -> list[str]:
    """Set ``environ[name]`` to the value of each secret in ``secrets`` (name → ARN); return the names.

    A binary secret is decoded as UTF-8. Any failure raises :class:`SecretUnavailableError` naming
    the variable and the ARN (never a value): the runner fails its init rather than run a graph
    without its credentials. With no secrets configured, Powertools Parameters is not even imported.
    """
    exported: list[str] = []
    if not secrets:
        return exported
    read = get or secret_getter()
    for name, arn in sorted(secrets.items()):
        try:
            value = read(arn)
            if isinstance(value, bytes):
                value = value.decode("utf-8")
        except Exception as exc:
            raise SecretUnavailableError(
                f"runner secret {name}: cannot read {arn} ({type(exc).__name__}: {exc})"
            ) from exc
        if not isinstance(value, str):
            raise SecretUnavailableError(f"runner secret {name}: {arn} holds no string value")
        environ[name] = value
        exported.append(name)
    return exported
