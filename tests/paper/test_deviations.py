"""Every price row that differs from the run protocol's figures has its deviation entry, and
the paper's deviations appendix lists it (protocol §5.2 notes (iii)-(iv), §6)."""

from pathlib import Path

import pytest
import yaml

from market_agents.paper import cards
from market_agents.prices import load_prices

ROOT = Path(__file__).resolve().parents[2]
PRICES = ROOT / "config" / "prices.yaml"


def test_every_price_row_that_differs_from_the_protocol_is_logged():
    table = load_prices(PRICES)
    differing = cards.price_deviations(table)
    # the Claude rows are list-price patterns, 10x and 1.5x the protocol's note (iii)
    assert {d["model"] for d in differing} == {"claude-haiku-5-5", "claude-sonnet-5-5"}
    unlogged = [d["model"] for d in differing if d["entry"] is None]
    assert unlogged == [], f"price rows unlike the protocol's without a deviation: {unlogged}"
    md = cards.deviations_md([], "log", None, table)
    assert ("- claude-haiku-5-5: 1.91 in config/prices.yaml, 0.19 in the protocol (10x); "
            "logged") in md
    assert "claude-sonnet-5-5: 5.73 in config/prices.yaml, 3.8 in the protocol" in md
    assert "NOT LOGGED" not in md


def test_a_price_row_changed_without_its_entry_fails_the_check(tmp_path):
    """The check itself: nano priced at twice the protocol's rate, with no entry, is named."""
    data = yaml.safe_load(PRICES.read_text())
    data["models"]["gpt-5.4-nano"]["output"] = 3.0
    path = tmp_path / "prices.yaml"
    path.write_text(yaml.safe_dump(data))
    differing = {d["model"]: d for d in cards.price_deviations(load_prices(path))}
    assert differing["gpt-5.4-nano"]["entry"] is None
    assert differing["gpt-5.4-nano"]["protocol_usd_per_1000"] == 0.44
    assert "gpt-5.4-nano: 0.842 in config/prices.yaml, 0.44 in the protocol (1.9x); NOT LOGGED" \
        in cards.deviations_md([], "log", None, load_prices(path))


@pytest.mark.parametrize("model", sorted(cards.PROTOCOL_USD_PER_1000))
def test_each_protocol_price_is_a_row_of_the_table(model):
    assert model in load_prices(PRICES).models
