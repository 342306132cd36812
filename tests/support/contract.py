"""A scratch project for the run contract: the repository's Makefile, sources and virtual
environment linked in, config/ and .research/evaluation.json copied (results and the record are
the project's own), and helpers to run `make`, `ma`, python modules and git there."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from tests.support import ROOT, inprocess
from tests.support.workflow import env

LINKED = ("Makefile", "pyproject.toml", "uv.lock", ".venv", "src")


def project(path: Path, git: bool = False) -> Path:
    """A project at ``path``; with ``git`` a repository with one commit (config, .research)."""
    path.mkdir(parents=True, exist_ok=True)
    for name in LINKED:
        (path / name).symlink_to(ROOT / name)
    shutil.copytree(ROOT / "config", path / "config")
    (path / ".research").mkdir()
    shutil.copy(ROOT / ".research/evaluation.json", path / ".research/evaluation.json")
    if git:
        # the repository's own ignores (what a user's checkout commits), and the links
        (path / ".gitignore").write_text((ROOT / ".gitignore").read_text() + "\n".join(LINKED)
                                         + "\n")
        run_git(path, "init", "-q", "-b", "main")
        commit(path, "project")
    return path


def run_git(path: Path, *args: str) -> str:
    done = subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=path,
                          capture_output=True, text=True, timeout=60, check=True)
    return done.stdout


def commit(path: Path, message: str) -> str:
    run_git(path, "add", "-A")
    run_git(path, "commit", "-q", "-m", message)
    return run_git(path, "rev-parse", "HEAD").strip()


def make(path: Path, *args: str, timeout: float = 600, **extra_env: str):
    """`make ARGS` in the project (the linked .venv counts as built: never re-synced here)."""
    return subprocess.run(["make", "--no-print-directory", "-o", ".venv/bin/ma", *args],
                          cwd=path, env=env(**extra_env), capture_output=True, text=True,
                          timeout=timeout)


def ma(path: Path, *args: str):
    """`ma ARGS` in the project, in this process (``inprocess.ma``)."""
    return inprocess.ma(args, env(), path)


def py(path: Path, *args: str, **extra_env: str):
    return subprocess.run([sys.executable, "-m", *args], cwd=path, env=env(**extra_env),
                          capture_output=True, text=True, timeout=600)
