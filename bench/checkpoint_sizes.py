"""What gzip does to a checkpoint an LLM agent would write: bytes and write units, raw and gzipped.

The sample agent's checkpoints are under 1 KB, which ``DynamoDBSaver`` never compresses; an LLM
agent's state is mostly its conversation. This builds conversations of 10, 40 and 100 messages of
about 430 characters of English prose each (this repository's own docs, read in order, as stand-in
text), serializes each checkpoint as ``DynamoDBSaver`` stores its payload (LangGraph's serializer,
then the package's own gzip step, as the runner configures it with ``checkpoint_compression``), and
prints the payload's bytes and the write units of one put, raw and gzipped.

Examples
--------
$ python -m bench.checkpoint_sizes
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import parse_no_options

DOCS = Path(__file__).resolve().parent.parent / "docs"
MESSAGE_CHARACTERS = 430
TURNS = (10, 40, 100)


@dataclass(frozen=True)
class Sizes:
    turns: int
    raw: int
    gzipped: int

    @property
    def write_units(self) -> tuple[int, int]:
        """A put's write units, raw and gzipped (one per started KB)."""
        return math.ceil(self.raw / 1024), math.ceil(self.gzipped / 1024)


def prose() -> str:
    """The stand-in text: the docs' Markdown, in name order, whitespace folded."""
    text = " ".join(path.read_text() for path in sorted(DOCS.glob("*.md")))
    return " ".join(text.split())


def conversation(turns: int, text: str) -> dict[str, Any]:
    """A state of ``turns`` messages taking turns, each the next ``MESSAGE_CHARACTERS`` of ``text``."""
    if len(text) < turns * MESSAGE_CHARACTERS:
        raise ValueError(
            f"{turns} messages need {turns * MESSAGE_CHARACTERS} characters of text, not {len(text)}"
        )
    return {
        "messages": [
            {
                "role": "assistant" if n % 2 else "user",
                "content": text[n * MESSAGE_CHARACTERS : (n + 1) * MESSAGE_CHARACTERS],
            }
            for n in range(turns)
        ]
    }


def measure(turns: int, text: str) -> Sizes:
    """The payload ``DynamoDBSaver`` stores for a checkpoint of a ``turns``-message conversation."""
    from langgraph.checkpoint.base import empty_checkpoint
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
    from langgraph_checkpoint_aws.checkpoint.dynamodb.serialization import CheckpointSerializer

    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = conversation(turns, text)
    value = {"checkpoint": checkpoint, "metadata": {"source": "loop", "step": turns}}
    serde = JsonPlusSerializer()
    _, raw, _ = CheckpointSerializer(serde, enable_compression=False).serialize(value)
    _, gzipped, _ = CheckpointSerializer(serde, enable_compression=True).serialize(value)
    return Sizes(turns, len(raw), len(gzipped))


def main(argv: list[str] | None = None) -> int:
    parse_no_options("python -m bench.checkpoint_sizes", __doc__, argv)
    text = prose()
    lines = [
        "| messages | payload raw | gzipped | ratio | write units a put, raw → gzipped |",
        "|---|---|---|---|---|",
    ]
    for turns in TURNS:
        sizes = measure(turns, text)
        raw_units, gzipped_units = sizes.write_units
        lines.append(
            f"| {turns} | {sizes.raw:,} B | {sizes.gzipped:,} B | {sizes.raw / sizes.gzipped:.1f}× "
            f"| {raw_units} → {gzipped_units} |"
        )
    print("\n".join(lines))  # noqa: T201
    return 0


if __name__ == "__main__":
    sys.exit(main())
