"""One api "Lambda instance" for the reply race: its own process, the deployed handler, one reply.

``test_receive_path.py`` runs :func:`reply_once` in twenty processes forked from a forkserver that
imported the api's modules once (so each instance starts fast, and from a process that never ran
the test's threads). Each loads ``functions/api/handler.py`` by file path and builds its service
from the environment like a cold start, waits at the barrier so that all reply at the same moment,
and returns the status code and how many ``SendMessage`` calls any of its clients made (none: the
resume follows from the ledger's stream; FIFO deduplication would hide a second send).
"""

from __future__ import annotations

import importlib.util
import json
import os
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from multiprocessing.queues import Queue
    from multiprocessing.synchronize import Barrier

# Imported once by the forkserver, not by every instance.
PRELOAD = ["boto3", "botocore.session", "wait_service.http.api", "wait_service.observability"]


class Context:
    function_name = "agent-wait-api"
    memory_limit_in_mb = 512
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:agent-wait-api"
    aws_request_id = "race"

    def get_remaining_time_in_millis(self) -> int:
        return 29_000


def reply_once(
    index: int, handler_path: str, env: dict[str, str], event_json: str, barrier: Barrier, results: Queue[Any]
) -> None:
    import boto3

    os.environ.update(env)
    # Every client the api builds comes from the default session: its sends are all counted.
    boto3.setup_default_session()
    sends: list[int] = []
    assert boto3.DEFAULT_SESSION is not None
    boto3.DEFAULT_SESSION.events.register("before-call.sqs.SendMessage", lambda **_: sends.append(1))
    spec = importlib.util.spec_from_file_location("race_api_handler", handler_path)
    assert spec and spec.loader
    handler = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(handler)
    service = handler.build_service()
    barrier.wait(timeout=120)
    response = handler.handle(json.loads(event_json), Context(), service=service)
    results.put({"status": response["statusCode"], "sends": len(sends), "index": index})
