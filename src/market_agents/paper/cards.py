"""``model_cards.md`` and the deviations appendix, as pure functions of frames and dicts.

The deviations log (``results/manifests/deviations.jsonl``: one JSON object a line, dated, with
a reason) is written by the guards of the pre-registration; this module only reads the entries
it is given, plus the deviations the project already knows (:data:`KNOWN_DEVIATIONS`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import polars as pl

from market_agents import layout
from market_agents.prices import PriceTable

# Deviations of this implementation from the run protocol (WP 27, 2026-10-27), with the date
# they were recorded (the commit that introduced each).
KNOWN_DEVIATIONS: tuple[dict[str, str], ...] = (
    {"date": "2026-11-29", "section": "§5.2",
     "reason": "The protocol's stated confirmatory total (≈ 66,000 decisions, ≈ 33.3 USD) does "
               "not match its own rows, which sum to 53,388 decisions and 32.58 USD at the "
               "planning rates; the design and the budget gate use the rows (`ma budget "
               "config/designs/confirmatory.yaml` reproduces every row)."},
    {"date": "2026-11-29", "section": "§1-§2",
     "reason": "Paths under `configs/` in the protocol live under `config/` here "
               "(config/baseline.yaml, config/designs/<design>.yaml, config/prices.yaml)."},
    {"date": "2026-11-29", "section": "§1",
     "reason": "The package requires Python >= 3.11 (pyproject.toml), not the protocol's "
               ">= 3.12; the tests and the lock file (uv.lock) are run on 3.11."},
    {"date": "2026-12-01", "section": "§6",
     "reason": "The analysis reads, besides outcomes.parquet, ticks.parquet, trades.parquet and "
               "llm_decisions.parquet, each run's manifest.json (spend, prompt and schema "
               "hashes, answer dates), the design YAML (a cell's burn-in and model settings), "
               f"config/prices.yaml (the model cards), {layout.freeze_path()} (the MDE) "
               "and pilot.json, the budget gate's manifests (seeds cut) and the deviations "
               "log."},
    {"date": "2026-12-01", "section": "§2",
     "reason": "Free (classical and mock) runs of a cell are made in one process per batch of "
               "seeds (`ma cell --seed S1 S2 ... --runs-file`), not one command per run; live "
               "runs stay one job each."},
    {"date": "2026-12-01", "section": "§2, §6",
     "reason": "Outcomes are extracted in the run job itself (`ma cell --score` writes "
               "outcomes.json beside the run), not by a separate pass; `ma outcomes` re-scores "
               "saved files at any thresholds into a file beside outcomes.json."},
    {"date": "2026-12-01", "section": "§5.2 T6",
     "reason": "auction_25 and interval_10 run on the seed pool's first ten seeds (101-110), "
               "not seeds 1-10: share_0, their control, runs on 101-130, so on 1-10 they had "
               "no paired control run and could estimate nothing (and seeds 1-3 are pilot "
               "seeds, §4). They stay mock only and free."},
    {"date": "2026-12-01", "section": "§4, §5.1",
     "reason": "The protocol leaves the multiplicity family and the power calculation open. "
               "Here each tier's Holm family is its contrasts (every cell against the cell its "
               "design names, default share_0, and the design's interactions, E5 in T4) x the "
               "design's declared primary outcomes (volatility, mispricing); every other "
               "outcome is secondary, unadjusted and exploratory. The MDE is that of the "
               "paired t test on n - 1 df (noncentral t, power 0.8) at the family's Holm level "
               "alpha / size, not a normal approximation."},
    {"date": "2026-12-04", "section": "§4, §5.1",
     "reason": "The freeze sizes each MDE at the one-sided 80 % upper confidence bound of "
               "sigma_d (chi-square on the pilot's pairs - 1 df), not at the pilot's sigma_hat "
               "itself, which on 1-2 df can be a fraction of sigma_d; the share cells' "
               "sigma_hat are pooled as exchangeable (the design's power block). The MDE at "
               "sigma_hat is recorded beside it; 'underpowered' uses the bound."},
    {"date": "2026-12-04", "section": "§5.2 T4 (E5), T6",
     "reason": "The protocol's T4 lists leverage_0 as the free control of the E5 "
               "interaction; its family here counts E5, (leverage_25 - share_25) - "
               "(leverage_0 - share_0), once and leverage_0 - share_0 (a purely classical "
               "contrast) not at all. auction_25 and interval_10 (a mechanism with a quarter "
               "mock traders) are compared with share_25, the cell they differ from by the "
               "mechanism alone, not with share_0; in live results share_25's traders are "
               "gpt-5.4-nano, theirs the mock, so there the contrast also carries that "
               "difference. Declared in the design (a cell's against:, interactions:)."},
    {"date": "2026-11-29", "section": "§5.2 note (iii)", "model": "claude-haiku-5-5",
     "reason": "config/prices.yaml prices claude-haiku-5-5 at Anthropic's Haiku list-price "
               "pattern (1.00 USD in, 5.00 out per 1M tokens; source: assumed, the row's "
               "source field), not at the protocol's ≈ 0.19 USD per 1,000 decisions, which "
               "no published Haiku rate reproduces at 760 tokens in and 230 out. No Claude "
               "cell is in the 40 USD plan; confirm the price before any live Claude cell."},
    {"date": "2026-11-29", "section": "§5.2 note (iii)", "model": "claude-sonnet-5-5",
     "reason": "config/prices.yaml prices claude-sonnet-5-5 at Anthropic's Sonnet list-price "
               "pattern (3.00 USD in, 15.00 out per 1M tokens; source: assumed, the row's "
               "source field), not at the protocol's ≈ 3.8 USD per 1,000 decisions. No "
               "Claude cell is in the 40 USD plan; confirm the price before any live Claude "
               "cell."},
)
# The protocol's price of one decision per model, USD per 1,000 decisions at its planning
# profile (760 tokens in, 230 out: §5.2 note (iv)): nano's measured rate (§4: 0.00044 per
# decision), mini's planning rate (§5.2: 0.0016), the Claude models' (§5.2 note (iii)). A row of
# config/prices.yaml that prices a decision more than PRICE_TOLERANCE away needs its
# KNOWN_DEVIATIONS entry (its ``model``).
PROTOCOL_USD_PER_1000 = {"gpt-5.4-nano": 0.44, "gpt-5.4-mini": 1.6, "claude-haiku-5-5": 0.19,
                         "claude-sonnet-5-5": 3.8}
PROTOCOL_TOKENS = (760, 230)
PRICE_TOLERANCE = 0.10  # the protocol's figures are rounded (≈)
DATE_KEYS = ("date", "timestamp", "time", "created", "created_at")
REASON_KEYS = ("reason", "text", "message", "deviation")


def parse_deviations(lines: Iterable[str], where: str) -> list[dict[str, Any]]:
    """Entries of a deviations log (JSON lines); a line that is not a JSON object is kept as a
    problem entry naming ``where`` and its line number, so nothing in the log is dropped."""
    out = []
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
            if not isinstance(entry, dict):
                raise ValueError("not an object")
        except ValueError:
            entry = {"date": "", "reason": f"{where}:{i}: unreadable line: {line.strip()[:200]}"}
        out.append(entry)
    return out


def _first(entry: dict[str, Any], keys: tuple[str, ...]) -> str:
    return next((str(entry[k]) for k in keys if entry.get(k) not in (None, "")), "")


def price_deviations(table: PriceTable) -> list[dict[str, Any]]:
    """The rows of a price table that price a decision otherwise than the protocol
    (:data:`PROTOCOL_USD_PER_1000`, beyond :data:`PRICE_TOLERANCE`), each with the table's
    and the protocol's USD per 1,000 decisions and its KNOWN_DEVIATIONS entry (None: not
    logged)."""
    logged = {d["model"]: d for d in KNOWN_DEVIATIONS if d.get("model")}
    out = []
    for model, protocol in PROTOCOL_USD_PER_1000.items():
        if model not in table.models:
            continue
        usd = 1000 * table.planned_cost(model, *PROTOCOL_TOKENS)
        if abs(usd / protocol - 1) > PRICE_TOLERANCE:
            out.append({"model": model, "usd_per_1000": usd, "protocol_usd_per_1000": protocol,
                        "entry": logged.get(model)})
    return out


def deviations_md(logged: list[dict[str, Any]], log_path: str, mock_note: str | None,
                  prices: PriceTable | None = None) -> str:
    """The appendix: every logged deviation (date, reason, and any other fields such as the
    runs it touched), then the known ones, then each price row that differs from the
    protocol's figure (:func:`price_deviations` of ``prices``), marked when it is not
    logged."""
    lines = ["# Deviations from the run protocol", ""]
    if mock_note:
        lines += [f"**{mock_note}.**", ""]
    lines += [f"## Logged ({log_path})", ""]
    if not logged:
        lines += ["No deviation has been logged.", ""]
    for e in sorted(logged, key=lambda e: _first(e, DATE_KEYS)):
        extra = {k: v for k, v in e.items() if k not in (*DATE_KEYS, *REASON_KEYS)}
        tail = f" ({json.dumps(extra, sort_keys=True, ensure_ascii=False)})" if extra else ""
        lines.append(f"- {_first(e, DATE_KEYS) or 'undated'}: {_first(e, REASON_KEYS)}{tail}")
    lines += ["", "## Known deviations of this implementation", ""]
    lines += [f"- {d['date']} ({d['section']}): {d['reason']}" for d in KNOWN_DEVIATIONS]
    if prices is not None:
        a, b = PROTOCOL_TOKENS
        lines += ["", f"## Prices that differ from the protocol (USD per 1,000 decisions at "
                  f"{a} tokens in, {b} out)", ""]
        lines += [f"- {d['model']}: {d['usd_per_1000']:.3g} in config/prices.yaml, "
                  f"{d['protocol_usd_per_1000']:.3g} in the protocol "
                  f"({d['usd_per_1000'] / d['protocol_usd_per_1000']:.2g}x); "
                  + (f"logged {d['entry']['date']} ({d['entry']['section']})" if d["entry"]
                     else "NOT LOGGED as a deviation")
                  for d in price_deviations(prices)] or ["None."]
    return "\n".join(lines) + "\n"


def _listed(column: pl.Series, kind: str = "") -> str:
    values = sorted({v for v in column.to_list() if v})
    if values:
        return ", ".join(f"`{v}`" for v in values)
    # a frozen-library replay sends no prompt: each decision is the recorded one nearest its
    # state, so there is no hash to record, which is not the same as a run made before hashes
    return ("none sent: decisions replayed from the frozen library (see its prompt versions)"
            if kind == "library" else "not recorded (runs made before hashes)")


def model_cards_md(uses: pl.DataFrame, prices: dict[str, Any], mock_note: str | None) -> str:
    """One card per (provider, model) used by the design's runs.

    Args:
        uses: one row per run and route/model: cell, seed, route, kind (the provider that
            answered), model, decisions, prompt_version, prompt_sha256 and schema_sha256 (the
            run manifest's: the prompt and schema as sent), first_date and date (YYYY-MM-DD:
            when the run's answers were recorded), effort, max_output_tokens, temperature.
        prices: ``config/prices.yaml`` as a dict (``models`` -> rows with date and source).
        mock_note: when set (a rehearsal), a bold line saying the mock answered under these
            model ids, priced as live; None for live answers.
    """
    lines = ["# Model cards", ""]
    if mock_note:
        lines += [f"**{mock_note}: the provider that answered is the mock, under the model ids "
                  "below, priced as live.**", ""]
    lines += ["Prompt and schema SHA-256 are those the runs' manifests record (the messages "
              "rendered on a fixed probe state, and the answer schema); dates are those on "
              "which the answers were recorded (the cache entries).", ""]
    if uses.is_empty():
        return "\n".join([*lines, "No LLM model was used by this design's runs.", ""])
    table = prices.get("models", {})
    per = prices.get("per_tokens", 1_000_000)
    for (route, kind, model), g in sorted(uses.group_by("route", "kind", "model"),
                                          key=lambda kv: kv[0]):
        row = table.get(model, {})
        dates = sorted(d for d in [*g["first_date"].to_list(), *g["date"].to_list()] if d)

        settings = g.select("effort", "max_output_tokens", "temperature").unique().sort(
            pl.all(), nulls_last=True)
        lines += [f"## {model} ({route})", "",
                  f"- provider: {row.get('provider', '?')} (route `{route}`, answered by "
                  f"`{kind}`)",
                  f"- model id: `{model}`",
                  f"- dates used: {dates[0]} to {dates[-1]}" if dates else "- dates used: not "
                  "recorded (the runs' answers came from no response cache)",
                  f"- cells: {', '.join(sorted(g['cell'].unique().to_list()))}; runs: "
                  f"{g.select('cell', 'seed').unique().height}; decisions: "
                  f"{int(g['decisions'].sum()):,}",
                  f"- prices (USD per {per:,} tokens): input {row.get('input', '?')}, cached "
                  f"input {row.get('cached_input', '?')}, output {row.get('output', '?')}, "
                  f"cache write x{row.get('cache_write_multiplier', '?')}; source: "
                  f"{row.get('source', 'not in config/prices.yaml')}; date: {row.get('date', '?')}",
                  "- settings: " + "; ".join(
                      f"effort {e}, max output tokens {m}, temperature "
                      f"{'provider default' if t is None else t}"
                      for e, m, t in settings.iter_rows()),
                  f"- prompt version: {', '.join(sorted(set(g['prompt_version'].drop_nulls())))}",
                  f"- prompt SHA-256: {_listed(g['prompt_sha256'], kind)}",
                  f"- answer schema SHA-256: {_listed(g['schema_sha256'], kind)}",
                  ""]
    return "\n".join(lines)
