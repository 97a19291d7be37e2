#!/usr/bin/env python3
"""The CDK app: ``npx cdk synth`` / ``make synth`` (offline) and ``make deploy``.

Settings come from ``cdk.json`` context or ``-c key=value`` (see README.md, "Deploy to AWS"); cdk-nag's
``AwsSolutionsChecks`` and ``ServerlessChecks`` validate every synth.
"""

from __future__ import annotations

import sys

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks, ServerlessChecks

from infra.config import ConfigError, StackConfig
from infra.stack import AgentWaitStack


def build_app(app: cdk.App | None = None) -> tuple[cdk.App, AgentWaitStack]:
    """Build the app and its one stack from the app's context, with the cdk-nag packs registered.

    Examples
    --------
    >>> app, stack = build_app(cdk.App(context={"auth": "iam"}))  # doctest: +SKIP
    >>> app.synth()  # doctest: +SKIP
    """
    app = app or cdk.App()
    config = StackConfig.from_context(app.node.try_get_context)
    stack = AgentWaitStack(
        app,
        config.stack_name,
        config=config,
        stack_name=config.stack_name,
        description="agent-wait: human-in-the-loop waits for LangGraph agents",
    )
    # cdk-nag 3 packs are CDK policy-validation plugins: they run at synth and fail it on any
    # unacknowledged error; acknowledgements live next to the construct they concern.
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app), ServerlessChecks(app))
    return app, stack


if __name__ == "__main__":
    try:
        app, _ = build_app()
    except ConfigError as exc:
        # A setting the stack cannot be built from: one line naming the context key, no traceback.
        sys.exit(f"agent-wait: {exc}")
    app.synth()
