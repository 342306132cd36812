"""Render Snakemake's ``--rulegraph``/``--dag`` DOT output to SVG and Mermaid for the protocol
appendix. Uses Graphviz ``dot`` when it is installed; otherwise a small layered layout written
here, so the figure builds on a machine without Graphviz."""

from __future__ import annotations

import re
import shutil
import subprocess
from html import escape

from market_agents.errors import ConfigError

_NODE = re.compile(r'^\s*(\d+)\s*\[\s*label\s*=\s*"((?:[^"\\]|\\.)*)"', re.M)
_EDGE = re.compile(r"^\s*(\d+)\s*->\s*(\d+)", re.M)


def parse_dot(text: str) -> tuple[dict[str, str], list[tuple[str, str]]]:
    """The nodes (id -> label) and edges of ``.venv/bin/snakemake --rulegraph`` DOT text.

    Raises:
        ConfigError: the text has no nodes (Snakemake printed an error instead).
    """
    nodes = {i: label.replace("\\n", " ").replace('\\"', '"') for i, label in _NODE.findall(text)}
    edges = [(a, b) for a, b in _EDGE.findall(text) if a in nodes and b in nodes]
    if not nodes:
        raise ConfigError("the DAG text has no nodes: is it the output of "
                          "`.venv/bin/snakemake --rulegraph` (and did snakemake print an error "
                          "instead)?")
    return nodes, edges


# The protocol's order across stages: a later stage's live runs wait for their budget gate,
# which refuses a confirmatory run without the freeze (a check at run time, so no file edge
# in Snakemake's rule graph says it).
STAGE_JOIN = ("freeze", "gate")


def merge_stages(stages: list[tuple[str, str]]) -> str:
    """One rule graph of the protocol's stages, in order, as DOT text.

    Snakemake's ``--rulegraph`` draws one node per rule, so the pilot's live runs and the
    confirmatory design's are one node, and nothing puts the freeze before the confirmatory
    runs; drawn from one graph, the freeze sank to the bottom, after the runs it must precede.
    Here each stage is its own rule graph: a rule an earlier stage drew is drawn again,
    labelled ``rule (stage)``; every ``freeze`` of an earlier stage precedes every ``gate`` of
    a later one; edges that close a cycle (a tier's gate waits for the previous tier's
    reconciled spend) are dashed and do not rank the layout.

    Args:
        stages: ``(name, DOT text of snakemake --rulegraph)`` per stage, in protocol order.

    Returns:
        DOT text (for Graphviz, :func:`parse_dot` and :func:`render_svg`).

    Raises:
        ConfigError: a stage's text has no nodes.
    """
    nodes: dict[str, str] = {}
    rules: dict[str, str] = {}  # node id -> rule name
    edges: list[tuple[str, str]] = []
    drawn: set[str] = set()
    for name, text in stages:
        stage_nodes, stage_edges = parse_dot(text)
        ids = {}
        for old, label in sorted(stage_nodes.items(), key=lambda kv: int(kv[0])):
            new = str(len(nodes))
            ids[old], rules[new] = new, label
            nodes[new] = f"{label} ({name})" if label in drawn else label
        edges += [(ids[a], ids[b]) for a, b in stage_edges]
        earlier = [n for n in rules if n not in ids.values() and rules[n] == STAGE_JOIN[0]]
        edges += [(a, b) for a in earlier for b in ids.values() if rules[b] == STAGE_JOIN[1]]
        drawn |= set(stage_nodes.values())
    back = _back_edges(nodes, edges)
    lines = ["digraph protocol {", "    graph[bgcolor=white, margin=0];",
             "    node[shape=box, style=rounded, fontname=sans, fontsize=10, penwidth=2];",
             "    edge[penwidth=2, color=grey];"]
    lines += [f'    {n}[label = "{label}"];' for n, label in nodes.items()]
    lines += [f"    {a} -> {b}" + (" [style=dashed, constraint=false]" if (a, b) in back else "")
              for a, b in edges]
    return "\n".join([*lines, "}"]) + "\n"


def mermaid(nodes: dict[str, str], edges: list[tuple[str, str]]) -> str:
    """The rule graph as a Mermaid flowchart (top to bottom)."""
    lines = ["flowchart TB"]
    ordered = sorted(nodes.items(), key=lambda kv: int(kv[0]))
    lines += [f'    n{i}["{label}"]' for i, label in ordered]
    lines += [f"    n{a} --> n{b}" for a, b in edges]
    return "\n".join(lines) + "\n"


def _back_edges(nodes: dict[str, str], edges: list[tuple[str, str]]) -> set[tuple[str, str]]:
    """Edges that close a cycle. A rule graph can have them (the gate of a tier waits for the
    reconciled spend of the previous tier); they are drawn but ignored for layering."""
    succ: dict[str, list[str]] = {n: [] for n in nodes}
    for a, b in edges:
        succ[a].append(b)
    indeg = {n: 0 for n in nodes}
    for _, b in edges:
        indeg[b] += 1
    state: dict[str, int] = {}
    back: set[tuple[str, str]] = set()
    for root in sorted(nodes, key=lambda n: (indeg[n] > 0, int(n) if n.isdigit() else 0, n)):
        if root in state:
            continue
        stack = [(root, iter(succ[root]))]
        state[root] = 1
        while stack:
            node, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                state[node] = 2
                stack.pop()
            elif state.get(nxt) == 1:
                back.add((node, nxt))
            elif nxt not in state:
                state[nxt] = 1
                stack.append((nxt, iter(succ[nxt])))
    return back


def _layers(nodes: dict[str, str], edges: list[tuple[str, str]]) -> dict[str, int]:
    """Longest path from a source over the acyclic part, so every forward edge points down."""
    forward = [e for e in edges if e not in _back_edges(nodes, edges)]
    layer = {n: 0 for n in nodes}
    for _ in range(len(nodes)):
        changed = False
        for a, b in forward:
            if layer[b] < layer[a] + 1:
                layer[b] = layer[a] + 1
                changed = True
        if not changed:
            break
    return layer


def layered_svg(nodes: dict[str, str], edges: list[tuple[str, str]]) -> str:
    """The rule graph as a layered SVG drawn without Graphviz (each rule one layer below
    the rules it needs).
    """
    layer = _layers(nodes, edges)
    rows: dict[int, list[str]] = {}
    for n in sorted(nodes, key=lambda n: (layer[n], nodes[n])):
        rows.setdefault(layer[n], []).append(n)
    char_w, box_h, gap_x, gap_y, pad = 7.5, 28, 24, 56, 20
    width = {n: max(60.0, char_w * len(nodes[n]) + 16) for n in nodes}
    row_w = {r: sum(width[n] for n in ns) + gap_x * (len(ns) - 1) for r, ns in rows.items()}
    total_w = max(row_w.values()) + 2 * pad + 80  # room for the dashed back edges
    pos: dict[str, tuple[float, float]] = {}
    for r, ns in rows.items():
        x = pad + (total_w - 2 * pad - row_w[r]) / 2
        for n in ns:
            pos[n] = (x, pad + r * (box_h + gap_y))
            x += width[n] + gap_x
    total_h = pad * 2 + len(rows) * box_h + (len(rows) - 1) * gap_y
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{total_w:.0f}" height="{total_h:.0f}" '
        f'viewBox="0 0 {total_w:.0f} {total_h:.0f}" font-family="sans-serif" font-size="12">',
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="8" '
        'markerHeight="8" orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#555"/></marker></defs>',
    ]
    back = _back_edges(nodes, edges)
    for a, b in edges:
        (xa, ya), (xb, yb) = pos[a], pos[b]
        if (a, b) in back:  # upward, dashed: from the side of a to the side of b
            out.append(
                f'<path d="M{xa + width[a]:.1f},{ya + box_h / 2:.1f} C{xa + width[a] + 60:.1f},'
                f'{ya:.1f} {xb + width[b] + 60:.1f},{yb + box_h:.1f} {xb + width[b]:.1f},'
                f'{yb + box_h / 2:.1f}" fill="none" stroke="#999" stroke-dasharray="4 3" '
                'marker-end="url(#arrow)"/>'
            )
            continue
        out.append(
            f'<line x1="{xa + width[a] / 2:.1f}" y1="{ya + box_h:.1f}" '
            f'x2="{xb + width[b] / 2:.1f}" y2="{yb:.1f}" stroke="#555" '
            'marker-end="url(#arrow)"/>'
        )
    for n, (x, y) in pos.items():
        out.append(
            f'<g><title>{escape(nodes[n])}</title><rect x="{x:.1f}" y="{y:.1f}" '
            f'width="{width[n]:.1f}" height="{box_h}" rx="6" fill="#eef3fb" stroke="#3465a4"/>'
            f'<text x="{x + width[n] / 2:.1f}" y="{y + box_h / 2 + 4:.1f}" '
            f'text-anchor="middle">{escape(nodes[n])}</text></g>'
        )
    out.append("</svg>")
    return "\n".join(out) + "\n"


def render_svg(dot_text: str, engine: str = "auto") -> str:
    """SVG of the graph: Graphviz when ``engine`` is ``dot`` or ``auto`` and it is installed."""
    nodes, edges = parse_dot(dot_text)
    if engine in ("dot", "auto") and shutil.which("dot"):
        done = subprocess.run(["dot", "-Tsvg"], input=dot_text, capture_output=True, text=True,
                              timeout=120)
        if done.returncode == 0 and "<svg" in done.stdout:
            return done.stdout
        if engine == "dot":
            raise ConfigError(f"graphviz dot failed: {done.stderr.strip()[:300]}")
    elif engine == "dot":
        raise ConfigError("graphviz `dot` is not installed (apt-get install graphviz), or use "
                          "--engine builtin")
    return layered_svg(nodes, edges)
