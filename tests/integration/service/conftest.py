"""The receive path's fixtures, for its tests that also start a process or open a socket.

They are the unit tests' own (``tests/unit/service/conftest.py``: moto in process, a fake clock),
imported from there so the two folders never drift apart; ``service_events`` (sample events and
helpers) is importable from both.
"""

from __future__ import annotations

import sys
from pathlib import Path

UNIT_SERVICE = Path(__file__).resolve().parents[2] / "unit" / "service"
if str(UNIT_SERVICE) not in sys.path:
    sys.path.insert(0, str(UNIT_SERVICE))

from tests.unit.service.conftest import api, aws, baseline, call, clock, context  # noqa: E402

__all__ = ["api", "aws", "baseline", "call", "clock", "context"]
