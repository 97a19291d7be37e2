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
# Milliseconds from a question's `created_at` to the reply that answered it.
TIME_TO_ANSWER: Final = "TimeToAnswer"
