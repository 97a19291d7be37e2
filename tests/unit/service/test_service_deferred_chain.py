"""Runs deferred behind a question run one after another, each started by the one before.

Thirty runs queued behind one question are a chain of thirty hops with no human in between: the
runner records the next run in the ledger, the ledger's stream hands it to the dispatcher, which
puts it on the inbox. Lambda's recursive loop detection would stop a chain of Lambda and SQS hops
after about 16 (the stack allows the loop on the runner: tests/infra/test_operate.py). Here the
chain runs through the stream and the inbox queue as the event source mappings would run it, and
every run completes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypedDict

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph

from agent_wait.langgraph import wait
from wait_service.ledger import Ledger
from wait_service.runs.inbox import Inbox, StartMessage, parse_message
from wait_service.runs.runner import RunnerService, build_announce

if TYPE_CHECKING:
    from service_events import Aws, FakeClock

DEFERRED = 30


class ChainState(TypedDict, total=False):
    n: int
    hold: bool
    done: list[int]


@wait("approval")
def hold_the_thread(n: int) -> dict[str, Any]:
    """Park the thread on one question (only the first run asks)."""
    return {"held": n}


def step(state: ChainState) -> ChainState:
    if state.get("hold"):
        hold_the_thread(n=state["n"])
    return {"done": [state["n"]]}


def chain_graph() -> Any:
    graph: StateGraph[ChainState, None, ChainState, ChainState] = StateGraph(ChainState)
    graph.add_node("step", step)
    graph.add_edge(START, "step")
    graph.add_edge("step", END)
    return graph.compile(checkpointer=InMemorySaver())


def test_thirty_runs_deferred_on_one_thread_all_complete(aws: Aws, clock: FakeClock) -> None:
    ledger = Ledger(aws.resources.ledger_table, aws.dynamodb, clock=clock)
    runner = RunnerService(
        chain_graph(),
        build_announce(aws.settings, dynamodb=aws.dynamodb, sns=aws.sns, sqs=aws.sqs),
        ledger,
        clock=clock,
        inbox=Inbox(aws.resources.inbox_url, aws.sqs),
    )
    # Given a thread parked on a question, and thirty runs accepted behind it
    [question_id] = runner.run(StartMessage(thread_id="t-1", input={"n": 0, "hold": True})).pending
    for n in range(1, DEFERRED + 1):
        assert (
            runner.run(
                StartMessage(thread_id="t-1", input={"n": n, "hold": False}, run_id=f"run-{n:02d}")
            ).status
            == "deferred"
        )
    assert len(ledger.get_thread("t-1").deferred) == DEFERRED

    # When the question is answered (the ledger's stream sends its resume)
    ledger.record_answer(question_id, {"action": "approve"}, answered_by="ann")

    # Then the resume, and after it each run's end, puts the next run on the inbox, and the chain
    # runs to its end: every hop is one message started by the run before it
    outcomes: list[str] = []
    while True:
        aws.dispatch()  # the ledger's stream hands what was recorded to the dispatcher
        got = aws.sqs.receive_message(QueueUrl=aws.resources.inbox_url, MaxNumberOfMessages=10).get(
            "Messages", []
        )
        if not got:
            break
        assert len(got) == 1, [m["Body"] for m in got]  # one at a time: the next when this one ends
        [message] = got
        outcomes.append(runner.run(parse_message(message["Body"])).status)
        aws.sqs.delete_message(QueueUrl=aws.resources.inbox_url, ReceiptHandle=message["ReceiptHandle"])
    assert outcomes == ["done"] * (1 + DEFERRED)
    thread = ledger.get_thread("t-1")
    assert (thread.run_status, thread.deferred, thread.pending) == ("done", [], [])
    # the last run's output is the last input's
    assert isinstance(thread.output, dict) and thread.output["done"] == [DEFERRED]
