"""Where built layers are kept: one cache per user, shared by every clone on the machine."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from infra.constants import bundle_cache_dir
from infra.requirements import cache_key

if TYPE_CHECKING:
    import pytest


def test_the_cache_is_in_the_users_cache_folder_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", "/home/ann")
    assert bundle_cache_dir({}) == Path("/home/ann/.cache/agent-wait/layers")


def test_xdg_cache_home_moves_it() -> None:
    assert bundle_cache_dir({"XDG_CACHE_HOME": "/var/cache/ann"}) == Path("/var/cache/ann/agent-wait/layers")


def test_agent_wait_layer_cache_names_it_whatever_else_is_set() -> None:
    environ = {"AGENT_WAIT_LAYER_CACHE": "~/layers", "XDG_CACHE_HOME": "/var/cache/ann"}
    assert bundle_cache_dir(environ) == Path("~/layers").expanduser()


def test_an_empty_setting_is_not_a_folder() -> None:
    assert bundle_cache_dir({"AGENT_WAIT_LAYER_CACHE": "", "XDG_CACHE_HOME": "/x"}) == Path(
        "/x/agent-wait/layers"
    )


def test_a_host_build_is_keyed_on_the_machine_that_runs_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """Clones on one machine share the cache; a home folder shared by two kinds of machine must not
    hand one a host layer built for the other."""
    here = cache_key("core", "host")
    monkeypatch.setattr("platform.machine", lambda: "some-other-arch")
    assert cache_key("core", "host") != here
    lambda_key = cache_key("core", "lambda")
    monkeypatch.setattr("platform.machine", lambda: "yet-another-arch")
    assert cache_key("core", "lambda") == lambda_key
