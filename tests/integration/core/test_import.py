"""``import agent_wait`` works with no extras; an adapter without its extra names the extra.

Each check runs in a fresh interpreter with the extras blocked by a meta_path finder, as on a
machine where they are not installed.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

BLOCKER = textwrap.dedent(
    """
    import sys

    BLOCKED = {blocked!r}

    class Block:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in BLOCKED:
                raise ModuleNotFoundError(f"No module named {{name!r}} (blocked)", name=name)
            return None

    sys.meta_path.insert(0, Block())
    """
)


def _run(blocked: set[str], body: str) -> subprocess.CompletedProcess[str]:
    code = BLOCKER.format(blocked=sorted(blocked)) + textwrap.dedent(body)
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )


EXTRAS = {"langgraph", "langchain_core", "boto3", "botocore", "pydantic_ai", "strands"}


def test_core_imports_without_any_extra() -> None:
    """ "import agent_wait works with no extras" (CONVENTIONS.md 5)."""
    result = _run(
        EXTRAS,
        """
        import agent_wait, agent_wait.webhook, agent_wait.announce, agent_wait.signing, agent_wait.slack
        from agent_wait import InMemoryAnnounce, Policy, build_envelope, Question
        env = build_envelope("t", Question(question_id="q", question="hi"))
        assert InMemoryAnnounce().announce(env)
        loaded = sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED)
        print("loaded:", loaded)
        """,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "loaded: []"


@pytest.mark.parametrize(
    ("module", "extra", "blocked"),
    [
        ("agent_wait.langgraph", "langgraph", {"langgraph", "langchain_core"}),
        ("agent_wait.aws", "aws", {"boto3", "botocore"}),
        ("agent_wait.pydantic_ai", "pydantic-ai", {"pydantic_ai"}),
        ("agent_wait.strands", "strands", {"strands"}),
    ],
)
def test_an_adapter_without_its_extra_raises_import_error_naming_it(
    module: str, extra: str, blocked: set[str]
) -> None:
    result = _run(
        blocked,
        f"""
        import agent_wait
        try:
            import {module}
        except ImportError as exc:
            print(type(exc).__name__, "|", exc)
        else:
            raise SystemExit("imported without its extra")
        """,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == (
        f"MissingExtraError | {module} needs the {extra!r} extra: pip install 'agent-wait[{extra}]'"
    )
