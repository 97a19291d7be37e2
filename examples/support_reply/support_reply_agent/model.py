"""Which chat model the support agent drafts with: Bedrock when it can reach it, else a fake one.

The choice is made once, when the runner builds the graph (its cold start), from the environment:

- ``SUPPORT_AGENT_MODEL=fake`` or ``=bedrock`` forces it;
- ``AWS_ENDPOINT_URL`` set (the local stack, an emulator): fake, since Bedrock is not there;
- ``MODEL_ID`` unset, or no AWS credentials found: fake;
- otherwise ``ChatBedrockConverse(model=MODEL_ID)`` (``langchain-aws``, the agent's own
  requirement: ``examples/support_reply_agent/requirements.txt``).

Credentials are looked up the way boto3 does, except through the EC2 instance metadata service,
which would make a network call on every machine that is not an EC2 instance: on EC2 with only
an instance role, set ``SUPPORT_AGENT_MODEL=bedrock``. In Lambda the credentials are in the
environment.

Examples
--------
>>> model = choose_model({"SUPPORT_AGENT_MODEL": "fake"})
>>> type(model).__name__, model.invoke("My order never arrived").content == FAKE_DRAFT
('FakeListChatModel', True)
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from langchain_core.language_models.fake_chat_models import FakeListChatModel

if TYPE_CHECKING:
    from collections.abc import Mapping

    from langchain_core.language_models.chat_models import BaseChatModel

logger = logging.getLogger(__name__)

MODEL_ID_VARIABLE = "MODEL_ID"
CHOICE_VARIABLE = "SUPPORT_AGENT_MODEL"
# What the fake model always answers: the same draft for every message, so tests and demos repeat.
FAKE_DRAFT = (
    "Thank you for getting in touch. I am sorry about the trouble with your order; "
    "I have asked our team to look into it and we will get back to you within one business day."
)


def fake_model() -> BaseChatModel:
    """langchain_core's fake chat model, always drafting :data:`FAKE_DRAFT` (no network)."""
    return FakeListChatModel(responses=[FAKE_DRAFT])


def bedrock_model(model_id: str, **kwargs: Any) -> BaseChatModel:
    """``ChatBedrockConverse`` for ``model_id`` (the Converse API: ``bedrock:InvokeModel``)."""
    try:
        from langchain_aws import ChatBedrockConverse
    except ImportError as exc:  # the agent's requirement, not the project's
        raise ImportError(
            "the support agent's Bedrock model needs langchain-aws: "
            "pip install -r examples/support_reply_agent/requirements.txt"
        ) from exc
    model: BaseChatModel = ChatBedrockConverse(model_id=model_id, temperature=0, max_tokens=400, **kwargs)
    return model


def has_aws_credentials() -> bool:
    """Whether boto3 would find credentials, without asking the EC2 metadata service (no network)."""
    import botocore.session

    session = botocore.session.get_session()
    resolver = session.get_component("credential_provider")
    resolver.remove("iam-role")
    return session.get_credentials() is not None


def choose_model(environ: Mapping[str, str]) -> BaseChatModel:
    """The model the agent drafts with, for ``environ`` (see the module docstring for the rules)."""
    forced = environ.get(CHOICE_VARIABLE, "").strip().lower()
    model_id = environ.get(MODEL_ID_VARIABLE, "").strip()
    if forced not in ("", "fake", "bedrock"):
        raise ValueError(f"{CHOICE_VARIABLE}={forced!r}: expected 'fake' or 'bedrock'")
    if forced == "bedrock" or (
        not forced and model_id and not environ.get("AWS_ENDPOINT_URL") and has_aws_credentials()
    ):
        if not model_id:
            raise ValueError(f"{CHOICE_VARIABLE}=bedrock needs {MODEL_ID_VARIABLE}")
        logger.info("drafting with Bedrock model %s", model_id)
        return bedrock_model(model_id)
    logger.info("drafting with the offline fake model")
    return fake_model()
