"""Fixtures for the core library's unit tests: a scripted framework that needs no agent runtime."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from agent_wait.framework import Framework

if TYPE_CHECKING:
    from collections.abc import Mapping


class Parked(Exception):  # noqa: N818 - mirrors LangGraph's GraphInterrupt: a signal, not an error
    """Raised by ScriptedFramework.interrupt when no answer is queued: the call parked."""

    def __init__(self, value: Any) -> None:
        super().__init__(value)
        self.value = value


class ScriptedFramework(Framework):
    """Parks by raising :class:`Parked`; answers queued in ``answers`` are returned in order.

    Like LangGraph, the wrapper is called again from the top on resume, so a test calls the
    decorated function once to park it and once more, after queueing an answer, to resume it.
    """

    name = "scripted"
    hidden_params = ("ctx",)
    Parked = Parked

    def __init__(self, thread_id: str = "thread-1") -> None:
        self.answers: list[Any] = []
        self.raised: list[tuple[Any, dict[str, Any]]] = []
        self.thread_id = thread_id

    def interrupt(self, value: Any, call_args: Mapping[str, Any]) -> Any:
        self.raised.append((value, dict(call_args)))
        if self.answers:
            return self.answers.pop(0)
        raise Parked(value)

    def interrupts_in(self, result: Any) -> list[tuple[str, Any]]:
        return list(result)

    def current_thread_id(self, call_args: Mapping[str, Any]) -> str:
        return self.thread_id


@pytest.fixture
def framework() -> ScriptedFramework:
    return ScriptedFramework()
