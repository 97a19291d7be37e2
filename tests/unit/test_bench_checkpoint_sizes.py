"""bench.checkpoint_sizes: a conversation's checkpoint, raw and as DynamoDBSaver stores it gzipped."""

from __future__ import annotations

import pytest

from bench.checkpoint_sizes import conversation, measure, prose


def test_a_conversation_checkpoint_gzipped_takes_fewer_write_units() -> None:
    sizes = measure(40, prose())

    # Prose shrinks to well under half, and so do a put's write units
    assert sizes.gzipped < sizes.raw / 2
    raw_units, gzipped_units = sizes.write_units
    assert gzipped_units < raw_units / 2


def test_a_payload_under_1_kb_is_stored_as_is() -> None:
    # The sample agent's case: DynamoDBSaver leaves payloads under 1 KB uncompressed
    sizes = measure(1, "x" * 430)
    assert sizes.raw == sizes.gzipped < 1024


def test_too_little_text_is_refused_naming_what_it_needs() -> None:
    with pytest.raises(ValueError, match="10 messages need 4300 characters of text, not 5"):
        conversation(10, "short")
