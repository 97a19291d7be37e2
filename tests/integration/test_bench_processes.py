"""The bench's own processes end, whatever they do with SIGTERM."""

from __future__ import annotations

import subprocess
import sys

from bench.park import stop


def test_a_server_that_ignores_sigterm_is_killed_after_its_grace() -> None:
    code = (
        "import signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "print('ready', flush=True); time.sleep(120)"
    )
    process = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None and process.stdout.readline().strip() == "ready"
        stop(process, grace=0.5)
        # Killed (SIGKILL), not ended by the SIGTERM it ignored.
        assert process.returncode == -9
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
