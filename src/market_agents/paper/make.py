"""``ma paper`` in one call: read a design's results (``paper/inputs.py``), build every
table and figure (``paper/contents.py``, pure) and write them under ``paper/``
(``paper/files.py``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tqdm import tqdm

from market_agents.layout import ROOT
from market_agents.paper.contents import build
from market_agents.paper.files import write_paper
from market_agents.paper.inputs import Roles, load


def make_paper(target: str, out: Path, designs_dir: Path, roles: Roles,
               root: Path = ROOT, progress: bool | None = None) -> dict[str, Any]:
    """Read, build and write the paper of ``target`` under ``out``; returns paper.json's
    content (tables, figures, skipped with reasons)."""
    bar = tqdm(desc=f"paper {target}", unit="step", disable=progress is False, mininterval=0.5)

    def step(what: str) -> None:
        bar.set_postfix_str(what)
        bar.update()

    data, texts, inputs = load(target, designs_dir, roles, root, step)
    paper = build(data, texts, inputs, step)
    paper.notes["mde"] = data.mde_source
    if data.not_estimable is not None:
        paper.notes["not_estimable"] = data.not_estimable
    write_paper(paper, out, step)
    bar.close()
    return json.loads((out / "paper.json").read_text())
