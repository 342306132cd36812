"""The ``ma`` subcommands, one module each with ``register(subparsers)``: argument parsing and
one call into the package (``cli.py`` dispatches). Shared here: the serving switches and the
guards of a paying command.

One run and its files: ``run.py``, ``outcomes.py``, ``plot.py``, ``validate.py`` (the realism
report), ``cache.py`` (what a response cache holds), ``library.py`` (the frozen decision
library). A design: ``design.py``, ``cell.py``, ``gather.py``, ``summary.py``,
``sensitivity.py``, ``sigma.py``, ``budget.py``, ``status.py`` (where each design stands).
The protocol's checkpoints: ``gate.py``, ``pilot.py``, ``freeze.py``, ``deviations.py``,
``spend.py``. The paper: ``paper.py``. The workflow and the run contract: ``dag.py``,
``schema.py``, ``record.py``, ``verify.py``. Bazaar: ``bazaar.py``."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from market_agents import layout
from market_agents.inputs import NEW_CACHE_ENV, REPLAY_ENV, env_flag

if TYPE_CHECKING:
    from pathlib import Path

    from market_agents.protocol.guard import Guard


def add_serving_flags(p: argparse.ArgumentParser, what: str = "the run") -> None:
    """``--replay`` and ``--new-cache``, shared by `ma run`, `ma cell` and `ma design`."""
    p.add_argument("--replay", action="store_true", default=env_flag(REPLAY_ENV),
                   help=f"serve every answer of {what} from the cache: a missing answer stops "
                   "it, no key is needed and no provider client is built (also "
                   f"population.llm.replay, or {REPLAY_ENV}=1)")
    p.add_argument("--new-cache", action="store_true", default=env_flag(NEW_CACHE_ENV),
                   help="allow starting over with an empty or missing cache although records "
                   "(its paid.json, or finished runs) show it held paid answers; those answers "
                   f"are bought again (or {NEW_CACHE_ENV}=1)")


def add_guard_flags(p: argparse.ArgumentParser) -> None:
    """``--deviation`` for every command that can make a confirmatory live call."""
    p.add_argument("--deviation", default=None, metavar="REASON",
                   help="run although the freeze no longer matches (design, code, commit or "
                   "work tree changed): the reason is appended to "
                   f"{layout.deviations_log()} (`ma deviations`) and recorded in every "
                   "run manifest this command writes")


def add_results_flag(p: argparse.ArgumentParser, anchor: str, what: str = "results root") -> None:
    """``--results``, whose default is the ``results/`` of the project ``anchor`` (the
    command's config or design argument) belongs to, not the working directory's: the spend
    ledger is the project's wherever the command starts (:func:`results_root`)."""
    p.add_argument("--results", default=None,
                   help=f"{what} (default: {layout.ROOT}/ of the project {anchor} belongs "
                   "to, the nearest folder above it with one of "
                   f"{', '.join(layout.PROJECT_MARKERS)}; else {layout.ROOT}/ here)")


def results_root(given: str | None, anchor: str | None) -> str:
    """The results root a command uses: ``given`` (``--results``), else the project's
    (:func:`market_agents.layout.project_root` of ``anchor``, then the working directory)."""
    return str(given) if given is not None else str(layout.project_root(anchor))


def out_dir(out: str | None) -> Path | None:
    """An ``--out`` folder a command adds its files to, checked before any work by the one
    rule of :func:`market_agents.outputs.check_dir` (None: no ``--out`` given)."""
    from market_agents.outputs import check_dir

    return None if out is None else check_dir(out, "--out")


def build_guard(results: str, deviation: str | None = None,
                freeze_path: str | None = None, anchor: str | None = None) -> Guard:
    """The guards of a paying command, with the protocol's caps and design names (the
    workflow config's defaults, or the invoking workflow's config in a workflow job).
    ``anchor`` (the command's config or design file) names the project whose ledger a paid
    call must not step around (``Guard.home``)."""
    from pathlib import Path

    from market_agents.pipeline.workflow_config import guard_settings
    from market_agents.protocol.guard import Guard
    from market_agents.protocol.ledger import Caps

    s = guard_settings()
    return Guard(
        root=Path(results),
        home=layout.project_root(anchor),
        caps=Caps(s.project_cap_usd, s.pilot_cap_usd, s.pilot),
        confirmatory=s.confirmatory,
        confirmatory_file=s.design_path(s.confirmatory),
        deviation=deviation if deviation is not None else s.deviation,
        freeze_path=Path(freeze_path) if freeze_path else None,
    )
