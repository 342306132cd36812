"""The built-in DAG renderer: DOT in, SVG and Mermaid out, cycles of the rule graph drawn but
not allowed to stretch the layout."""

import re

import pytest

from market_agents.errors import ConfigError
from market_agents.pipeline.dagrender import _layers, layered_svg, mermaid, parse_dot, render_svg

DOT = """digraph snakemake_dag {
    graph[bgcolor=white, margin=0];
    0[label = "protocol", color = "0.1 0.6 0.85", style="rounded"];
    1[label = "simulate", color = "0.2 0.6 0.85", style="rounded"];
    2[label = "outcomes", color = "0.3 0.6 0.85", style="rounded"];
    3[label = "reconcile", color = "0.4 0.6 0.85", style="rounded"];
    4[label = "gate", color = "0.5 0.6 0.85", style="rounded"];
    5[label = "simulate_live", color = "0.6 0.6 0.85", style="rounded"];
    1 -> 2
    2 -> 3
    3 -> 4
    4 -> 5
    5 -> 2
    3 -> 0
}"""


def test_parse_and_mermaid():
    nodes, edges = parse_dot(DOT)
    assert nodes["5"] == "simulate_live" and ("5", "2") in edges
    text = mermaid(nodes, edges)
    assert text.startswith("flowchart TB\n") and '    n4["gate"]' in text and "n5 --> n2" in text


def test_cycle_keeps_layers_short_and_svg_draws_every_edge():
    nodes, edges = parse_dot(DOT)
    assert max(_layers(nodes, edges).values()) <= len(nodes) - 1
    svg = layered_svg(nodes, edges)
    assert svg.startswith("<svg") and svg.count("marker-end") == len(edges)
    assert int(re.search(r'height="(\d+)"', svg).group(1)) < 700
    assert render_svg(DOT, engine="builtin") == svg


def test_empty_graph_is_named():
    with pytest.raises(ConfigError, match="no nodes.*snakemake --rulegraph"):
        parse_dot("Error: no Snakefile found")
