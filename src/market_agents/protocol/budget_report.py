"""The ``ma budget`` report: the plan of a design as a table (one line per cell, grouped by
tier, with tier totals, the cap and the planning rates), and beside it the tokens per decision
measured in response caches or run directories (shown, never used for planning). The plans
themselves are ``protocol/planning.py``'s.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from market_agents import layout
from market_agents.errors import ConfigError
from market_agents.protocol.design import Design
from market_agents.protocol.planning import CellPlan, tier_totals
from market_agents.protocol.tiers import NO_TIER, label


def render(design: Design, plans: list[CellPlan], tokens_in: int, tokens_out: int) -> str:
    """The ``ma budget`` table: one line per cell, grouped by tier, with tier totals."""
    lines = [f"{design.name}: planned live decisions and USD "
             f"({tokens_in} tokens in, {tokens_out} out per decision)",
             f"{'tier':<5} {'cell':<18} {'seeds':>5} {'n_llm':>5} {'dec/run':>8} "
             f"{'decisions':>10} {'USD plan':>9} {'USD table':>9} {'cap/run':>8}"]
    by_tier: dict[str, list[CellPlan]] = {}
    for p in plans:
        by_tier.setdefault(label(p.tier), []).append(p)
    totals = tier_totals(plans)
    for tier, rows in by_tier.items():
        for p in rows:
            if p.unavailable:
                lines.append(f"{tier:<5} {p.cell:<18} {len(p.seeds):>5} unavailable: "
                             f"{p.unavailable}")
                continue
            models = ", ".join(f"{m} {d:,}" for m, d in p.model_decisions().items())
            lines.append(
                f"{tier:<5} {p.cell:<18} {len(p.seeds):>5} {p.n_llm:>5} "
                f"{p.run_decisions:>8,.1f} {p.decisions:>10,} {p.usd:>9.2f} {p.table_usd:>9.2f} "
                f"{p.run_cap_usd:>8.2f}" + (f"  [{models}]" if len(p.by_model) > 1 else "")
                + ("" if p.live or p.n_llm == 0 else "  (no paid calls)"))
        if tier == NO_TIER:
            continue
        t = totals[tier]
        budget = design.budget.tiers.get(tier)
        lines.append(f"{'':<5} {'tier ' + tier:<18} {'':>5} {'':>5} {'':>8} "
                     f"{int(t['decisions']):>10,} {t['usd']:>9.2f} {t['table_usd']:>9.2f}"
                     + (f"  budget {budget:.2f}" if budget is not None else ""))
    dec = sum(p.decisions for p in plans)
    usd, tusd = sum(p.usd for p in plans), sum(p.table_usd for p in plans)
    lines.append(f"{'total':<24} {'':>5} {'':>5} {'':>8} {dec:>10,} {usd:>9.2f} {tusd:>9.2f}")
    b = design.budget
    if b.cap_usd is not None:
        reserved = ", ".join(f"{k} {v:.2f}" for k, v in b.reserved_usd.items())
        lines.append(f"cap {b.cap_usd:.2f} USD"
                     + (f"; tier budgets {sum(b.tiers.values()):.2f}" if b.tiers else "")
                     + (f"; reserved {reserved}" if reserved else ""))
    rates = ", ".join(f"{m} {r}" for m, r in design.planning.usd_per_decision.items())
    if rates:
        lines.append(f"USD plan: planning rate per decision ({rates}); caps and tier budgets are "
                     "checked at this rate. USD table: the price table at the token counts above.")
    return "\n".join(lines)


def measured_profile(paths: list[str]) -> list[dict]:
    """Tokens per answered trading decision as providers counted them, per model and prompt
    version, from response caches (directories with ``cache.db``) or run directories (with
    ``llm_decisions.parquet``). Shown beside the planning profile, never used for planning.

    Returns rows ``{model, prompt_version, decisions, tokens_in, tokens_out, source}`` (tokens:
    mean per decision). Raises ConfigError for a path that is neither."""
    rows = []
    for raw in paths:
        path = Path(raw)
        if (path / layout.CACHE_DB).exists():
            # why: the response cache loads sqlite3 and the LLM layer; only --measured needs it
            from market_agents.llm.cache import ResponseCache

            cache = ResponseCache(path)
            try:
                good, _ = cache.scan()
            finally:
                cache.close()
            frame = pl.DataFrame(
                [{"model": b["request"].get("model", "?"),
                  "prompt_version": b["request"].get("prompt_version", "?"),
                  "tokens_in": b["usage"].get("input", 0),
                  "tokens_out": b["usage"].get("output", 0)}
                 for _, b in good if b.get("status") == "answered"
                 and str(b["request"].get("prompt_id", "")).startswith("market-")],
                schema={"model": pl.Utf8, "prompt_version": pl.Utf8, "tokens_in": pl.Int64,
                        "tokens_out": pl.Int64})
        elif (path / "llm_decisions.parquet").exists():
            frame = pl.read_parquet(path / "llm_decisions.parquet").filter(
                pl.col("valid").is_not_null() & (pl.col("provider") != "library"))
        else:
            raise ConfigError(f"--measured {raw}: neither a response cache (cache.db) nor a run "
                              "directory (llm_decisions.parquet)")
        for (model, version), g in sorted(frame.group_by(["model", "prompt_version"]),
                                          key=lambda kv: kv[0]):
            rows.append({"model": model, "prompt_version": version, "decisions": g.height,
                         "tokens_in": round(float(g["tokens_in"].mean()), 1),
                         "tokens_out": round(float(g["tokens_out"].mean()), 1),
                         "source": str(path)})
    return rows


def render_measured(rows: list[dict], tokens_in: int, tokens_out: int) -> str:
    """The measured tokens per decision beside the planning profile (``ma budget``'s last
    lines).
    """
    lines = [f"tokens per decision: planning profile {tokens_in} in / {tokens_out} out (the "
             "figures above); measured, as the providers counted them:"]
    lines += [f"  {r['model']:<28} {r['prompt_version']:<4} {r['tokens_in']:>7.1f} in "
              f"{r['tokens_out']:>7.1f} out  over {r['decisions']:,} decisions  ({r['source']})"
              for r in rows] or ["  (no answered trading decisions there)"]
    return "\n".join(lines)
