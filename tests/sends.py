"""Watching what a boto3 SQS client sends, one message at a time or in a batch."""

from __future__ import annotations

import json
import threading
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable


def watch_sends(sqs: Any, queue_url: str, sent: Callable[[dict[str, Any]], None]) -> Any:
    """Call ``sent`` with the JSON body of each message ``sqs`` sends to ``queue_url``, before it
    goes (``SendMessage`` and each entry of ``SendMessageBatch``); returns ``sqs``."""

    def one(params: dict[str, Any], **_: Any) -> None:
        if params.get("QueueUrl") == queue_url:
            sent(json.loads(params["MessageBody"]))

    def batch(params: dict[str, Any], **_: Any) -> None:
        if params.get("QueueUrl") == queue_url:
            for entry in params.get("Entries", []):
                sent(json.loads(entry["MessageBody"]))

    sqs.meta.events.register("before-parameter-build.sqs.SendMessage", one)
    sqs.meta.events.register("before-parameter-build.sqs.SendMessageBatch", batch)
    return sqs


def refuse_entries(
    client: Any, operation: str, refused: Callable[[dict[str, Any]], bool], times: int = 1
) -> list[Any]:
    """Make ``operation`` (``SendMessageBatch``, ``PublishBatch``) of ``client`` refuse the entries
    ``refused`` picks, ``times`` of them in all, as SQS and SNS report an entry that failed: the
    call answers 200, the entry listed under ``Failed``, the other entries of the call taken.

    Returns the entries refused so far. An entry is refused only in a call that holds others
    (a batch call needs one entry at least). Safe for calls made at once from several threads:
    each call's refusals travel in its own request context.
    """
    key = "Entries" if operation == "SendMessageBatch" else "PublishBatchRequestEntries"
    done: list[Any] = []
    lock = threading.Lock()
    service = client.meta.service_model.service_name

    def before(params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        mine: list[Any] = []
        kept = []
        with lock:
            for entry in params.get(key, []):
                if len(done) < times and len(params[key]) > 1 and refused(entry):
                    mine.append(entry)
                    done.append(entry)
                else:
                    kept.append(entry)
        params[key] = kept
        context["refused_entries"] = mine

    def after(parsed: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        mine = context.pop("refused_entries", [])
        failed = [
            {"Id": e["Id"], "Code": "InternalError", "SenderFault": False, "Message": "injected"}
            for e in mine
        ]
        parsed["Failed"] = [*parsed.get("Failed", []), *failed]

    client.meta.events.register(f"before-parameter-build.{service}.{operation}", before)
    client.meta.events.register(f"after-call.{service}.{operation}", after)
    return done
