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
               "Here each tier's Holm family is its contrasts (every cell against share_0, E5 "
               "in T4) x the design's declared primary outcomes (volatility, mispricing); "
               "every other outcome is secondary, unadjusted and exploratory. The MDE is that "
               "of the paired t test on n - 1 df (noncentral t, power 0.8) at the family's "
               "Holm level alpha / size, not a normal approximation."},
)
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


def deviations_md(logged: list[dict[str, Any]], log_path: str, mock_note: str | None) -> str:
    """The appendix: every logged deviation (date, reason, and any other fields such as the
    runs it touched), then the known ones."""
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
    return "\n".join(lines) + "\n"


def _listed(column: pl.Series) -> str:
    values = sorted({v for v in column.to_list() if v})
    return ", ".join(f"`{v}`" for v in values) or "not recorded (runs made before hashes)"


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
                  f"- prompt SHA-256: {_listed(g['prompt_sha256'])}",
                  f"- answer schema SHA-256: {_listed(g['schema_sha256'])}",
                  ""]
    return "\n".join(lines)
