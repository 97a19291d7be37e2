"""A support agent that drafts a reply with a chat model and waits for a person to approve it.

Deployed, it calls a model on Amazon Bedrock (``ChatBedrockConverse``, the model id from
``MODEL_ID``); without AWS credentials, or on the local stack, it uses a deterministic fake model,
so local runs stay offline. See ``graph.py`` and ``model.py``.
"""
