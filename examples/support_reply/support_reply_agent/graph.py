"""The support reply agent: a model drafts the reply, a person approves (or edits) it, it is sent.

``draft`` asks the chat model (see ``model.py``) for a reply to the customer's message; ``send``
calls ``send_reply``, which ``@wait`` parks until a person answers: approve sends the draft,
approve with ``args`` sends their edit, anything else sends nothing. The model call and the wait
are in separate nodes: a resumed thread re-runs the node that parked, and must not ask the model
again (a real model would draft something else).

Deploy it with its own requirements and permissions (docs/your-own-agent.md)::

    npx cdk deploy -c graph=support_reply_agent.graph:build_graph -c graph_source=examples \\
      -c graph_requirements=examples/support_reply_agent/requirements.txt \\
      -c runner_policy=examples/support_reply_agent/runner_policy.json \\
      -c runner_environment='{"MODEL_ID": "anthropic.claude-3-haiku-20240307-v1:0"}'

Examples
--------
>>> from langgraph.checkpoint.memory import InMemorySaver
>>> from langgraph.types import Command
>>> from examples.support_reply_agent.model import fake_model
>>> graph = build_graph(InMemorySaver(), model=fake_model())
>>> cfg = {"configurable": {"thread_id": "doc"}}
>>> parked = graph.invoke({"customer": "c-17", "message": "Where is my order?"}, cfg)
>>> [interrupt] = parked["__interrupt__"]
>>> interrupt.value["question"]["function"]
'send_reply'
>>> answer = {"action": "approve", "args": {"text": "On its way!"}}
>>> done = graph.invoke(Command(resume={interrupt.id: answer}), cfg)
>>> done["sent"]
{'customer': 'c-17', 'text': 'On its way!'}
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from langchain_core.messages import HumanMessage, SystemMessage
from langgraph.graph import END, START, StateGraph
from pydantic import BaseModel, Field
from typing_extensions import TypedDict

from agent_wait import approval
from agent_wait.langgraph import wait

from .model import choose_model

if TYPE_CHECKING:
    from langchain_core.language_models.chat_models import BaseChatModel
    from langgraph.checkpoint.base import BaseCheckpointSaver
    from langgraph.graph.state import CompiledStateGraph

SYSTEM_PROMPT = (
    "You are a support agent. Draft a short, polite reply to the customer's message. "
    "Do not promise refunds or dates you cannot know."
)


class ReplyInput(BaseModel):
    """What a run needs: the api checks a run's input against this schema before queueing it."""

    customer: str = Field(min_length=1, description="who wrote in")
    message: str = Field(min_length=1, max_length=4000, description="what they wrote")


class ReplyState(TypedDict, total=False):
    customer: str
    message: str
    draft: str
    sent: dict[str, Any] | None
    outcome: Any


@wait(approval())
def send_reply(customer: str, text: str) -> dict[str, Any]:
    """Send ``text`` to ``customer`` (here: return it; a real agent calls its helpdesk's API)."""
    return {"customer": customer, "text": text}


def build_graph(
    checkpointer: BaseCheckpointSaver[Any] | None = None, *, model: BaseChatModel | None = None
) -> CompiledStateGraph[Any]:
    """The compiled agent; ``model`` defaults to :func:`~.model.choose_model` of the environment.

    Examples
    --------
    >>> from examples.support_reply_agent.model import fake_model
    >>> sorted(n for n in build_graph(model=fake_model()).get_graph().nodes if not n.startswith("__"))
    ['draft', 'send']
    """
    chat = model if model is not None else choose_model(os.environ)

    def draft(state: ReplyState) -> ReplyState:
        reply = chat.invoke([SystemMessage(SYSTEM_PROMPT), HumanMessage(state["message"])])
        return {"draft": str(reply.content)}

    def send(state: ReplyState) -> ReplyState:
        result = send_reply(state["customer"], state["draft"])
        if isinstance(result, dict) and "text" in result:
            return {"sent": result}
        return {"sent": None, "outcome": result}

    graph = StateGraph(ReplyState, input_schema=ReplyInput)
    graph.add_node("draft", draft)
    graph.add_node("send", send)
    graph.add_edge(START, "draft")
    graph.add_edge("draft", "send")
    graph.add_edge("send", END)
    return graph.compile(checkpointer=checkpointer)
