"""Answers to async-mode questions: a new run on the thread, never a resume.

An ``@wait(mode="async")`` call publishes its question and returns at once: the thread never
parks on it, so LangGraph has nothing to resume (a ``Command(resume=...)`` for an id the thread
never parked on is ignored). The decision (a person's answer, the expiry's default, a revocation's
rejection) reaches the graph as the input of a new run on the thread instead::

    {"agent_wait_answer": {"question_id": "...", "answer": {...}, "answered_by": "..."}}

The api and the lifecycle function still enqueue the ordinary resume message (``{"thread_id",
"question_id"}``, on the thread's FIFO group, so it waits behind any run before it); the runner
reads the answer from the ledger and turns it into that run. The run is named
:func:`answer_run_id`, so the thread item queued when the answer was recorded is finished by it.

Examples
--------
>>> answer_run_id("q-1")
'answer:q-1'
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agent_wait.hosting import ASYNC_ANSWER_KEY, is_async_source

if TYPE_CHECKING:
    from wait_service.ledger import QuestionRecord

__all__ = ["answer_input", "answer_run_id", "is_async_question"]


def is_async_question(question: QuestionRecord) -> bool:
    """Whether ``question`` was raised by an async-mode ``@wait`` (nothing parked on it)."""
    return is_async_source(question.source)


def answer_run_id(question_id: str) -> str:
    """The id of the run that hands the answer of async question ``question_id`` to its thread."""
    return f"answer:{question_id}"


def answer_input(question: QuestionRecord) -> dict[str, Any]:
    """The run input that carries the ledger's decision of ``question`` to the graph."""
    return {
        ASYNC_ANSWER_KEY: {
            "question_id": question.question_id,
            "answer": question.answer,
            "answered_by": question.answered_by,
        }
    }
