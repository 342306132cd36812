"""``ma dag``: render a Snakemake rule graph (DOT text) to SVG and Mermaid."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from market_agents.atomic import write_text_atomic
from market_agents.errors import ConfigError
from market_agents.pipeline.dagrender import merge_stages, mermaid, parse_dot, render_svg


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``ma dag`` and its arguments to the ``ma`` subcommands."""
    p = sub.add_parser(
        "dag",
        help="render `.venv/bin/snakemake --rulegraph` output to SVG and Mermaid",
        description="Read DOT text (a file, or - for stdin) from "
        "`.venv/bin/snakemake TARGET --rulegraph` "
        "or `--dag` and write an SVG (Graphviz when installed, else a built-in layered layout) "
        "and a Mermaid flowchart. Several files are the protocol's stages in order, drawn as one "
        "graph (a rule drawn again is labelled with its stage, the file name without .dot; the "
        "freeze precedes a later stage's gates). `make dag` runs the whole chain.",
    )
    p.add_argument("dot", nargs="+", help="DOT file(s), or - for stdin")
    p.add_argument("--dot", dest="out_dot", type=Path,
                   help="write the (merged) DOT text here too")
    p.add_argument("--svg", type=Path, required=True, help="SVG file to write")
    p.add_argument("--mermaid", type=Path, help="Mermaid (.mmd) file to write")
    p.add_argument("--engine", choices=["auto", "dot", "builtin"], default="auto",
                   help="auto: Graphviz if installed (default)")
    p.set_defaults(func=_run)


def _read(name: str) -> str:
    if name == "-":
        return sys.stdin.read()
    try:
        return Path(name).read_text()
    except OSError as exc:
        raise ConfigError(f"{name}: cannot read ({exc.strerror})") from None


def _run(args: argparse.Namespace) -> int:
    stages = [(Path(name).stem, _read(name)) for name in args.dot]
    text = stages[0][1] if len(stages) == 1 else merge_stages(stages)
    nodes, edges = parse_dot(text)
    if args.out_dot:
        write_text_atomic(args.out_dot, text)
    write_text_atomic(args.svg, render_svg(text, args.engine))
    if args.mermaid:
        write_text_atomic(args.mermaid, mermaid(nodes, edges))
    print(f"{args.svg}: {len(nodes)} nodes, {len(edges)} edges")
    return 0
