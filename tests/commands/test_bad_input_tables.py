"""Issue 33: switches and tables that mean money refuse what they do not understand.

Each case runs the real ``ma run`` (a process, as a user starts it) against the local fake API
on the small live run of ``tests/support/liverun.py`` (25 requests when it runs), and checks:
exit 2, one line naming the variable, key, file or row, no traceback, no key in the output, no
request sent, and nothing written (no run directory, no cache, no spend ledger). On e83eada
each of these runs paid its calls, or stopped after its retries without naming the cause, or
ended in a traceback.
"""

from __future__ import annotations

import sqlite3
import subprocess
from pathlib import Path

import pytest

from market_agents.testing.fakeserver import FakeAPI
from tests.support import ROOT
from tests.support.liverun import SECRET, env, ma_run_cmd, one_line_error

PRICES = ROOT / "config" / "prices.yaml"


@pytest.fixture
def api():
    """The local fake API (OpenAI and Anthropic wire formats); its ``requests`` list what
    reached it."""
    with FakeAPI() as server:
        yield server


def ma_run(tmp: Path, api, *args: str, extra_env: dict[str, str] | None = None,
           **overrides) -> subprocess.CompletedProcess:
    """``ma run`` of the small live run into ``tmp/run`` with ``tmp/cache``, from ``tmp``."""
    cmd = ma_run_cmd(tmp / "run", tmp / "cache", 1, *args, **overrides)
    return subprocess.run(cmd, capture_output=True, text=True, cwd=tmp, timeout=600,
                          env=env(api, **(extra_env or {})))


def assert_nothing_done(tmp: Path, api=None, keep: set[str] = frozenset()) -> None:
    """No request reached the API and ``tmp`` holds only what the test put there."""
    assert api is None or api.requests == []
    assert {p.name for p in tmp.iterdir()} <= set(keep), sorted(p.name for p in tmp.iterdir())


def price_table(tmp: Path, old: str, new: str) -> Path:
    """A copy of config/prices.yaml with ``old`` replaced by ``new`` once."""
    text = PRICES.read_text()
    assert old in text
    path = tmp / "prices.yaml"
    path.write_text(text.replace(old, new, 1))
    return path


# --- 1. boolean switches ------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["MARKET_AGENTS_REPLAY", "MARKET_AGENTS_NEW_CACHE"])
def test_a_switch_neither_on_nor_off_is_refused_before_any_call(tmp_path, api, name):
    # e83eada read MARKET_AGENTS_REPLAY=maybe as "off" and paid 25 live calls
    err = one_line_error(ma_run(tmp_path, api, extra_env={name: "maybe"}))
    assert err.startswith(f"ma run: error: {name}='maybe': ")
    assert "1/true/yes" in err and "0/false/no" in err
    assert_nothing_done(tmp_path, api)


def test_a_documented_switch_value_still_works(tmp_path):
    # MARKET_AGENTS_REPLAY=YES replays: without a cache entry that is a miss, not a paid call
    proc = subprocess.run(ma_run_cmd(tmp_path / "run", None, 1), capture_output=True, text=True,
                          cwd=tmp_path, timeout=600,
                          env=env(None, MARKET_AGENTS_REPLAY=" YES "))
    assert "--replay: serving every answer from the record needs --cache" in \
        one_line_error(proc)


# --- 4. a foreign cache.db ----------------------------------------------------------------------

def test_another_applications_database_as_cache_is_refused_untouched(tmp_path, api):
    # e83eada wrote the cache's tables into it, then paid the run's calls
    (tmp_path / "cache").mkdir()
    con = sqlite3.connect(tmp_path / "cache" / "cache.db")
    con.execute("CREATE TABLE users (id INTEGER, email TEXT)")
    con.execute("INSERT INTO users VALUES (1, 'a@example.org')")
    con.commit()
    con.close()
    before = (tmp_path / "cache" / "cache.db").read_bytes()
    err = one_line_error(ma_run(tmp_path, api))
    assert err.startswith(f"ma run: error: --cache {tmp_path / 'cache'}: cache.db: another "
                          "application's SQLite database, not an LLM response cache")
    assert (tmp_path / "cache" / "cache.db").read_bytes() == before
    assert [p.name for p in (tmp_path / "cache").iterdir()] == ["cache.db"]
    assert_nothing_done(tmp_path, api, keep={"cache"})


# --- 2, 3, 5. the price table ------------------------------------------------------------------

def test_a_hosted_route_priced_zero_is_refused_naming_the_row(tmp_path, api):
    # e83eada ran it with the USD caps inert (planned 0 USD, no ledger record) and no warning
    prices = price_table(tmp_path, "input: 0.20\n    cached_input: 0.02\n    output: 1.25",
                         "input: 0.0\n    cached_input: 0.0\n    output: 0.0")
    err = one_line_error(ma_run(tmp_path, api, extra_env={"MARKET_AGENTS_PRICES": str(prices)}))
    assert err.startswith(f"ma run: error: {prices}: models.gpt-5.4-nano: priced 0 USD")
    assert "providers.<route>.free" in err
    assert_nothing_done(tmp_path, api, keep={"prices.yaml"})


def test_a_row_priced_for_another_provider_is_refused_naming_file_and_row(tmp_path, api):
    # e83eada priced the openai route's calls from the anthropic row and paid them
    err = one_line_error(ma_run(tmp_path, api, **{
        "population.llm.models": "{openai: claude-haiku-5-5}"}))
    assert err.startswith(f"ma run: error: {PRICES}: models.claude-haiku-5-5.provider: the row "
                          "is priced for provider 'anthropic', but route 'openai'")
    assert_nothing_done(tmp_path, api)


@pytest.mark.parametrize("price", ["1e308", "20000"])
def test_a_price_above_the_bound_is_refused_naming_file_row_and_key(tmp_path, api, price):
    # e83eada simulated with 1e308, halted every call (worst case inf) and died writing the
    # manifest: "Out of range float values are not JSON compliant: inf" (a traceback)
    prices = price_table(tmp_path, "output: 1.25", f"output: {price}")
    err = one_line_error(ma_run(tmp_path, api, extra_env={"MARKET_AGENTS_PRICES": str(prices)}))
    assert err.startswith(f"ma run: error: {prices}: models.gpt-5.4-nano.output: ")
    assert_nothing_done(tmp_path, api, keep={"prices.yaml"})


# --- 6. base URLs -------------------------------------------------------------------------------

@pytest.mark.parametrize("name,url", [
    ("OPENAI_BASE_URL", "not a url"),
    ("OPENAI_BASE_URL", "ftp://x"),
    ("ANTHROPIC_BASE_URL", "ftp://x"),
    ("ANTHROPIC_BASE_URL", "127.0.0.1:8000"),
])
def test_a_base_url_variable_that_is_not_http_is_refused_before_the_run(tmp_path, name, url):
    # e83eada sent the run's requests nowhere and stopped after 12-13 s in a failure-rate stop
    # classed `reset`, naming neither the variable nor the URL
    route = "anthropic" if name.startswith("ANTHROPIC") else "openai"
    model = "claude-haiku-5-5" if route == "anthropic" else "gpt-5.4-nano"
    extra = {name: url}
    overrides = {"population.llm.provider_mix": f"{{{route}: 1.0}}",
                 "population.llm.models": f"{{{route}: {model}}}"}
    err = one_line_error(ma_run(tmp_path, None, extra_env=extra, **overrides))
    assert err.startswith(f"ma run: error: {name}={url!r}: ")
    assert "http(s) URL" in err
    assert_nothing_done(tmp_path)


def test_a_base_url_key_that_is_not_http_is_refused_naming_the_key(tmp_path, api):
    err = one_line_error(ma_run(
        tmp_path, api, **{"population.llm.providers": "{openai: {base_url: 'ftp://x'}}"}))
    assert "population.llm.providers.openai.base_url: not an http(s) URL" in err
    assert_nothing_done(tmp_path, api)


def test_a_base_url_holding_a_password_is_not_quoted(tmp_path):
    url = f"ftp://user:{SECRET}@host/v1"
    err = one_line_error(ma_run(tmp_path, None, extra_env={"OPENAI_BASE_URL": url}))
    assert err.startswith("ma run: error: OPENAI_BASE_URL=") and "user" not in err
    assert_nothing_done(tmp_path)


def test_a_bazaar_base_url_that_is_not_http_is_refused_naming_the_argument(capsys):
    from market_agents.cli import main

    with pytest.raises(SystemExit) as info:
        main(["bazaar", "eval", "--provider", "openai_compatible", "--base-url", "ftp://x",
              "--model", "m", "--free"])
    assert info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "argument --base-url: 'ftp://x': not an http(s) URL" in err


# --- 5. nothing non-finite reaches a manifest ---------------------------------------------------

def test_a_non_finite_number_bound_for_a_manifest_is_one_line_and_no_run(tmp_path, monkeypatch,
                                                                         capsys):
    # the price bound keeps every worst case finite; should any other number of a manifest be
    # infinite, the run is refused in one line naming the file and key, and nothing is written
    # (e83eada: a traceback, "Out of range float values are not JSON compliant: inf")
    import market_agents.sim.rundir as rundir
    from market_agents.cli import main

    real = rundir.write_files

    def infinite(path, config_yaml, tables, manifest):
        real(path, config_yaml, tables, manifest | {"wall_time_s": float("inf")})

    monkeypatch.setattr(rundir, "write_files", infinite)
    monkeypatch.chdir(tmp_path)
    code = main(["run", str(ROOT / "config" / "baseline.yaml"), "--seed", "1", "--out", "run",
                 "--quiet", "--set", "simulation.ticks=60", "--set", "simulation.burn_in=10",
                 "--set", "population.llm_share=0"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1, err
    assert err == ("ma run: error: manifest.json: wall_time_s is inf: JSON holds finite numbers "
                   "only, so the file is not written")
    assert list(tmp_path.iterdir()) == []
