"""The count of listing shards: from the environment to the ledger, checked in the settings."""

from __future__ import annotations

import pytest

from infra.config import ConfigError, StackConfig
from wait_service.ledger import Ledger
from wait_service.settings import Settings, SettingsError


def test_the_environment_sets_the_ledgers_listing_shards() -> None:
    settings = Settings.from_env({"AGENT_WAIT_LEDGER_TABLE": "ledger", "AGENT_WAIT_LISTING_SHARDS": "16"})
    assert settings.listing_shards == 16
    assert Settings.from_env({}).listing_shards == 1
    ledger = Ledger("ledger", object(), listing_shards=settings.listing_shards)  # type: ignore[arg-type]
    assert ledger.listing_shards == 16


@pytest.mark.parametrize("value", ["0", "65", "many"])
def test_a_count_out_of_range_is_refused_naming_the_variable(value: str) -> None:
    with pytest.raises(SettingsError, match="AGENT_WAIT_LISTING_SHARDS"):
        Settings.from_env({"AGENT_WAIT_LISTING_SHARDS": value})
    with pytest.raises(ValueError, match="listing_shards"):
        Ledger("ledger", object(), listing_shards=int(value) if value.isdigit() else 0)  # type: ignore[arg-type]


def test_the_context_key_defaults_to_one_and_takes_one_to_sixty_four() -> None:
    unset: dict[str, str] = {}
    assert StackConfig.from_context(unset.get).listing_shards == 1
    assert StackConfig.from_context({"listing_shards": "16"}.get).listing_shards == 16
    for value in ("0", "65", "1.5"):
        with pytest.raises(ConfigError, match=r"listing_shards=.*expected a whole number of shards"):
            StackConfig.from_context({"listing_shards": value}.get)
