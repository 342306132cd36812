"""``ma status``: where a study stands. For each design, cell × seed: present, missing, stale
(made by other code or from another config), failed, paid or free with its USD; totals and the
next command; ``--json`` for scripts, ``--html`` for one page that links every run and figure
(:mod:`market_agents.protocol.status`)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from market_agents import layout
from market_agents.commands import add_results_flag, results_root

WORKFLOW_CONFIG = Path("config/workflow.yaml")


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``ma status`` and its arguments to the ``ma`` subcommands."""
    p = sub.add_parser(
        "status", help="where a study stands: each design's runs present, missing, stale or "
        "failed, paid or free, and the next command",
        description="For DESIGN (default: every design of the workflow's designs folder), one "
        "line per cell with its runs present (finished by today's code), missing, stale (made "
        "by other code: the manifest's code_fingerprint differs, or it has none; or from "
        "another config than the cell's now), failed (a <run>.failed.json beside it), and the "
        "USD its paid runs cost ('free' for a cell that calls no paid provider); the total, "
        "the runs not present by name, and the next command to run. A design's mock "
        f"rehearsal ({layout.runs_dir(mock=True)}/) is shown too when it exists. Reads "
        "manifests only: nothing is run, written or removed (but --html's page).")
    p.add_argument("design", nargs="?", default=None,
                   help="a design YAML (e.g. config/designs/exploratory.yaml) or a design name "
                   "in the workflow's designs folder (e.g. exploratory)")
    p.add_argument("--configfile", default=None, metavar="YAML",
                   help="the workflow config that names the designs folder and which design "
                   f"each Snakemake target makes (default: {WORKFLOW_CONFIG} of the project; "
                   "config/test/workflow.yaml for the tiny test designs)")
    add_results_flag(p, "DESIGN")
    p.add_argument("--seeds", action="store_true", help="one line per run instead of per cell")
    p.add_argument("--json", action="store_true",
                   help="print JSON instead: code_fingerprint, designs (each with its counts, "
                   "USD, next commands and cells, each with its runs), errors")
    p.add_argument("--html", default=None, metavar="OUT.html",
                   help="also write one self-contained HTML page of the same, each cell linking "
                   "its runs' folders and figures (links relative to the page: write it inside "
                   "the project, e.g. paper/status.html, beside the paper)")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    """Print where each design stands (and write the page with ``--html``).

    Args:
        args: the parsed arguments of ``ma status`` (``ma status --help`` lists them).

    Returns:
        The exit code: 0; 2 when a design of the folder could not be loaded (each named in
        one line on stderr, the others shown).

    Raises:
        ConfigError: a bad DESIGN, ``--configfile``, ``--results`` or ``--html``, or a named
            design that does not load (the message names the file and key).

    Protocol:
        Design principle 14 (a result names the code that made it: stale runs are shown,
        never re-made silently); run protocol §1 (the results layout).
    """
    from market_agents.errors import ConfigError, MarketAgentsError
    from market_agents.inputs import read_yaml
    from market_agents.pipeline.workflow_config import DEFAULTS, validate_workflow_config
    from market_agents.protocol.design import load_design
    from market_agents.protocol.status import design_status, page, text
    from market_agents.sim.fingerprint import fingerprint

    project = layout.project_of(args.design or Path.cwd()) or Path.cwd()
    if args.configfile is not None:
        if not Path(args.configfile).is_file():
            raise ConfigError(f"--configfile {args.configfile}: no such file")
        workflow = validate_workflow_config(read_yaml(args.configfile), args.configfile)
    elif (project / WORKFLOW_CONFIG).is_file():
        workflow = validate_workflow_config(read_yaml(project / WORKFLOW_CONFIG),
                                            str(WORKFLOW_CONFIG))
    else:
        workflow = DEFAULTS
    # relative to here, as every path a command prints
    designs = Path(os.path.relpath(project / workflow.designs_dir))
    files = _design_files(args.design, designs)
    results = Path(results_root(args.results, args.design or designs))
    if results.exists() and not results.is_dir():
        raise ConfigError(f"--results {results}: not a folder")
    html_out = Path(args.html) if args.html else None
    if html_out is not None and (html_out.is_dir() or html_out.suffix.lower() not in (
            ".html", ".htm")):
        raise ConfigError(f"--html {args.html}: give a file ending in .html, not a folder")
    on_workflow = results.resolve() == (project / layout.ROOT).resolve()

    code = fingerprint()
    statuses, errors = [], []
    for file in files:
        try:
            design = load_design(file, results)
        except MarketAgentsError as exc:
            if args.design is not None:
                raise
            errors.append(f"{file}: {exc}")
            continue
        ours = file.resolve() == (designs / f"{design.name}.yaml").resolve()
        for mock in (False, True):
            if mock and not layout.design_dir(design.name, True, results).is_dir():
                continue
            target = workflow.target(design.name, mock) if ours and on_workflow else None
            if target:
                make = f".venv/bin/snakemake --cores 2 {target}"
                if args.configfile is not None:
                    make += f" --configfile {args.configfile}"
            else:
                make = (f".venv/bin/ma design {file}" + (" --mock" if mock else "")
                        + ("" if on_workflow else f" --results {results}"))
            statuses.append(design_status(design, mock, make, code))

    if args.json:
        print(json.dumps({"code_fingerprint": code,
                          "designs": [s.to_dict() for s in statuses], "errors": errors},
                         indent=2))
    else:
        print(f"results root {results}; code fingerprint {code[:16]} (sim/fingerprint.py)")
        for s in statuses:
            print("\n".join(text(s, args.seeds)))
    for line in errors:
        print(f"ma status: error: {' '.join(line.split())}", file=sys.stderr)
    if html_out is not None:
        from market_agents.atomic import write_text_atomic

        write_text_atomic(html_out, page(statuses, html_out.parent, errors))
        print(f"wrote {html_out}", file=sys.stderr if args.json else sys.stdout)
    return 2 if errors else 0


def _design_files(design: str | None, designs: Path) -> list[Path]:
    """The design files to show: ``design`` (a YAML path, or a name in ``designs``), else every
    ``*.yaml`` of ``designs``; ConfigError naming what is not there."""
    from market_agents.errors import ConfigError

    known = sorted(designs.glob("*.yaml"))
    if design is None:
        if not known:
            raise ConfigError(f"{designs}: no design files (*.yaml); give DESIGN or "
                              "--configfile")
        return known
    path = Path(design)
    if path.suffix in (".yaml", ".yml") or path.is_file():
        if not path.is_file():
            raise ConfigError(f"{design}: no such design file")
        return [path]
    named = designs / f"{design}.yaml"
    if not named.is_file():
        raise ConfigError(f"{design}: no such design file, nor {named} (designs: "
                          f"{', '.join(p.stem for p in known) or 'none'})")
    return [named]
