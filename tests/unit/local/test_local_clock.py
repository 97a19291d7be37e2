"""The local stack's clock fires due schedules into the lifecycle handler, as EventBridge Scheduler does."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import boto3
import pytest
from moto import mock_aws

from agent_wait_cli.local.clock import MAX_ATTEMPTS, ScheduleClock, parse_at

if TYPE_CHECKING:
    from collections.abc import Iterator

NOW = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)


@pytest.fixture
def scheduler() -> Iterator[Any]:
    with mock_aws():
        client = boto3.client("scheduler", region_name="us-east-1")
        client.create_schedule_group(Name="timers")
        yield client


def schedule(scheduler: Any, name: str, at: datetime, payload: dict[str, Any]) -> None:
    scheduler.create_schedule(
        Name=name,
        GroupName="timers",
        ScheduleExpression=f"at({at:%Y-%m-%dT%H:%M:%S})",
        ScheduleExpressionTimezone="UTC",
        FlexibleTimeWindow={"Mode": "OFF"},
        ActionAfterCompletion="DELETE",
        Target={
            "Arn": "arn:aws:lambda:us-east-1:123456789012:function:lifecycle",
            "RoleArn": "arn:aws:iam::123456789012:role/scheduler",
            "Input": json.dumps(payload),
        },
    )


def names(scheduler: Any) -> set[str]:
    return {s["Name"] for s in scheduler.list_schedules(GroupName="timers")["Schedules"]}


def test_a_schedule_fires_once_when_due_and_is_deleted(scheduler: Any) -> None:
    now = [NOW]
    fired: list[Any] = []
    clock = ScheduleClock(scheduler, "timers", lambda event, _: fired.append(event), now=lambda: now[0])
    schedule(
        scheduler, "expire-0-q1", NOW + timedelta(seconds=3), {"question_id": "q1", "timer": "expire", "n": 0}
    )
    schedule(
        scheduler, "remind-1-q1", NOW + timedelta(seconds=1), {"question_id": "q1", "timer": "remind", "n": 1}
    )

    # Not yet due: nothing fires
    assert clock.fire_due() == 0

    # Due, in the order of their time; each fires once and is deleted (ActionAfterCompletion DELETE)
    now[0] = NOW + timedelta(seconds=3)
    assert clock.fire_due() == 2
    assert [e["timer"] for e in fired] == ["remind", "expire"]
    assert names(scheduler) == set()
    assert clock.fire_due() == 0


def test_a_failing_handler_is_invoked_again_up_to_three_times(scheduler: Any) -> None:
    calls: list[Any] = []
    reported: list[Any] = []

    def failing(event: Any, _: Any) -> None:
        calls.append(event)
        raise RuntimeError("ledger unavailable")

    clock = ScheduleClock(
        scheduler, "timers", failing, now=lambda: NOW, on_fire=lambda event, result: reported.append(result)
    )
    schedule(scheduler, "expire-0-q2", NOW, {"question_id": "q2", "timer": "expire", "n": 0})

    for _ in range(MAX_ATTEMPTS + 2):
        clock.fire_due()

    assert len(calls) == MAX_ATTEMPTS
    assert all(isinstance(result, RuntimeError) for result in reported)
    assert names(scheduler) == set()


def test_a_schedule_deleted_before_it_fires_never_fires(scheduler: Any) -> None:
    now = [NOW]
    fired: list[Any] = []
    clock = ScheduleClock(scheduler, "timers", lambda event, _: fired.append(event), now=lambda: now[0])
    schedule(
        scheduler, "remind-2-q3", NOW + timedelta(seconds=5), {"question_id": "q3", "timer": "remind", "n": 2}
    )
    clock.fire_due()

    scheduler.delete_schedule(Name="remind-2-q3", GroupName="timers")
    now[0] = NOW + timedelta(seconds=10)

    assert clock.fire_due() == 0
    assert fired == []


def test_only_one_shot_expressions_are_read() -> None:
    assert parse_at("at(2026-11-30T10:00:05)") == NOW + timedelta(seconds=5)
    assert parse_at("cron(0 12 * * ? *)") is None


def test_timers_due_in_the_same_second_fire_in_their_own_order(scheduler: Any) -> None:
    fired: list[Any] = []
    clock = ScheduleClock(scheduler, "timers", lambda event, _: fired.append(event["n"]), now=lambda: NOW)
    schedule(scheduler, "remind-2-q4", NOW, {"question_id": "q4", "timer": "remind", "n": 2})
    schedule(scheduler, "remind-1-q4", NOW, {"question_id": "q4", "timer": "remind", "n": 1})

    clock.fire_due()

    assert fired == [1, 2]
