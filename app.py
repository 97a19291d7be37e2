#!/usr/bin/env python3
"""The CDK app: ``npx cdk synth`` / ``make synth`` (offline) and ``make deploy``.

Settings come from ``cdk.json`` context or ``-c key=value`` (see README.md, "Deploy to AWS"); cdk-nag's
``AwsSolutionsChecks`` and ``ServerlessChecks`` validate every synth. A mistake ends the synth with one
line on stderr naming the context key and the fix (exit status 1); ``AGENT_WAIT_DEBUG=1`` adds the
traceback (``infra.errors``).
"""

from __future__ import annotations

import sys
from pathlib import Path

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks, ServerlessChecks

from infra.config import StackConfig, check_known_keys
from infra.errors import refusal, run
from infra.functions import preflight
from infra.stack import AgentWaitStack


def build_app(app: cdk.App | None = None) -> tuple[cdk.App, AgentWaitStack]:
    """Build the app and its one stack from the app's context, with the cdk-nag packs registered.

    Examples
    --------
    >>> app, stack = build_app(cdk.App(context={"auth": "iam"}))  # doctest: +SKIP
    >>> app.synth()  # doctest: +SKIP
    """
    app = app or cdk.App()
    check_known_keys(app.node.get_all_context())
    config = StackConfig.from_context(app.node.try_get_context)
    # The graph's import and the user's requirements, before any layer is bundled.
    preflight(config)
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


def main(app: cdk.App | None = None) -> int:
    """Build and synthesize the app; 1 after one line on stderr when something is wrong."""

    def synth() -> None:
        built, _ = build_app(app)
        try:
            built.synth()
        except RuntimeError as exc:
            # cdk-nag's findings (printed above by cdk): the first one on one line.
            refused = refusal(Path(built.outdir))
            if refused is None:
                raise
            raise refused from exc

    return run(synth)


if __name__ == "__main__":
    sys.exit(main())
