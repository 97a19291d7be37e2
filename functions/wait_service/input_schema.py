"""The graph's input JSON schema: generated where LangGraph is, read where it is not.

The api checks a run's ``input`` before it queues anything, but never imports LangGraph (its cold
start stays small). So the schema is generated ahead of time from the graph the runner runs
(``CompiledStateGraph.get_input_jsonschema()``) and shipped as a JSON file with the api:

- ``cdk synth`` writes it into the api's code asset (``infra/functions.py``);
- ``agent-wait local`` writes it before it loads the handlers;
- anything else can call :func:`write_input_schema`, or run
  ``python -m wait_service.input_schema module:attribute path/to/schema.json``.

The api finds it through ``AGENT_WAIT_INPUT_SCHEMA`` (a path); without it, any input is taken.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent_wait.errors import InputInvalidError

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.validation import SchemaValidationError

INPUT_SCHEMA_FILE = "graph_input_schema.json"


def generate_input_schema(graph_spec: str) -> dict[str, Any]:
    """The input JSON schema of the graph ``module:attribute`` (imports it, and LangGraph).

    Examples
    --------
    >>> generate_input_schema("examples.refund_agent:build_graph")["required"]  # doctest: +SKIP
    ['customer', 'amount']
    """
    from wait_service.graph import load_graph

    schema = load_graph(graph_spec, None).get_input_jsonschema()
    return dict(schema)


def write_input_schema(graph_spec: str, path: Path) -> Path:
    """Write the graph's input schema to ``path`` (JSON, stable key order); returns ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(generate_input_schema(graph_spec), indent=2, sort_keys=True) + "\n"
    # Rewrite only on change, so an asset hashed on its files keeps its hash.
    if not path.exists() or path.read_text() != text:
        path.write_text(text)
    return path


def read_input_schema(path: str | Path | None) -> dict[str, Any] | None:
    """The schema at ``path``; ``None`` when no path is configured."""
    if not path:
        return None
    loaded = json.loads(Path(path).read_text())
    if not isinstance(loaded, dict):
        raise ValueError(f"{path} does not hold a JSON schema object")
    return loaded


def check_input(input: Any, schema: dict[str, Any] | None) -> None:
    """Raise :class:`InputInvalidError` naming the field when ``input`` does not fit ``schema``.

    Examples
    --------
    >>> schema = {"type": "object", "required": ["amount"],
    ...           "properties": {"amount": {"type": "number", "exclusiveMinimum": 0}}}
    >>> check_input({"amount": 40}, schema)
    >>> check_input({"amount": -1}, schema)
    Traceback (most recent call last):
    ...
    agent_wait.errors.InputInvalidError: input.amount: must be bigger than 0
    >>> check_input({}, schema)
    Traceback (most recent call last):
    ...
    agent_wait.errors.InputInvalidError: input.amount: required
    """
    if schema is None:
        return
    # Imported at the first start checked, not in the api's init (only this route needs it).
    from aws_lambda_powertools.utilities.validation import SchemaValidationError, validate

    try:
        validate(event=input, schema=schema)
    except SchemaValidationError as exc:
        raise InputInvalidError(*_describe(exc)) from exc


def _describe(exc: SchemaValidationError) -> tuple[str, str]:
    """``(message, field)`` for a fastjsonschema failure, the field as ``input.a.b``."""
    path = [str(part) for part in (exc.path or [])]
    # fastjsonschema names the value "data" and a missing property only in its message.
    parts = path[1:] if path and path[0] == "data" else path
    field = ".".join(["input", *parts])
    message = str(exc.validation_message or exc.message or "invalid")
    if exc.rule == "required" and exc.rule_definition:
        missing = _missing(message, exc.rule_definition)
        if missing:
            return f"{field}.{missing}: required", f"{field}.{missing}"
    # "data.amount must be bigger than 0" → "must be bigger than 0"
    for prefix in (f"data.{'.'.join(parts)} ", "data "):
        if message.startswith(prefix):
            message = message[len(prefix) :]
            break
    return f"{field}: {message}", field


def _missing(message: str, required: Any) -> str | None:
    for name in required if isinstance(required, list) else []:
        if f"'{name}'" in message:
            return str(name)
    return None


def main(argv: list[str] | None = None) -> int:
    """``python -m wait_service.input_schema module:attribute out.json``."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        sys.stderr.write("usage: python -m wait_service.input_schema module:attribute path/to/schema.json\n")
        return 2
    write_input_schema(args[0], Path(args[1]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
