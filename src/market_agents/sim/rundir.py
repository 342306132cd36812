"""The run-directory format (docs/interfaces.md): the files one run writes, the schema of each
table, and how they are read back. The one place that names them: the runner writes with it,
scoring, the protocol's steps, the figures and the workflow's rules read with it.

A run directory ``results/runs/<design>/<cell>/seed<NNNN>/`` is written whole by
:func:`market_agents.sim.runner.run_to_dir` (a temporary sibling renamed into place), so it is
complete or absent; ``outcomes.json`` is added later by the scoring step, atomically. A run that
stopped because too many LLM calls failed leaves ``<run>.failed.json`` beside it instead
(:func:`failed_record`).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from market_agents.atomic import json_text
from market_agents.errors import MarketAgentsError
from market_agents.inputs import read_yaml
from market_agents.prices import load_prices
from market_agents.sim.fingerprint import fingerprint, short

if TYPE_CHECKING:  # annotations only: polars loads where a table is read or written
    import polars as pl

CONFIG_FILE = "config.yaml"
MANIFEST_FILE = "manifest.json"
OUTCOMES_FILE = "outcomes.json"
FAILED_SUFFIX = ".failed.json"

# The tables of a run, their columns and each column's polars type, by its name; every run
# writes all five, the llm_decisions table empty (same columns) when there are no LLM traders.
COLUMN_TYPES: dict[str, dict[str, str]] = {
    "ticks": {
        "tick": "Int32", "asset": "Int32", "last_price": "Float64", "mid_price": "Float64",
        "best_bid": "Float64", "best_ask": "Float64", "spread": "Float64",
        "fundamental": "Float64", "public_value": "Float64", "volume": "Int64",
        "n_trades": "Int32", "halted": "Boolean",
    },
    "trades": {
        "tick": "Int32", "asset": "Int32", "price": "Float64", "qty": "Int64",
        "buyer": "Int32", "seller": "Int32", "aggressor": "Int8", "buyer_llm": "Boolean",
        "seller_llm": "Boolean",
    },
    "orders": {
        "tick": "Int32", "slot": "Int32", "asset": "Int32", "order_id": "Int64",
        "kind": "Utf8", "side": "Int8", "qty": "Int64", "price": "Float64",
        "status": "Utf8", "reason": "Utf8", "is_llm": "Boolean", "rounded_price": "Float64",
    },
    "agents": {
        "slot": "Int32", "type": "Utf8", "is_llm": "Boolean", "phase": "Int32",
        "cash": "Float64", "shares": "Int64", "shares_1": "Int64", "wealth": "Float64",
        "n_decisions": "Int32",
    },
    "llm_decisions": {
        "tick": "Int32", "slot": "Int32", "provider": "Utf8", "model": "Utf8",
        "prompt_id": "Utf8", "prompt_version": "Utf8", "valid": "Boolean", "action": "Utf8",
        "qty": "Int64", "price": "Float64", "tokens_in": "Int64", "tokens_cached": "Int64",
        "tokens_out": "Int64", "tokens_reasoning": "Int64", "usd": "Float64",
        "latency_s": "Float64", "error_class": "Utf8", "error_detail": "Utf8",
        "answer_sha256": "Utf8",
    },
}
TABLES: tuple[str, ...] = tuple(COLUMN_TYPES)


def __getattr__(name: str) -> Any:
    """``SCHEMAS``: table -> column -> polars data type (:data:`COLUMN_TYPES`), built on first
    use (PEP 562): the Snakefile imports this module for the file names, and Snakemake's
    process never loads polars (0.12 CPU s of each start; bench/README.md).

    Raises:
        AttributeError: any other name.
    """
    if name != "SCHEMAS":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import polars as pl  # why: see the docstring

    schemas = {table: {col: getattr(pl, dtype) for col, dtype in cols.items()}
               for table, cols in COLUMN_TYPES.items()}
    globals()["SCHEMAS"] = schemas  # later lookups find the module attribute itself
    return schemas

# Every file a finished simulation leaves in its run directory (the workflow's `output:`).
RUN_FILES: tuple[str, ...] = (CONFIG_FILE, MANIFEST_FILE, *(f"{t}.parquet" for t in TABLES))


class RunDirError(MarketAgentsError):
    """A run directory is missing a file or holds an unreadable one."""


class StaleRun(MarketAgentsError):
    """A saved run was made from a config the design no longer gives."""


# manifest.json's ``llm_usage`` of a run without LLM traders: what the LLM client of a run that
# made no request reports (``LLMClient.usage_summary``; tests/sim/test_runner.py checks they
# agree), written here so that a classical run loads nothing of the LLM layer.
NO_LLM_USAGE: dict[str, Any] = {
    "requests": 0, "calls": 0, "answered": 0, "cache_hits": 0, "cached_hits": 0.0, "valid": 0,
    "invalid": 0, "failures": 0, "failures_by_class": {}, "retries_by_class": {},
    "budget_halts": 0, "decision_cap_holds": 0, "budget_halt_events": [], "halt_tick": None,
    "reserved_at_halt_usd": None, "spent_at_halt_usd": None, "usd_cap": None,
    "usd_over_cap": 0.0, "tokens_in": 0, "tokens_cached": 0, "tokens_cache_write": 0,
    "tokens_out": 0, "tokens_reasoning": 0, "usd": 0.0, "usd_live": 0.0, "usd_spent": 0.0,
    "usage_missing": 0, "worst_case_charges": {}, "claim_waits": 0, "claims_taken_over": 0,
    "answers_discarded": 0,
    "replay": False,
}


# The LLM traders' activity counts (manifest ``activity``, None in a run without LLM traders)
# and the LLM outcomes that count what stopped their decisions: outcome name -> (label, format)
# for ``ma summary`` and the paper's activity table.
LLM_ACTIVITY: dict[str, tuple[str, str]] = {
    "llm_channel_sent": ("ch.sent", "{:.1f}"), "llm_channel_read": ("ch.read", "{:.1f}"),
    "llm_memory_lines": ("memory", "{:.1f}")}
LLM_HOLDS: dict[str, tuple[str, str]] = {
    "llm_decision_cap_holds": ("cap.hold", "{:.1f}"), "llm_budget_halts": ("usd.halt", "{:.1f}")}


def classical_llm_fields() -> dict[str, Any]:
    """The LLM fields of the manifest of a run without LLM traders, so every manifest has the
    replication checklist's fields (protocol §6): no prompt version, zero usage, and the price
    table in force (its newest row's date, its source file and sha256) in place of per-model
    rows."""
    return {"prompt_version": None,
            "price_assumptions": {"price_table": load_prices().provenance()},
            "llm_usage": copy.deepcopy(NO_LLM_USAGE)}  # every count zero


# The replication checklist's fields (protocol §6) that every manifest.json has.
CHECKLIST_FIELDS: tuple[str, ...] = ("config_hash", "git_revision", "prompt_version",
                                     "price_assumptions", "llm_usage", "shocks",
                                     "final_conservation_ok")


def table_file(name: str) -> str:
    """``ticks`` -> ``ticks.parquet``."""
    return f"{name}.parquet"


def failed_record(path: str | Path) -> Path:
    """Where a run that stopped and was marked failed (too many LLM calls failed) leaves its
    record instead of a run directory: ``<run>.failed.json`` beside it (the reason, tick and
    counts); the run that later finishes there removes it."""
    path = Path(path)
    return path.with_name(path.name + FAILED_SUFFIX)


def is_complete(path: str | Path) -> bool:
    """True once the runner has renamed a finished run into place (its manifest exists)."""
    return (Path(path) / MANIFEST_FILE).exists()


def write_files(path: Path, config_yaml: str, tables: dict[str, pl.DataFrame],
                manifest: dict[str, Any]) -> None:
    """Write every file of a run into ``path`` (the runner's temporary directory).

    Parquet files carry no statistics or compression metadata that could vary, so identical
    data gives identical bytes. The manifest is strict JSON (no NaN or infinities).

    Raises:
        NotJSON: the manifest holds NaN or an infinity (``market_agents.atomic``), before any
            file is written.
    """
    # the manifest's text first: a number JSON cannot hold stops the run before any file
    manifest_text = json_text(manifest, indent=2, where=MANIFEST_FILE)
    (path / CONFIG_FILE).write_text(config_yaml)
    for name in TABLES:
        tables[name].write_parquet(path / table_file(name), statistics=False)
    (path / MANIFEST_FILE).write_text(manifest_text)


def read_tables(path: str | Path) -> dict[str, pl.DataFrame]:
    """The five tables of the run at ``path``; :class:`RunDirError` naming a missing or bad
    file."""
    import polars as pl  # why: Snakemake's process imports this module, never a table
    path = Path(path)
    if not path.is_dir():
        raise RunDirError(f"{path}: not a run directory")
    frames = {}
    for name in TABLES:
        f = path / table_file(name)
        if not f.exists():
            raise RunDirError(f"{f}: missing (is {path} a finished run?)")
        try:
            frames[name] = pl.read_parquet(f)
        except Exception as exc:  # pyarrow/polars raise several types for a bad file
            raise RunDirError(f"{f}: unreadable parquet ({exc})") from None
    return frames


def read_json(path: Path) -> dict[str, Any]:
    """A JSON file of a run (manifest.json, outcomes.json); :class:`RunDirError` if missing or
    malformed."""
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise RunDirError(f"{path}: missing") from None
    except json.JSONDecodeError as exc:
        raise RunDirError(f"{path}: malformed JSON ({exc})") from None


def read_manifest(path: str | Path) -> dict[str, Any]:
    """The run's manifest.json (config_hash, seed, shocks, halts, llm_usage, ...)."""
    return read_json(Path(path) / MANIFEST_FILE)


def llm_did(usages: list[dict[str, Any]]) -> str:
    """What the LLM layer did in the runs whose ``llm_usage`` are given, for the line a command
    ends with: requests, calls made (to a provider), answers served from the cache and the USD
    this execution paid (``usd_spent``; a replay says "0 calls ... 0.00 USD paid").

    Args:
        usages: manifest ``llm_usage`` blocks (:data:`NO_LLM_USAGE` for a classical run).

    Returns:
        e.g. ``685 LLM requests: 0 calls, 685 cache hits, 0.00 USD paid``, or ``no LLM
        requests``.
    """
    requests = sum(int(u.get("requests") or 0) for u in usages)
    if not requests:
        return "no LLM requests"
    calls = sum(int(u.get("calls") or 0) for u in usages)
    hits = sum(int(u.get("cache_hits") or 0) for u in usages)
    usd = sum(float(u.get("usd_spent") or 0.0) for u in usages)
    amount = f"{usd:.2f}" if usd == 0 or usd >= 1 else f"{usd:.4f}"  # as ledger.usd
    return f"{requests} LLM requests: {calls} calls, {hits} cache hits, {amount} USD paid"


def paid_usd(manifest: dict[str, Any]) -> float:
    """USD of the paid answers a finished run used, from its manifest: the priced cost of
    every answer from a live provider, whether this execution fetched it or read it from the
    cache (``llm_usage.usd_live``; protocol §5.3's sum(llm_usd) over paid answers). That is
    what the run's record cost, and it survives a kill: answers paid before the kill are in
    the cache and counted when the run resumes. Manifests written before ``usd_live`` existed
    give ``usd_spent``."""
    usage = manifest.get("llm_usage") or {}
    if "usd_live" in usage:
        return float(usage["usd_live"] or 0.0)
    return float(usage.get("usd_spent") or 0.0)


def made_by_other_code(manifest: dict[str, Any]) -> str | None:
    """The fingerprint of the code that made a finished run (its ``manifest``) when it is not
    the current code's (``"made before fingerprints"`` for a manifest without one), else None
    (:mod:`market_agents.sim.fingerprint`)."""
    made = manifest.get("code_fingerprint")
    if made == fingerprint():
        return None
    return short(made) if made else "made before fingerprints"


def paid_by_other_code(path: Path, manifest: dict[str, Any]) -> str | None:
    """Why a finished run must stop a command that would use it: it paid and was made by other
    code than today's (one line naming it and how to make it again); None otherwise. A paid
    run is never made again silently (issue 34): ``ma design``/``ma cell`` and the workflow's
    live runs (:meth:`market_agents.pipeline.workflow.Workflow.live_gate`) stop on it."""
    other_code, usd = made_by_other_code(manifest), paid_usd(manifest)
    if other_code is None or usd <= 0:
        return None
    return (f"{path}: a paid run ({usd:.4f} USD) made by other code ({other_code}; now "
            f"{short(fingerprint())}); a paid run is never made again silently: restore the code "
            "that made it (its manifest's git_revision), or move it away to make it again and "
            "pay again")


def answer_hashes(path: str | Path) -> dict[tuple[int, int], str | None] | None:
    """(tick, slot) -> answer_sha256 of the decisions a saved run used; None when the run has
    no such record (no run there, or written before the column existed)."""
    import polars as pl  # why: Snakemake's process imports this module, never a table
    f = Path(path) / table_file("llm_decisions")
    if not f.exists():
        return None
    try:
        dec = pl.read_parquet(f, columns=["tick", "slot", "answer_sha256"])
    except Exception:  # noqa: BLE001 - an old or unreadable file has no record to check
        return None
    return {(int(t), int(s)): h for t, s, h in dec.iter_rows()}


def read_config(path: str | Path) -> dict[str, Any]:
    """The run's resolved config.yaml as a plain dict ({} when absent)."""
    f = Path(path) / CONFIG_FILE
    return read_yaml(f) if f.exists() else {}
