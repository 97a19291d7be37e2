"""``bench.item_sizes`` sizes items as DynamoDB counts them and index entries as the indexes project."""

from __future__ import annotations

import pytest

from agent_wait import Question, approval, build_envelope
from agent_wait.aws.dynamodb import ledger_put
from bench.item_sizes import index_entry, item_size, measure, value_size
from wait_service.resources import LEDGER, LISTED_ATTRIBUTES


def test_value_sizes_follow_dynamodb_rules() -> None:
    # Strings by their UTF-8 bytes; numbers one byte per two significant digits plus one
    assert value_size({"S": "é"}) == 2
    assert (value_size({"N": "40"}), value_size({"N": "12345"}), value_size({"N": "-0.500"})) == (2, 4, 2)
    # 3 bytes per list or map, 1 per element, plus each member's name (maps) and value
    assert value_size({"M": {"ab": {"BOOL": True}}}) == 3 + 1 + 2 + 1
    assert value_size({"NS": ["1", "22"]}) == 2 + 2
    assert item_size({"k": {"S": "v"}, "n": {"NULL": True}}) == 2 + 2


def test_an_index_entry_holds_the_keys_and_the_listed_attributes_only() -> None:
    # Given a question item as the library writes it
    item = ledger_put(
        "ledger",
        build_envelope("t-1", Question(question_id="q-1", question={"a": 1}, policy=approval(ttl=60))),
    )["Item"]

    # Then each index's entry keeps the keys and what a page shows, not what only the follow-ups
    # read (the item holds no envelope JSON at all: its event_id stands in, on the item only)
    assert "envelope" not in item
    for index in LEDGER.indexes:
        entry = index_entry(item, index)
        assert entry is not None
        assert set(entry) <= {"dedupe_key", index.partition_key, index.sort_key, *LISTED_ATTRIBUTES}
        assert "event_id" not in entry
    [row] = measure([item])
    assert row["status"] == "raised"
    assert row["by-status"] <= row["item"] - value_size(item["event_id"]) - len("event_id")
    # A thread item is in no index and measured as no question
    assert measure([{"dedupe_key": {"S": "thread:t-1"}, "kind": {"S": "thread"}}]) == []


def test_a_mistyped_option_is_refused_not_ignored(capsys: pytest.CaptureFixture[str]) -> None:
    from bench import checkpoint_sizes, item_sizes

    for tool in (item_sizes, checkpoint_sizes):
        with pytest.raises(SystemExit) as exit_:
            tool.main(["--bogus"])
        assert exit_.value.code == 2
        assert "unrecognized arguments: --bogus" in capsys.readouterr().err
