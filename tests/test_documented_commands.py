"""Every command the README and docs/ show, run as written in a scratch clone (opt-in: `make
test-docs`, several minutes: it runs `make run`, `make paper` and the cheap commands of every
page in order, README first).

A command is run unless :data:`NOT_HERE` names why it cannot run here as written (a paid key,
a cluster, a local model server, a placeholder, a heavy opt-in target): each such reason names
the opt-in target or the step that runs it. A command that runs must exit 0 (or the exit code
its page documents), so a documented command that breaks fails this test.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from tests.support import ROOT

pytestmark = [pytest.mark.slow, pytest.mark.docs]

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# (pattern in the command, why it is not run here): the first that matches decides.
NOT_HERE: tuple[tuple[str, str], ...] = (
    ("make test", "the suite itself (`make test`, `.ci/run`)"),
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


def commands(page: Path) -> list[str]:
    """The shell commands of ``page``'s fenced bash blocks, continuation lines joined, comments
    and blank lines dropped."""
    out, block, pending = [], False, ""
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            block = line.startswith("```bash") and not block
            continue
        if not block:
            continue
        text = re.sub(r"\s+#\s.*$", "", line).rstrip()
        if text.lstrip().startswith("#") or not text.strip():
            continue
        pending += text.strip()
        if pending.endswith("\\"):
            pending = pending[:-1] + " "
            continue
        out.append(pending)
        pending = ""
    return out


def why_not(command: str) -> str | None:
    """Why ``command`` is not run here (:data:`NOT_HERE`), or None: it runs."""
    return next((why for pattern, why in NOT_HERE if pattern in command + "  "), None)


def test_every_documented_command_is_either_run_or_says_why_not():
    documented = [(p, c) for p in PAGES for c in commands(p)]
    assert len(documented) > 50
    for _page, command in documented:
        assert command.startswith((".venv/bin/", "make ", "git ", "export ", "sudo ",
                                   "workflow/", "python ", "llama-server", "vllm ", "ollama ",
                                   "OPENAI_", "MARKET_AGENTS_")), command


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


def test_the_cheap_documented_commands_run_as_written(clone):
    before = _installed_from()
    # uv builds the clone's .venv from its cache: nothing in a test reaches the internet
    env = {k: v for k, v in os.environ.items()
           if not k.endswith("_API_KEY") and k != "VIRTUAL_ENV"} | {"UV_OFFLINE": "1"}
    ran, skipped, failed = 0, 0, []
    for page in PAGES:
        for command in commands(page):
            if why_not(command):
                skipped += 1
                continue
            done = subprocess.run(command, shell=True, cwd=clone, env=env, capture_output=True,
                                  text=True, timeout=1200, stdin=subprocess.DEVNULL)
            ok = next((codes for pattern, codes in EXITS if pattern in command), {0})
            ran += 1
            if done.returncode not in ok:
                tail = (done.stdout + done.stderr).strip().splitlines()[-3:]
                failed.append(f"{page.name}: {command} -> exit {done.returncode}: {tail}")
    print(f"documented commands: {ran} run as written, {skipped} not run here (with why)")
    assert _installed_from() == before  # the project's environment is untouched
    assert not failed, "\n".join(failed)
    assert ran >= 40
