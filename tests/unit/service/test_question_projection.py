"""What a partial read of a question item names: every attribute the record reads, reserved words aliased."""

from __future__ import annotations

import ast
import inspect
import textwrap
from pathlib import Path

import moto

from wait_service.answers.replies import NOT_READ_BY_REPLIES, REPLY_READS
from wait_service.constants import LISTED_ATTRIBUTES, NOT_LISTED, RECORD_ATTRIBUTES
from wait_service.ledger.questions import RESERVED_ATTRIBUTES, QuestionRecord, projection


def names_read_by_from_item() -> set[str]:
    """The item attribute names ``QuestionRecord.from_item`` reads (``data.get("x")``, ``data["x"]``)."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(QuestionRecord.from_item)))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
            if isinstance(node.func.value, ast.Name) and node.func.value.id == "data" and node.args:
                first = node.args[0]
                if isinstance(first, ast.Constant) and isinstance(first.value, str):
                    names.add(first.value)
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id == "data":
            if isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
                names.add(node.slice.value)
    return names


def test_record_attributes_are_exactly_what_from_item_reads() -> None:
    # A field added to the record and not to the list would never be read by a partial read; the
    # key is read too (a question id the item does not hold is read from it: a whole item's key, or
    # the id a partial read asked for).
    assert {*RECORD_ATTRIBUTES, "dedupe_key"} == names_read_by_from_item()
    assert len(RECORD_ATTRIBUTES) == len(set(RECORD_ATTRIBUTES))


def test_every_reserved_word_among_the_attributes_is_aliased() -> None:
    # moto ships DynamoDB's list of reserved words, which DynamoDB refuses unaliased in an expression.
    listing = Path(moto.__file__).parent / "dynamodb" / "parsing" / "reserved_keywords.txt"
    reserved = {line.strip().lower() for line in listing.read_text().splitlines() if line.strip()}
    assert "status" in reserved  # the list is the one expected
    assert {name for name in (*RECORD_ATTRIBUTES, "kind") if name in reserved} == set(RESERVED_ATTRIBUTES)


def test_a_projection_names_each_attribute_once_and_kind() -> None:
    request = projection(REPLY_READS)
    names = request["ExpressionAttributeNames"]
    parts = [names.get(part.strip(), part.strip()) for part in request["ProjectionExpression"].split(",")]
    assert parts == [*REPLY_READS, "kind"]
    assert set(names.values()) == set(RESERVED_ATTRIBUTES) & set(REPLY_READS)


def test_a_projection_without_reserved_words_sends_no_empty_names() -> None:
    # DynamoDB refuses an empty ExpressionAttributeNames map.
    assert projection(("answer", "digest")) == {"ProjectionExpression": "answer, digest, kind"}


def test_a_projection_of_the_lifecycle_reads_what_gives_back_its_first_stage() -> None:
    # The item does not store the raised stage: it is read back from created_at.
    assert projection(("lifecycle",)) == {"ProjectionExpression": "lifecycle, created_at, kind"}
    assert projection(("created_at", "lifecycle")) == {"ProjectionExpression": "created_at, lifecycle, kind"}


def test_a_reply_skips_only_attributes_the_record_has() -> None:
    assert set(NOT_READ_BY_REPLIES) <= set(RECORD_ATTRIBUTES)
    assert "lifecycle" in NOT_READ_BY_REPLIES


def test_a_page_reads_record_attributes_in_the_order_deployed_stacks_project_them() -> None:
    # What a page reads is a part of the record (so the reserved words above cover it), and the
    # status listing's index projects it in this order: CloudFormation would take another order
    # for a new projection, which DynamoDB makes only by replacing the index.
    assert NOT_LISTED <= set(RECORD_ATTRIBUTES)
    assert LISTED_ATTRIBUTES == (
        *("question_id", "thread_id", "status", "digest", "question", "policy", "source", "expires_at"),
        *("updated_at", "lifecycle", "answer", "answered_by", "answered_at", "reason", "escalation"),
        *("resumed_at", "error", "if_match", "receipt", "policy_version", "requested_by"),
        *("delegated_to", "delegations", "extensions", "votes", "approvers", "rejecters"),
    )
