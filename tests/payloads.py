"""Test payloads gzip cannot shrink: checkpoints are stored gzipped, and a test that needs one
over the saver's 350 KB offload threshold must still be over it once compressed."""

from __future__ import annotations

import base64
import random


def incompressible_text(characters: int, seed: int = 17) -> str:
    """``characters`` characters of random base64 (the same for the same seed): gzip keeps about
    three quarters of them."""
    data = random.Random(seed).randbytes(characters * 3 // 4 + 3)
    return base64.b64encode(data).decode()[:characters]
