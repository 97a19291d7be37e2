"""Metric names, in one place: the Lambdas emit them and the CDK dashboard and alarms read them.

Plain constants with no imports, so ``infra`` can use them without loading Powertools.
"""

from typing import Final

QUESTIONS_RAISED: Final = "QuestionsRaised"
QUESTIONS_ANSWERED: Final = "QuestionsAnswered"
QUESTIONS_RESUMED: Final = "QuestionsResumed"
QUESTIONS_EXPIRED: Final = "QuestionsExpired"
RESUME_FAILURES: Final = "ResumeFailures"
RUNS_FAILED: Final = "RunsFailed"
# Milliseconds from a question's `created_at` to the reply that answered it. Both are emitted by
# the ledger stream's dispatcher, once per decision by a person (wait_service.stream.analytics);
# `TimeToDecision` below carries the same value, under the name the analytics dashboard reads.
TIME_TO_ANSWER: Final = "TimeToAnswer"
QUESTIONS_ESCALATED: Final = "QuestionsEscalated"
REMINDERS_SENT: Final = "RemindersSent"
QUESTIONS_REVOKED: Final = "QuestionsRevoked"
# Inbox messages the runner refused to act on: no recorded answer, or a question the thread does
# not wait on (a forged or stale message).
RESUMES_REFUSED: Final = "ResumesRefused"
# A question published under an id whose ledger item holds a different digest.
QUESTION_COLLISIONS: Final = "QuestionCollisions"
# Inbox messages the runner consumed without running: not JSON, not a start or resume message, nested
# too deeply, or a start whose input does not fit the graph's input schema.
POISON_MESSAGES: Final = "PoisonMessages"
# Questions the ledger could not record (too large, not storable): their runs end `failed`.
QUESTIONS_UNRECORDABLE: Final = "QuestionsUnrecordable"
# Messages the ledger stream's dispatcher put on the inbox: resumes of decided questions, run starts.
RESUMES_DISPATCHED: Final = "ResumesDispatched"
STARTS_DISPATCHED: Final = "StartsDispatched"
# Resolution events (`wait.answered`, ..., `thread.failed`) the dispatcher published, by type.
EVENTS_PUBLISHED: Final = "EventsPublished"
# Questions raised while the policy store could not be read (the last version read, else the code's policy).
POLICY_STORE_UNREADABLE: Final = "PolicyStoreUnreadable"
# Policy overrides not applied to a question because they do not fit the code's policy.
POLICY_OVERRIDES_REFUSED: Final = "PolicyOverridesRefused"
# Decisions the dispatcher counted into the stats table (wait_service.stream.analytics), by what they did,
# once per question; and the time from raised to a person's answer, read from the ledger's stream.
DECISIONS_APPROVED: Final = "DecisionsApproved"
DECISIONS_EDITED: Final = "DecisionsEdited"
DECISIONS_REJECTED: Final = "DecisionsRejected"
DECISIONS_RESPONDED: Final = "DecisionsResponded"
EXPIRED_WITH_DEFAULT: Final = "ExpiredWithDefault"
EXPIRED_WITHOUT_DEFAULT: Final = "ExpiredWithoutDefault"
TIME_TO_DECISION: Final = "TimeToDecision"
