"""Every command the README and docs/ show, run as written in a scratch clone (opt-in: `make
test-docs`, several minutes: it runs `make run`, `make paper` and the cheap commands of every
page in order, README first, one line per command as it goes).

A documented command is a line of a fenced `bash` block, a command line of an indented code
block, or an inline code span in prose that is one as written (it starts with `.venv/bin/` or
`make <target>`); prose commands run after every block, each once. A command is run unless
:data:`NOT_HERE` names why it cannot run here as written (a paid key, a cluster, a local model
server, a placeholder, a heavy opt-in target): each such reason names the opt-in target or the
step that runs it. A command that runs must exit 0 (or the exit code its page documents), so a
documented command that breaks fails this test. Output samples are `text` blocks (never a
command line in them; :func:`test_output_samples_hold_no_command`).
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from pathlib import Path

import pytest

from tests.support import ROOT

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# (pattern in the command, why it is not run here): the first that matches decides.
NOT_HERE: tuple[tuple[str, str], ...] = (
    ("make test ", "the suite itself (`make test`, `.ci/run`)"),
    ("make test-docs", "this very check (it would run itself in its scratch clone)"),
    ("make test-rehearsal", "the confirmatory rehearsal, minutes (its own opt-in target)"),
    (".venv/bin/pytest tests/", "a part of the suite (`make test` runs it)"),
    ("…", "a placeholder for the user's own arguments"),
    ("<", "a placeholder for the user's own arguments"),
    ("TARGET", "a placeholder: the target a user runs"),
    ("api=K", "a placeholder: the user's concurrency"),
    ("rehearse_*", "a placeholder: every rehearsal target (`make test-rehearsal`)"),
    ("record declare tier_T1", "declares a paid tier in the project's record "
                               "(tests/pipeline/test_contract.py declares in a scratch project)"),
    ("declare tier_T1", "commits a declaration of a paid tier (tests/pipeline/test_contract.py)"),
    ("RUN_ID=tier_T1 MODE=full", "a paid confirmatory tier"),
    ("RUN_ID=exploratory_mock MODE=full", "a full execution runs only once declared in the "
                                          "committed record (tests/pipeline/test_contract.py "
                                          "declares one and runs it twice)"),
    ("make evaluate", "evaluates a declared run id (`make run RUN_ID=…` calls it; "
                      "tests/pipeline/test_contract.py)"),
    ("make validate-long", "20 long runs (docs/market.md's figures)"),
    ("make validate", "60 runs and PAMS in its own environment (docs/market.md's figures)"),
    ("make bench", "the benchmarks (bench/README.md's figures)"),
    ("bench/ljung_box_grid.py", "72 GARCH processes, ~4 CPU minutes (docs/market.md's figures; "
                                "tests/analysis/test_realism.py keeps two of its rows)"),
    ("make faults", "the fault corpus: tests/test_fault_corpus.py runs it in the suite"),
    ("make demo-local-llm", "builds llama.cpp's server and a model (its own opt-in target)"),
    ("make clean", "removes what the later commands read; tests/pipeline/test_modes.py runs it "
                   "in a project seeded with live results"),
    ("snakemake paper", "the live confirmatory paper: exits 2 naming what is missing "
                        "(tests/pipeline/test_make_paper.py)"),
    ("make report", "the report of the live confirmatory paper: exits 2 naming what is "
                    "missing, like `snakemake paper`"),
    ("snakemake repilot", "the re-pilot after a failed live pilot (paid)"),
    ("--config replay=true", "a switch of a live target (docs/cache.md; tests/pipeline)"),
    ("--config new_cache=true", "a switch of a live target (docs/cache.md; tests/pipeline)"),
    ("MODEL", "a placeholder: the model a user serves"),
    ("<run_id>", "a placeholder: a declared run of the contract (tests/pipeline/test_contract.py "
                 "runs the commit step)"),
    ("--provider openai ", "a paid key (tests/llm/test_live_api.py --runapi)"),
    ("--base-url http://127.0.0.1:8000", "a local model server (`make demo-local-llm` runs "
                                          "this evaluation against its own)"),
    ("llama", "a local model server (`make demo-local-llm`)"),
    ("vllm serve", "a GPU model server"),
    ("ollama serve", "a local model server"),
    ("slurm", "a SLURM cluster (`make test-slurm`)"),
    ("SLURM_CONF", "a SLURM cluster (`make test-slurm`)"),
    ("pilot_openai.sqlite", "the live pilot's cache (`snakemake pilot`, paid)"),
    ("snakemake --cores 8 pilot", "the live pilot (paid)"),
    ("snakemake freeze", "the freeze, after a live pilot"),
    ("snakemake --cores 8 tier_T1", "a live tier (paid)"),
    ("fakeserver --port", "a server left running in the background (tests/llm/ start it)"),
    ("OPENAI_BASE_URL=http://127.0.0.1:8123", "needs the fake server started just above"),
    ("make paper  ", "the live confirmatory paper: exits 2 naming what is missing "
                     "(tests/pipeline/test_make_paper.py)"),
    ("rehearse_confirmatory", "the confirmatory rehearsal (`make test-rehearsal`)"),
    ("--ticks 20000", "20 long runs (`make validate-long`)"),
    ("--blocks 3 --pams", "60 runs and PAMS in its own environment (`make validate`)"),
    ("bench/", "a benchmark (`make bench`; bench/README.md)"),
    ("--seeds 20 --out results/bazaar", "20-seed Bazaar checks (tests/bazaar/)"),
    ("ma spend settle", "a killed paid run to settle (tests/protocol/test_settle.py)"),
)
# A command whose page says it exits non-zero on a finding: the exit codes it may end with.
EXITS: tuple[tuple[str, set[int]], ...] = (
    ("ma validate", {0, 1}),  # "exit 1 on a miss" (docs/market.md)
)


COMMAND = re.compile(r"(\.venv/bin/|make |ma |git |python |snakemake |export |sudo |"
                     r"workflow/|OPENAI_|MARKET_AGENTS_)")
PROSE = re.compile(r"`(\.venv/bin/[^`\n]+|make [a-z][^`\n]*)`")


def _blocks(page: Path) -> list[tuple[str, list[str]]]:
    """The code blocks of ``page``: (info string, lines); an indented block's info is
    ``indented``, its lines without the indent."""
    out: list[tuple[str, list[str]]] = []
    fence, lines, prev = None, [], ""
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            if fence is None:
                fence, lines = line[3:].strip() or "text", []
            else:
                out.append((fence, lines))
                fence = None
            continue
        if fence is not None:
            lines.append(line)
        elif line.startswith("    ") and line.strip() and (
                not prev.strip() or (out and out[-1][0] == "indented" and prev.startswith("    "))):
            if out and out[-1][0] == "indented" and prev.startswith("    "):
                out[-1][1].append(line[4:])
            else:
                out.append(("indented", [line[4:]]))
        prev = line
    return out


def commands(page: Path) -> list[str]:
    """The shell commands of ``page``'s fenced bash blocks and of its indented blocks (the
    lines that are commands), continuation lines joined, comments and blank lines dropped."""
    out, pending = [], ""
    for info, lines in _blocks(page):
        if info not in ("bash", "indented"):
            continue
        for line in lines:
            text = re.sub(r"\s+#\s.*$", "", line).rstrip()
            if text.lstrip().startswith("#") or not text.strip():
                continue
            if info == "indented" and not pending and not COMMAND.match(text.strip()):
                continue  # an output line of an indented sample
            pending += text.strip()
            if pending.endswith("\\"):
                pending = pending[:-1].rstrip() + " "
                continue
            out.append(pending)
            pending = ""
    return out


def prose_commands(pages: list[Path]) -> list[tuple[Path, str]]:
    """The commands ``pages`` show inline in their prose (a code span that runs as written:
    ``.venv/bin/...`` or ``make <target>``), each once, leaving out those a block shows."""
    shown = {c for p in pages for c in commands(p)}
    out, seen = [], set()
    for page in pages:
        text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
        for found in PROSE.finditer(text):
            command = found.group(1).strip()
            if command not in shown and command not in seen:
                seen.add(command)
                out.append((page, command))
    return out


def why_not(command: str) -> str | None:
    """Why ``command`` is not run here (:data:`NOT_HERE`), or None: it runs."""
    return next((why for pattern, why in NOT_HERE if pattern in command + "  "), None)


def test_every_documented_command_is_either_run_or_says_why_not():
    documented = [(p, c) for p in PAGES for c in commands(p)] + prose_commands(PAGES)
    assert len(documented) > 50
    assert why_not("make test-docs") and why_not("make test")  # never runs itself
    for _page, command in documented:
        assert command.startswith((".venv/bin/", "make ", "git ", "export ", "sudo ",
                                   "workflow/", "python ", "llama-server", "vllm ", "ollama ",
                                   "OPENAI_", "MARKET_AGENTS_")), command


def test_output_samples_hold_no_command():
    """An output sample is a `text` block (or an indented one) and holds no command line: a
    reader tells what to type from what it prints (ma's own lines read `ma <command>: ...`)."""
    for page in PAGES:
        for info, lines in _blocks(page):
            if info != "text":
                continue
            for line in lines:
                assert not re.match(r"(\$ |\.venv/bin/|make [a-z])", line), (page.name, line)
                assert not re.match(r"ma [a-z]+ [^:]*$", line), (page.name, line)


def test_indented_and_prose_commands_are_found(tmp_path):
    """The three places a page shows a command, and an indented output sample left alone."""
    page = tmp_path / "p.md"
    page.write_text("Run `make lint` or `.venv/bin/ma --help`; `ma run` is a name.\n\n"
                    "    .venv/bin/ma run x.yaml \\\n        --seed 1\n    SANITY: PASS\n\n"
                    "```bash\nmake run   # the main job\n```\n\n```text\nma run: error: x\n```\n")
    assert commands(page) == [".venv/bin/ma run x.yaml --seed 1", "make run"]
    assert [c for _, c in prose_commands([page])] == ["make lint", ".venv/bin/ma --help"]


def run_documented(pages: list[Path], cwd: Path, env: dict[str, str],
                   say=print) -> tuple[int, int, list[str]]:
    """Run every documented command of ``pages`` in ``cwd`` (blocks page by page, then prose),
    one progress line each through ``say``; returns (run, not run here, failures)."""
    todo = [(p, c) for p in pages for c in commands(p)] + prose_commands(pages)
    ran, skipped, failed = 0, 0, []
    for i, (page, command) in enumerate(todo, 1):
        head = f"[{i:>3}/{len(todo)}] {page.name}: {command[:90]}"
        why = why_not(command)
        if why:
            skipped += 1
            say(f"{head} -> not run here: {why}")
            continue
        started = time.perf_counter()
        done = subprocess.run(command, shell=True, cwd=cwd, env=env, capture_output=True,
                              text=True, timeout=1200, stdin=subprocess.DEVNULL)
        ok = next((codes for pattern, codes in EXITS if pattern in command), {0})
        ran += 1
        say(f"{head} -> exit {done.returncode} in {time.perf_counter() - started:.0f} s")
        if done.returncode not in ok:
            tail = (done.stdout + done.stderr).strip().splitlines()[-3:]
            failed.append(f"{page.name}: {command} -> exit {done.returncode}: {tail}")
    return ran, skipped, failed


def test_a_failing_command_in_an_indented_block_fails_the_run(tmp_path):
    page = tmp_path / "p.md"
    page.write_text("Text.\n\n    make --version\n    python -c 'raise SystemExit(3)'\n")
    lines: list[str] = []
    ran, skipped, failed = run_documented([page], tmp_path, dict(os.environ), lines.append)
    assert (ran, skipped) == (2, 0) and len(failed) == 1 and "exit 3" in failed[0]
    assert lines[0].startswith("[  1/2] p.md: make --version -> exit 0")


@pytest.fixture(scope="module")
def clone(tmp_path_factory) -> Path:
    """A scratch clone of the committed tree. It gets its own .venv, which its first command
    (`make run`) builds from uv.lock as on a fresh machine: a link to the project's .venv
    would be re-synced by the clone's `make` to an editable install of the clone, leaving the
    project's environment pointing at a directory that is then deleted."""
    where = tmp_path_factory.mktemp("docs") / "clone"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(where)], check=True, timeout=300)
    return where


def _installed_from() -> str:
    """Where the project's own environment imports the package from."""
    done = subprocess.run([str(ROOT / ".venv/bin/python"), "-c",
                           "import market_agents; print(market_agents.__file__)"],
                          capture_output=True, text=True, timeout=60)
    return done.stdout.strip()


@pytest.mark.docs
def test_the_cheap_documented_commands_run_as_written(clone):
    before = _installed_from()
    # uv builds the clone's .venv from its cache: nothing in a test reaches the internet
    env = {k: v for k, v in os.environ.items()
           if not k.endswith("_API_KEY") and k != "VIRTUAL_ENV"} | {"UV_OFFLINE": "1"}
    ran, skipped, failed = run_documented(PAGES, clone, env,
                                          lambda line: print(line, flush=True))
    print(f"documented commands: {ran} run as written, {skipped} not run here (with why)")
    assert _installed_from() == before  # the project's environment is untouched
    assert not failed, "\n".join(failed)
    assert ran >= 40
