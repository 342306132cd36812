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


BEFORE = """digraph snakemake_dag {
    0[label = "freeze", color = "0.1 0.6 0.85", style="rounded"];
    1[label = "pilot_manifest", color = "0.2 0.6 0.85", style="rounded"];
    2[label = "simulate_live", color = "0.3 0.6 0.85", style="rounded"];
    3[label = "gate", color = "0.4 0.6 0.85", style="rounded"];
    3 -> 2
    2 -> 1
    1 -> 0
}"""


def test_stages_are_drawn_in_protocol_order_the_freeze_before_the_later_gates():
    from market_agents.pipeline.dagrender import merge_stages

    merged = merge_stages([("pilot", BEFORE), ("confirmatory", DOT)])
    nodes, edges = parse_dot(merged)
    by = {label: n for n, label in nodes.items()}
    assert {"gate", "gate (confirmatory)", "simulate_live (confirmatory)", "protocol"} <= set(by)
    assert (by["freeze"], by["gate (confirmatory)"]) in edges
    layer = _layers(nodes, edges)
    assert layer[by["gate"]] < layer[by["freeze"]] < layer[by["gate (confirmatory)"]] < layer[
        by["simulate_live (confirmatory)"]]
    # the cycle's closing edge (a gate waits for the previous tier's reconciled spend) is
    # dashed and does not rank Graphviz's layout
    assert f'{by["reconcile"]} -> {by["gate (confirmatory)"]} [style=dashed, ' \
        "constraint=false]" in merged
    assert render_svg(merged, engine="builtin").count("marker-end") == len(edges)
