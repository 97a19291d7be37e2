"""Where the local stack imports the user's graph from, and errors that say what is wrong.

Deployed, the runner's code asset holds the graph source's contents at its root (``-c
graph_source=DIR``), and Lambda puts that root first on ``sys.path``. Locally, ``agent-wait local
--graph my_agent.graph:build_graph --graph-source DIR`` does the same: ``DIR`` goes first on
``sys.path``, then the current directory, so an agent in the folder you run from imports too. The
agent's own requirements are not installed for you: ``pip install -r DIR/requirements.txt`` into
the environment ``agent-wait`` runs in, as ``graph_requirements`` installs them into the graph
layer when deployed.

:func:`check_graph` imports the graph before anything else uses it, so a wrong ``--graph`` or
``--graph-source`` ends with one sentence (the module and the folders searched, or the missing
attribute) rather than a traceback from deep inside a handler.

Examples
--------
>>> try:
...     check_graph("nowhere_module:build", [Path("/srv/agents")])
... except GraphSourceError as exc:
...     print(str(exc)[:70])
--graph nowhere_module:build: no module named 'nowhere_module' in /srv
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Any

__all__ = ["GraphSourceError", "check_graph", "put_first", "resolve_graph_source"]


class GraphSourceError(ValueError):
    """``--graph`` or ``--graph-source`` names nothing usable; the message says what and where."""


def resolve_graph_source(value: str | Path | None) -> Path | None:
    """``--graph-source`` as an absolute folder; :class:`GraphSourceError` when it is not one.

    Examples
    --------
    >>> resolve_graph_source(None) is None
    True
    >>> resolve_graph_source("/no/such/folder")
    Traceback (most recent call last):
    ...
    agent_wait_cli.local.graph_source.GraphSourceError: --graph-source /no/such/folder: no such directory
    """
    if value is None:
        return None
    path = Path(value).expanduser()
    if not path.is_dir():
        what = "not a directory" if path.exists() else "no such directory"
        raise GraphSourceError(f"--graph-source {value}: {what}")
    return path.resolve()


def check_graph(spec: str, searched: list[Path]) -> Any:
    """Import ``module:attribute`` as the runner will and return the attribute.

    ``searched`` are the folders put first on ``sys.path`` (named in the error when the module is
    not found there).

    Raises
    ------
    GraphSourceError
        The spec is malformed, its module is not found, a module it imports is missing (the
        agent's requirements are not installed), importing it raises, or the attribute is missing.
    """
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise GraphSourceError(f"--graph {spec}: expected module:attribute")
    # The folders may have been written since the interpreter last listed them.
    importlib.invalidate_caches()
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        missing = exc.name or ""
        folders = ", ".join(str(folder) for folder in searched) or "(none)"
        if missing and (module_name == missing or module_name.startswith(missing + ".")):
            raise GraphSourceError(
                f"--graph {spec}: no module named {missing!r} in {folders} "
                "(nor in the environment's packages); pass --graph-source DIR with the folder "
                f"that holds {module_name.split('.')[0]}/"
            ) from exc
        raise GraphSourceError(
            f"--graph {spec}: importing {module_name!r} needs {missing!r}, which is not installed: "
            "install the agent's requirements into this environment "
            "(pip install -r <graph source>/requirements.txt)"
        ) from exc
    except Exception as exc:
        raise GraphSourceError(
            f"--graph {spec}: importing {module_name!r} raised {type(exc).__name__}: {exc}"
        ) from exc
    try:
        return getattr(module, attribute)
    except AttributeError as exc:
        where = getattr(module, "__file__", None) or module_name
        raise GraphSourceError(f"--graph {spec}: {where} has no attribute {attribute!r}") from exc


def put_first(folders: list[Path]) -> None:
    """Put ``folders`` at the front of ``sys.path``, in order (moved there if already listed)."""
    for folder in reversed(folders):
        entry = str(folder)
        while entry in sys.path:
            sys.path.remove(entry)
        sys.path.insert(0, entry)
