"""Headless Chromium for the inbox page's tests: Debian's ``chromium`` driven by ``chromium-driver``.

Outside CI a machine without them skips the browser tests with the reason; ``.ci/run`` installs
them and sets ``AGENT_WAIT_REQUIRE_BROWSER=1``, which turns that skip into a failure, so the tests
can never silently stop running there.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from collections.abc import Callable

    from selenium.webdriver.remote.webdriver import WebDriver

CHROMIUM = os.environ.get("AGENT_WAIT_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get(
    "AGENT_WAIT_CHROMEDRIVER", shutil.which("chromedriver") or "/usr/bin/chromedriver"
)
# The sandbox this runs in has no user namespaces, no GPU and no network beyond 127.0.0.1.
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--hide-scrollbars",
)
OUTPUT = Path(__file__).resolve().parents[2] / "test-output"
STEP = 20.0


def require_chromium() -> None:
    """Skip (fail on CI) when chromium or its driver is missing."""
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not Path(p).is_file()]
    if not missing:
        return
    reason = f"{', '.join(missing)} missing: apt-get install -y chromium chromium-driver"
    if os.environ.get("AGENT_WAIT_REQUIRE_BROWSER"):
        pytest.fail(reason)
    pytest.skip(reason)


def launch(profile: Path, width: int = 1280, height: int = 900) -> WebDriver:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile}")
    options.add_argument(f"--window-size={width},{height}")
    # An explicit driver path: Selenium Manager never tries to download one.
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(STEP)
    return driver


def until(driver: WebDriver, check: Callable[[WebDriver], Any], what: str, timeout: float = STEP) -> Any:
    """Poll the page until ``check`` returns something truthy (the page works on its own timers)."""
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            value = check(driver)
        except Exception as exc:  # noqa: BLE001 - an element not there yet
            last = exc
            value = None
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what} (last error: {last})")


def text_of(driver: WebDriver, element_id: str) -> str:
    from selenium.webdriver.common.by import By

    return str(driver.find_element(By.ID, element_id).text)
