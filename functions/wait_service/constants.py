"""Numbers and names the functions share with the infrastructure: timeouts, retries, retention and
the question item's attributes.

Plain values in a module of their own, so a function reads them without loading the resource
specs of :mod:`wait_service.resources` (which re-exports them).
"""

from __future__ import annotations

# The runner's timeout bounds one graph run; the inbox hides a message six times as long so a
# slow run is never handed to a second invocation while the first still works on it.
RUNNER_TIMEOUT_SECONDS = 120
# The api Lambda's timeout: API Gateway's REST integration gives up after 29 seconds, so a longer
# Lambda timeout would only keep working for a caller that already got a 504.
API_TIMEOUT_SECONDS = 29
# The lifecycle function (expiry, escalation, reminders) makes a handful of AWS calls per timer.
LIFECYCLE_TIMEOUT_SECONDS = 30
INBOX_VISIBILITY_SECONDS = 6 * RUNNER_TIMEOUT_SECONDS
# Runs per runner invocation (the event source mapping's batch size, and the local poller's): the
# timeout above bounds one run, and a timeout re-runs only that run.
RUNNER_BATCH_SIZE = 1
MAX_RECEIVE_COUNT = 5
# Ledger items and checkpoints expire this many days after their last write (Settings.ledger_ttl_days,
# the checkpointer's ttl_seconds), so a checkpoint never outlives, nor dies before, its ledger record.
TTL_DAYS = 90
# DynamoDB deletes an expired item within a few days of its TTL and a read still returns it until
# then; an offloaded checkpoint object outlives its item by this margin, so no item that can still
# be read points at a deleted object.
TTL_DELETION_LAG_DAYS = 7
# The ledger stream's dispatcher: records per invocation, and how often a failing batch is retried
# (halved each time) before its records go to the stream's DLQ. A few AWS calls per record (about
# 0.1 s: a batch of 100 stays well within the function's timeout). At 1,000 questions a second
# (about 10 records each) a batch of 10 meant 1,000+ invocations a second, each with its Lambda
# request, log lines, archive PutRecordBatch and analytics transaction; up to 100, gathered for at
# most a second (a quiet stream's record still leaves within about a second), cut those tenfold.
DISPATCHER_BATCH_SIZE = 100
DISPATCHER_MAX_BATCHING_WINDOW_SECONDS = 1
DISPATCHER_MAX_RETRY_ATTEMPTS = 50
# Retries stop for a record older than this (its metadata goes to the DLQ): the record age bounds
# how long one that can never go holds up the records behind it.
DISPATCHER_MAX_RECORD_AGE_SECONDS = 3600
DISPATCHER_TIMEOUT_SECONDS = 30
# Webhooks: the seed's retry rule (at most 5 attempts, exponential backoff capped at 30 minutes
# between tries), carried out by the delivery queue's visibility, never by sleeping in a Lambda.
WEBHOOK_MAX_ATTEMPTS = 5
WEBHOOK_BASE_DELAY_SECONDS = 300
WEBHOOK_MAX_DELAY_SECONDS = 30 * 60
# One POST per event, each bounded; a batch of them fits the function's timeout, which the delivery
# queue's visibility timeout covers (Lambda requires it to be at least the function's timeout).
WEBHOOK_REQUEST_TIMEOUT_SECONDS = 5
WEBHOOK_BATCH_SIZE = 10
WEBHOOK_TIMEOUT_SECONDS = 60
WEBHOOK_VISIBILITY_SECONDS = WEBHOOK_TIMEOUT_SECONDS
# Slack posts its interactions here (the api serves it only when a signing secret is configured);
# a plain string here so the api routes by it without loading the Slack module.
SLACK_INTERACTIONS_PATH = "/slack/interactions"


# Every attribute of a question item ``QuestionRecord.from_item`` reads (the item's names, not the
# record's: `delegated_to` is read as `delegates`). Here, with no import, because the resource
# specs (the status listing's projection) and the ledger (the reads that project) both use it.
RECORD_ATTRIBUTES: tuple[str, ...] = (
    "question_id",
    "thread_id",
    "status",
    "digest",
    "question",
    "policy",
    "source",
    "created_at",
    "expires_at",
    "updated_at",
    "lifecycle",
    "answer",
    "answered_by",
    "answered_at",
    "reason",
    "escalation",
    "resumed_at",
    "reminders_sent",
    "error",
    "envelope",
    "event_id",
    "reply_url",
    "raised_expires_at",
    "if_match",
    "receipt",
    "policy_version",
    "requested_by",
    "delegated_to",
    "delegations",
    "extensions",
    "extended_seconds",
    "votes",
    "approvers",
    "rejecters",
)
# What a page of questions does not show (the api's QuestionView, audit and quorum included):
# `created_at` is the listing's sort key (an index holds its keys anyway); the envelope's own
# fields are read only by the lifecycle function, from the table; the rest is bookkeeping. A write
# that changes only these costs the status listing's index nothing.
NOT_LISTED = frozenset(
    {
        "created_at",
        "reminders_sent",
        "envelope",
        "event_id",
        "reply_url",
        "raised_expires_at",
        "extended_seconds",
    }
)
# What a page of questions shows, besides the keys: the status listing's index projects these and
# no more, and a thread's page reads these of its items.
LISTED_ATTRIBUTES: tuple[str, ...] = tuple(name for name in RECORD_ATTRIBUTES if name not in NOT_LISTED)
