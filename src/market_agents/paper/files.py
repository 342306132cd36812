"""The paper's files: a table as CSV, Markdown, LaTeX and an HTML fragment, a figure as PNG and
PDF (no dates in their metadata, so the same data give the same bytes), and the one-page
``index.html``. Rendering is pure (text or bytes); :func:`write_paper` writes the files.
"""

from __future__ import annotations

import html
import io
import math
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl
from markdown_it import MarkdownIt

from market_agents.analysis.figures import _pyplot
from market_agents.atomic import write_json_atomic, write_text_atomic
from market_agents.paper.catalog import Artifact
from market_agents.sim.fingerprint import short

DPI = 110


@dataclass
class Paper:
    """Everything the paper shows: tables (frames), figures (matplotlib), texts, and what was
    skipped and why (``kind/name`` -> reason)."""

    design: str
    heading: str
    mock_note: str | None
    tables: dict[str, tuple[Artifact, pl.DataFrame]] = field(default_factory=dict)
    figures: dict[str, tuple[Artifact, Any, str]] = field(default_factory=dict)  # + title
    texts: dict[str, str] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)
    inputs: list[str] = field(default_factory=list)
    # the code fingerprint of the runs it was built from (sim/fingerprint.py), in full; None:
    # made before fingerprints; "" when not known (the report's captions, written before runs)
    code: str | None = ""

    def title(self, a: Artifact, title: str | None = None) -> str:
        """The artifact's title, marked with the mock note in a rehearsal."""
        t = title or a.title
        return f"[{self.mock_note}] {t}" if self.mock_note else t

    def caption(self, a: Artifact, alone: bool = False) -> str:
        """The artifact's caption, naming the design. In the paper the mock note is said once
        at the top and in every title, not in every caption; a caption shown ``alone`` (the
        Snakemake report's, one result at a time) says first, in a rehearsal, that every LLM
        answer behind it comes from the mock.
        """
        mark = (f"{self.mock_note.upper()}: every LLM answer behind this comes from the mock "
                "provider; it shows the pipeline, not evidence. ") if (
            self.mock_note and alone) else ""
        return f"{mark}{a.caption} Design: {self.design}.{self.provenance}"

    @property
    def provenance(self) -> str:
        """`` Runs made by code <short fingerprint>.``: the code that made the runs the paper
        was built from (empty when not known)."""
        if self.code == "":
            return ""
        return f" Runs made by code {short(self.code) if self.code else 'before fingerprints'}."


def cell_text(value: Any) -> str:
    """A value as the Markdown/LaTeX/HTML tables show it (4 significant digits)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if not math.isfinite(value):
            return ""
        return f"{value:.4g}"
    return str(value)


def to_csv(frame: pl.DataFrame, title: str, caption: str) -> str:
    """CSV with the title and caption as leading ``#`` comment lines (read with
    ``comment_prefix="#"``)."""
    flat = frame.with_columns(pl.col(c).cast(pl.Utf8) for c, t in frame.schema.items()
                              if t == pl.List)
    return f"# {title}\n# {caption}\n" + flat.write_csv(float_precision=None)


def _rows(frame: pl.DataFrame) -> list[list[str]]:
    return [[cell_text(v) for v in row] for row in frame.iter_rows()]


def to_markdown(frame: pl.DataFrame, title: str, caption: str) -> str:
    """A table as a Markdown section: ``## title``, the caption, then the table (cells as text)."""
    head = "| " + " | ".join(frame.columns) + " |"
    sep = "| " + " | ".join("---" for _ in frame.columns) + " |"
    body = ["| " + " | ".join(v.replace("|", "\\|") for v in row) + " |" for row in _rows(frame)]
    return "\n".join([f"## {title}", "", caption, "", head, sep, *body]) + "\n"


_TEX = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
        "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}"}


def tex_escape(text: str) -> str:
    """``text`` with LaTeX's special characters escaped."""
    return "".join(_TEX.get(ch, ch) for ch in text)


def to_latex(frame: pl.DataFrame, title: str, caption: str, label: str) -> str:
    """A table as a LaTeX ``table`` float (``tabular``), labelled ``tab:<label>``."""
    cols = "l" * len(frame.columns)
    lines = [r"\begin{table}[htbp]", r"\centering", r"\scriptsize",
             rf"\caption{{{tex_escape(title)}. {tex_escape(caption)}}}",
             rf"\label{{tab:{label}}}", rf"\begin{{tabular}}{{{cols}}}", r"\hline",
             " & ".join(tex_escape(c) for c in frame.columns) + r" \\", r"\hline"]
    lines += [" & ".join(tex_escape(v) for v in row) + r" \\" for row in _rows(frame)]
    lines += [r"\hline", r"\end{tabular}", r"\end{table}"]
    return "\n".join(lines) + "\n"


# A text column with values longer than this wraps its lines (class "text"); shorter values
# (numbers, cell names) never break inside.
WRAP_AFTER = 24


def _intervals(columns: list[str], rows: list[list[str]]) -> tuple[list[str], list[list[str]]]:
    """Adjacent ``x_low`` and ``x_high`` columns as one ``x interval`` column of ``[low, high]``
    (the page shows the estimates in fewer, narrower columns than the CSV)."""
    names, keep = [], []
    i = 0
    while i < len(columns):
        c = columns[i]
        if (c.endswith("_low") and i + 1 < len(columns)
                and columns[i + 1] == c.removesuffix("_low") + "_high"):
            names.append(c.removesuffix("_low") + " interval")
            keep.append((i, i + 1))
            i += 2
        else:
            names.append(c)
            keep.append((i,))
            i += 1
    out = [[(f"[{r[k[0]]}, {r[k[1]]}]" if r[k[0]] or r[k[1]] else "") if len(k) == 2
            else r[k[0]] for k in keep] for r in rows]
    return names, out


def to_html_table(frame: pl.DataFrame) -> str:
    """A table as an HTML ``<table>`` fragment, every cell escaped; interval bounds in one
    column, long text columns wrap, headers break at underscores."""
    columns, rows = _intervals(frame.columns, _rows(frame))
    # an interval may break after its comma; a long text anywhere; a number never
    kind = ["iv" if c.endswith(" interval") else
            "text" if any(len(r[i]) > WRAP_AFTER for r in rows) else ""
            for i, c in enumerate(columns)]
    head = "".join(f"<th>{html.escape(c).replace('_', '_<wbr>')}</th>" for c in columns)
    body = "".join("<tr>" + "".join(
        f"<td class=\"{k}\">{html.escape(v)}</td>" if k else f"<td>{html.escape(v)}</td>"
        for v, k in zip(row, kind, strict=True)) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


# Long words (hashes, paths, the dropped-seed lists) wrap anywhere, so no table or appendix is
# wider than the page: nothing is cut off at its edge (a page test checks every element).
STYLE = ("body{font-family:sans-serif;margin:2em;max-width:1400px}"
         "table{border-collapse:collapse;font-size:11px;margin:.5em 0 2em}"
         "td,th{border:1px solid #bbb;padding:2px 4px;text-align:right}"
         "td{white-space:nowrap}td.text{white-space:normal;overflow-wrap:anywhere;"
         "text-align:left;min-width:6em}td.iv{white-space:normal}"
         ".appendix{max-width:1100px;overflow-wrap:anywhere}.appendix li{margin:.2em 0}"
         "code{background:#f3f3f3;padding:0 2px}"
         "th{background:#eef3fb}td:first-child,th:first-child{text-align:left}"
         "img{max-width:100%;box-sizing:border-box;border:1px solid #ddd}"
         ".mock{background:#fde9d9;padding:.5em;border:2px solid #c0504d;font-weight:bold}"
         ".caption{color:#333;font-size:13px;max-width:1100px}")


def markdown_html(text: str) -> str:
    """Markdown (CommonMark, markdown-it-py) as HTML; raw HTML in the text is escaped, not
    passed through."""
    return MarkdownIt("commonmark", {"html": False}).render(text)


def _page(title: str, body: str) -> str:
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<link rel=\"icon\" href=\"data:,\">"
            f"<title>{html.escape(title)}</title><style>{STYLE}</style></head>"
            f"<body>\n{body}\n</body></html>\n")


def table_page(paper: Paper, a: Artifact, frame: pl.DataFrame) -> str:
    """One table as a standalone page (the Snakemake report embeds these)."""
    return _page(paper.title(a), f"<h2>{html.escape(paper.title(a))}</h2>"
                 f"<p class=\"caption\">{html.escape(paper.caption(a))}</p>"
                 + to_html_table(frame))


def index_page(paper: Paper) -> str:
    """The paper on one page: every table inline, every figure as an image, the model cards,
    the deviations, and what was skipped."""
    parts = [f"<h1>{html.escape(paper.heading)}</h1>"]
    if paper.code != "":
        stated = (f"code fingerprint <code>{short(paper.code)}</code>" if paper.code
                  else "code made before fingerprints")
        parts.append(f"<p class=\"caption\" id=\"code\">Built from runs made by {stated} (the "
                     "SHA-256 of the engine's source that decides a run's tables, recorded in "
                     "every run's manifest.json; in full in paper.json).</p>")
    if paper.mock_note:
        parts.append(f"<p class=\"mock\">{html.escape(paper.mock_note.upper())}: every LLM answer "
                     "behind these tables and figures comes from the mock provider. They show "
                     "the pipeline, not evidence.</p>")
    toc = [f"<li><a href=\"#table-{n}\">{html.escape(a.title)}</a></li>"
           for n, (a, _) in paper.tables.items()]
    toc += [f"<li><a href=\"#figure-{n}\">{html.escape(t)}</a></li>"
            for n, (_, _, t) in paper.figures.items()]
    parts.append("<h2>Contents</h2><ul>" + "".join(toc) + "<li><a href=\"#model-cards\">Model "
                 "cards</a></li><li><a href=\"#deviations\">Deviations</a></li></ul>")
    if paper.skipped:
        parts.append("<h2>Skipped</h2><ul>" + "".join(
            f"<li>{html.escape(k)}: {html.escape(v)}</li>" for k, v in paper.skipped.items())
            + "</ul>")
    if paper.notes:
        parts.append("<h2>Notes</h2><ul>" + "".join(
            f"<li>{html.escape(k)}: {html.escape(v)}</li>" for k, v in paper.notes.items())
            + "</ul>")
    for name, (a, frame) in paper.tables.items():
        parts.append(f"<h2 id=\"table-{name}\">Table: {html.escape(paper.title(a))}</h2>"
                     f"<p class=\"caption\">{html.escape(paper.caption(a))} Files: "
                     f"<a href=\"tables/{name}.csv\">CSV</a>, <a href=\"tables/{name}.md\">"
                     f"Markdown</a>, <a href=\"tables/{name}.tex\">LaTeX</a>.</p>"
                     + to_html_table(frame))
    for name, (a, _, title) in paper.figures.items():
        parts.append(f"<h2 id=\"figure-{name}\">Figure: {html.escape(paper.title(a, title))}</h2>"
                     f"<p class=\"caption\">{html.escape(paper.caption(a))} "
                     f"<a href=\"figures/{name}.pdf\">PDF</a>.</p>"
                     f"<img src=\"figures/{name}.png\" alt=\"{html.escape(title)}\">")
    for anchor, name in (("model-cards", "model_cards.md"), ("deviations", "deviations.md")):
        parts.append(f"<section class=\"appendix\" id=\"{anchor}\">"
                     f"{markdown_html(paper.texts.get(name, ''))}<p class=\"caption\">"
                     f"<a href=\"{name}\">{html.escape(name)}</a></p></section>")
    return _page(paper.heading, "\n".join(parts))


def figure_bytes(fig: Any, fmt: str) -> bytes:
    """The figure as PNG or PDF with no creation date or software version in the metadata."""
    buf = io.BytesIO()
    meta = ({"Software": None} if fmt == "png"
            else {"CreationDate": None, "Producer": None, "Creator": None})
    fig.savefig(buf, format=fmt, dpi=DPI, metadata=meta)
    return buf.getvalue()


def _replace_dir(target: Path, files: dict[str, bytes | str]) -> None:
    """Write ``files`` into a fresh sibling folder, then swap it in for ``target``."""
    tmp = target.with_name(f".{target.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for name, content in files.items():
        path = tmp / name
        if isinstance(content, str):
            path.write_text(content, encoding="utf-8")
        else:
            path.write_bytes(content)
    old = target.with_name(f".{target.name}.old")
    shutil.rmtree(old, ignore_errors=True)
    if target.exists():
        target.rename(old)
    tmp.rename(target)
    shutil.rmtree(old, ignore_errors=True)


def not_a_paper(out: Path) -> str | None:
    """Why ``ma paper`` may not write into the existing folder ``out``, or None: it replaces
    tables/ and figures/ and rewrites index.html and its texts, so a folder holding any of
    those names must be a paper it wrote (its paper.json); other files (paper/Makefile) are
    left alone either way."""
    if (out / "paper.json").exists():
        return None
    clash = sorted(p.name for p in out.iterdir()
                   if p.name in ("tables", "figures", "index.html") or p.suffix == ".md")
    return (f"holds {clash[0]} but no paper.json: not a paper this command wrote"
            if clash else None)


def write_paper(paper: Paper, out: Path, progress: Any = None) -> list[Path]:
    """Write the paper under ``out`` (tables/, figures/, the texts, index.html, paper.json);
    other files there (paper/Makefile) are left alone. ``progress(label)`` is called per file
    group. Returns the files written."""
    out.mkdir(parents=True, exist_ok=True)
    tables: dict[str, bytes | str] = {}
    for name, (a, frame) in paper.tables.items():
        title, caption = paper.title(a), paper.caption(a)
        tables[f"{name}.csv"] = to_csv(frame, title, caption)
        tables[f"{name}.md"] = to_markdown(frame, title, caption)
        tables[f"{name}.tex"] = to_latex(frame, title, caption, name)
        tables[f"{name}.html"] = table_page(paper, a, frame)
        if progress:
            progress(f"table {name}")
    _replace_dir(out / "tables", tables)
    plt = _pyplot()
    figures: dict[str, bytes | str] = {}
    for name, (_, fig, _) in paper.figures.items():
        figures[f"{name}.png"] = figure_bytes(fig, "png")
        figures[f"{name}.pdf"] = figure_bytes(fig, "pdf")
        plt.close(fig)
        if progress:
            progress(f"figure {name}")
    _replace_dir(out / "figures", figures)
    written = [out / "tables" / n for n in tables] + [out / "figures" / n for n in figures]
    for name, text in paper.texts.items():
        write_text_atomic(out / name, text)
        written.append(out / name)
    write_text_atomic(out / "index.html", index_page(paper))
    summary = {"design": paper.design, "mock": paper.mock_note, "code_fingerprint": paper.code,
               "tables": list(paper.tables), "figures": list(paper.figures),
               "skipped": paper.skipped, "notes": paper.notes, "inputs": paper.inputs}
    write_json_atomic(out / "paper.json", summary)
    return [*written, out / "index.html", out / "paper.json"]
