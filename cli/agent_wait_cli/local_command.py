"""``agent-wait local``: run the local stack in the foreground until Ctrl-C or SIGTERM."""

from __future__ import annotations

import importlib.util
import os
import signal
import tempfile
import threading
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    import argparse


def run_local(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Start the stack, print ``API: <url>`` once it serves, then one line per event.

    Everything runs in this process (moto, gateway, poller are threads) and all state is in its
    memory, so stopping it leaves nothing behind: SIGINT and SIGTERM both stop serving, let the
    batch in hand finish, and exit 0. The handlers' logs and any traceback go to the log file
    named at start (``--log-file``, else a new file in the temp folder), not between the events.
    """
    module, sep, attribute = args.graph.partition(":")
    if not sep or not module or not attribute:
        err.write(f"agent-wait: --graph must be module:attribute, got {args.graph!r}\n")
        return 2
    project = _project(args.project)
    if not (project / "functions" / "api" / "handler.py").is_file():
        err.write(f"agent-wait: {project} has no functions/api/handler.py; pass --project\n")
        return 2
    try:
        from agent_wait_cli.local.graph_source import GraphSourceError, resolve_graph_source
        from agent_wait_cli.local.stack import LocalStack, StackConfig
    except ImportError as exc:
        err.write(f"agent-wait: {exc}\n")
        return 2
    checkpointer = getattr(args, "checkpointer", "aws")
    if checkpointer == "dynamodb" and importlib.util.find_spec("langgraph_checkpoint_dynamodb") is None:
        err.write(
            "agent-wait: --checkpointer dynamodb needs langgraph-checkpoint-dynamodb: "
            "pip install 'agent-wait[checkpoint-dynamodb]'\n"
        )
        return 2
    try:
        graph_source = resolve_graph_source(args.graph_source)
    except GraphSourceError as exc:
        err.write(f"agent-wait: {exc}\n")
        return 2

    # Metrics are disabled locally; Powertools still warns that there were none to publish.
    warnings.filterwarnings("ignore", message="No application metrics to publish")
    stop = threading.Event()

    def request_stop(signum: int, frame: Any) -> None:
        stop.set()

    # Installed before starting, so a signal during start-up stops the stack right after it.
    previous = {sig: signal.signal(sig, request_stop) for sig in (signal.SIGINT, signal.SIGTERM)}

    def write(line: str) -> None:
        out.write(line + "\n")
        out.flush()

    if args.log_file:
        log_path = Path(args.log_file).resolve()
    else:
        handle, name = tempfile.mkstemp(prefix="agent-wait-local-", suffix=".log")
        os.close(handle)
        log_path = Path(name)

    stack = LocalStack(
        StackConfig(
            project=project,
            graph=args.graph,
            framework=getattr(args, "framework", None),
            port=args.port,
            moto_port=args.moto_port,
            hmac_keys=dict(args.hmac_key),
            log_level=args.log_level,
            slack_api=args.slack_api,
            slack_signing_secret=args.slack_signing_secret,
            slack_channel=args.slack_channel,
            inbox_visibility=args.inbox_visibility,
            log_path=log_path,
            checkpointer=checkpointer,
            listing_shards=getattr(args, "listing_shards", 1),
            graph_source=graph_source,
            archive_dir=Path(args.archive_dir) if args.archive_dir else None,
            webhooks=list(getattr(args, "webhook", [])),
        ),
        write=write,
    )
    try:
        try:
            stack.start()
        except GraphSourceError as exc:
            err.write(f"agent-wait: {exc}\n")
            return 2
        except OSError as exc:
            err.write(f"agent-wait: cannot start the local stack: {exc} (is --port {args.port} free?)\n")
            return 1
        except Exception as exc:
            err.write(f"agent-wait: cannot start the local stack: {type(exc).__name__}: {exc}\n")
            return 1
        resources = stack.resources
        write(f"log: {log_path} (handler logs and tracebacks)")
        write("state: in memory (threads, questions and checkpoints end with this process)")
        write(f"moto: {stack.moto.endpoint}")
        if stack.lambda_endpoint is not None:
            url = stack.lambda_endpoint.url
            write(f"lambda: {url} (the dispatcher's Invoke API, for agent-wait dlq --lambda-endpoint-url)")
        write(f"outbox queue: {resources.outbox_url}")
        write(f"subscriber queue: {resources.subscriber_url}")
        write(
            f"audit archive: {stack.archive_dir} (decided questions, JSON Lines under audit/date=YYYY-MM-DD/)"
        )
        for number, (url, _) in enumerate(stack.config.webhooks, start=1):
            write(f"webhook {number}: {url} (key id webhook-{number}; dead letters: {stack.webhook_dlq_url})")
        write(f"graph: {args.graph}")
        if getattr(args, "framework", None):
            write(f"framework: {args.framework}")
        write(f"checkpointer: {checkpointer}")
        if graph_source is not None:
            write(f"graph source: {graph_source}")
        if args.inbox_visibility is not None:
            write(f"inbox visibility: {args.inbox_visibility} s (a failed run is retried after it)")
        write(f"API: {stack.api_url}")
        write(f"inbox: {stack.api_url.rstrip('/')}/inbox")
        while not stop.wait(0.5):
            pass
        write("stopping")
        return 0
    finally:
        stack.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _project(value: str | None) -> Path:
    """``--project``, else the current directory when it holds the functions, else the installed project.

    The editable install points ``wait_service`` at ``<project>/functions/wait_service``, so
    ``agent-wait local`` also runs from an agent's own folder.
    """
    if value is not None:
        return Path(value).resolve()
    here = Path.cwd().resolve()
    if (here / "functions" / "api" / "handler.py").is_file():
        return here
    import wait_service

    return Path(wait_service.__file__).resolve().parents[2]
