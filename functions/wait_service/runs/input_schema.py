"""The graph's input JSON schema: generated where LangGraph is, read where it is not.

The api checks a run's ``input`` before it queues anything, but never imports LangGraph (its cold
start stays small). So the schema is generated ahead of time from the graph the runner runs
(``CompiledStateGraph.get_input_jsonschema()``) and shipped as a JSON file with the api:

- ``cdk synth`` writes it into the api's code asset (``infra/functions.py``);
- ``agent-wait local`` writes it before it loads the handlers;
- anything else can call :func:`write_input_schema`, or run
  ``python -m wait_service.runs.input_schema module:attribute path/to/schema.json``.

The api finds it through ``AGENT_WAIT_INPUT_SCHEMA`` (a path); without it, any input is taken.

A state declared with ``typing.TypedDict`` cannot be given to pydantic before Python 3.12 (it asks
for ``typing_extensions.TypedDict``), and the build host may run 3.11 while Lambda runs 3.13. The
schema is then built from an equivalent ``typing_extensions.TypedDict``; where even that fails, the
file holds ``null``, one warning line says why, and starts are not checked (any input is run).
"""

from __future__ import annotations

import json
import sys
import typing
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent_wait.errors import InputInvalidError

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.validation import SchemaValidationError

INPUT_SCHEMA_FILE = "graph_input_schema.json"


def graph_input_schema(graph: Any) -> tuple[dict[str, Any] | None, str | None]:
    """``(schema, None)`` for a graph's input JSON schema, or ``(None, why)`` when none can be built.

    ``graph.get_input_jsonschema()`` first; when it fails on a ``typing.TypedDict`` state (pydantic
    before Python 3.12), the same schema from the state rebuilt as ``typing_extensions.TypedDict``.
    ``why`` is one line fit for a warning; a graph without ``get_input_jsonschema`` has no schema
    and no reason to warn (``(None, None)``).
    """
    get_schema = getattr(graph, "get_input_jsonschema", None)
    if get_schema is None:
        return None, None
    try:
        return dict(get_schema()), None
    except Exception as exc:
        first = exc
    state = getattr(getattr(graph, "builder", None), "input_schema", None)
    if state is not None and typing.is_typeddict(state):
        try:
            from pydantic import TypeAdapter

            return dict(TypeAdapter(_portable(state, {})).json_schema()), None
        except Exception as exc:
            first = exc
    return None, f"{type(first).__name__}: {_first_line(first)}"


def _portable(tp: Any, seen: dict[int, Any]) -> Any:
    """``tp`` with every ``typing.TypedDict`` in it rebuilt as a ``typing_extensions.TypedDict``.

    Pydantic refuses ``typing.TypedDict`` before Python 3.12; the rebuilt class has the same name,
    docstring, fields, required keys and annotations (``Annotated`` metadata kept), so its schema
    is the one pydantic builds for the original on 3.12+.
    """
    if typing.is_typeddict(tp):
        if id(tp) in seen:
            return seen[id(tp)]
        import typing_extensions

        if type(tp).__module__ == "typing_extensions":
            return tp
        hints = typing.get_type_hints(tp, include_extras=True)
        required = getattr(tp, "__required_keys__", frozenset(hints))
        fields: dict[str, Any] = {}
        for name, hint in hints.items():
            # As pydantic reads them: an explicit Required/NotRequired wins over __required_keys__
            # (which misses them under postponed annotations before 3.12).
            needed = name in required
            while typing.get_origin(hint) in (typing_extensions.Required, typing_extensions.NotRequired):
                needed = typing.get_origin(hint) is typing_extensions.Required
                hint = typing.get_args(hint)[0]
            hint = _portable(hint, seen)
            fields[name] = hint if needed else typing_extensions.NotRequired[hint]
        rebuilt = typing_extensions.TypedDict(tp.__name__, fields)  # type: ignore[misc]
        rebuilt.__doc__ = tp.__doc__
        rebuilt.__module__ = tp.__module__
        seen[id(tp)] = rebuilt
        return rebuilt
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is None or not args:
        return tp
    if origin is typing.Annotated:
        inner = _portable(args[0], seen)
        return tp if inner is args[0] else typing.Annotated[(inner, *tp.__metadata__)]
    if origin is typing.Literal:
        return tp
    portable = tuple(_portable(arg, seen) for arg in args)
    if all(new is old for new, old in zip(portable, args, strict=True)):
        return tp
    if origin is typing.Union or type(tp).__name__ == "UnionType":
        return typing.Union[portable]  # noqa: UP007 (built from a tuple)
    return origin[portable if len(portable) > 1 else portable[0]]


def _first_line(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else ""
    return text[:300]


def generate_input_schema(graph_spec: str, *, framework: str | None = None) -> dict[str, Any] | None:
    """The input JSON schema of the graph ``module:attribute`` (imports it, and LangGraph).

    ``None`` (after one warning line naming why) when no schema can be built on this Python:
    starts are then not checked, rather than the stack refusing to start.

    Examples
    --------
    >>> generate_input_schema("examples.refund_agent:build_graph")["required"]  # doctest: +SKIP
    ['customer', 'amount']
    """
    from wait_service.runs.graph import load_graph

    schema, why = graph_input_schema(load_graph(graph_spec, None, framework=framework))
    if why is not None:
        warn_unchecked(graph_spec, why)
    return schema


def warn_unchecked(graph_spec: str, why: str) -> None:
    """The one warning line for a graph whose input schema cannot be built here."""
    sys.stderr.write(
        f"warning: the input schema of {graph_spec} cannot be built on Python "
        f"{sys.version_info.major}.{sys.version_info.minor} ({why}); run input is not checked\n"
    )


def write_input_schema(graph_spec: str, path: Path, *, framework: str | None = None) -> Path:
    """Write the graph's input schema to ``path`` (JSON, stable key order); returns ``path``.

    ``framework`` (``None``: detected) is checked against the object (``wait_service.runs.graph``).

    ``null`` when no schema can be built (:func:`generate_input_schema`): any input is taken.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(generate_input_schema(graph_spec, framework=framework), indent=2, sort_keys=True) + "\n"
    # Rewrite only on change, so an asset hashed on its files keeps its hash.
    if not path.exists() or path.read_text() != text:
        path.write_text(text)
    return path


def read_input_schema(path: str | Path | None) -> dict[str, Any] | None:
    """The schema at ``path``; ``None`` when no path is configured or the file holds ``null``."""
    if not path:
        return None
    loaded = json.loads(Path(path).read_text())
    if loaded is None:
        return None
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
    """``python -m wait_service.runs.input_schema module:attribute out.json``."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        sys.stderr.write(
            "usage: python -m wait_service.runs.input_schema module:attribute path/to/schema.json\n"
        )
        return 2
    write_input_schema(args[0], Path(args[1]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
