"""What the Lambda runtime gives a handler, locally: the module loaded by path and a context."""

from __future__ import annotations

import importlib.util
import sys
import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path


@dataclass
class LambdaContext:
    """The attributes of Lambda's context object that handlers and Powertools read.

    Examples
    --------
    >>> ctx = LambdaContext("agent-wait-api", timeout_seconds=29)
    >>> ctx.function_name, ctx.get_remaining_time_in_millis() <= 29_000
    ('agent-wait-api', True)
    """

    function_name: str
    timeout_seconds: int = 30
    memory_limit_in_mb: int = 512
    region: str = "us-east-1"
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    function_version: str = "$LATEST"
    clock: Callable[[], float] = time.monotonic
    _started: float = field(init=False)

    def __post_init__(self) -> None:
        self._started = self.clock()

    @property
    def invoked_function_arn(self) -> str:
        return f"arn:aws:lambda:{self.region}:000000000000:function:{self.function_name}"

    @property
    def log_group_name(self) -> str:
        return f"/aws/lambda/{self.function_name}"

    @property
    def log_stream_name(self) -> str:
        return f"local/{self.aws_request_id}"

    def get_remaining_time_in_millis(self) -> int:
        elapsed = self.clock() - self._started
        return max(0, int((self.timeout_seconds - elapsed) * 1000))


def context_factory(function_name: str, timeout_seconds: int, region: str) -> Callable[[], LambdaContext]:
    """A fresh context per invocation, as Lambda gives one."""

    def make() -> LambdaContext:
        return LambdaContext(function_name, timeout_seconds=timeout_seconds, region=region)

    return make


def load_handler(
    path: Path, module_name: str, attribute: str = "handler"
) -> Callable[[dict[str, Any], Any], Any]:
    """Import the file at ``path`` as ``module_name`` and return its ``attribute``.

    The api and runner handlers are both ``handler.py``; each gets its own module name so that
    loading one never replaces the other in ``sys.modules``.

    Examples
    --------
    >>> load_handler(Path("functions/api/handler.py"), "agent_wait_local_api")  # doctest: +SKIP
    <function handler at ...>
    """
    if not path.is_file():
        raise FileNotFoundError(f"no handler at {path}")
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(module_name, None)
        raise
    handler = getattr(module, attribute, None)
    if not callable(handler):
        raise ImportError(f"{path} has no callable {attribute!r}")
    return handler
