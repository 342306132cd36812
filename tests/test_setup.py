"""`make setup` repairs an environment that drifted from uv.lock (issue 27): after
`uv sync --extra slurm`, which uninstalls every other extra (pytest among them), `make test`
syncs again and passes; with nothing drifted, `make setup` syncs nothing.

The project's own lock has 165 packages, so the drift is simulated on a scratch project that
runs the repository's Makefile as it is: two extras, each one local wheel built here (no index,
no network), the `dev` one providing the `pytest` command that `make test` runs."""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

from tests.support import ROOT

PYPROJECT = """\
[project]
name = "scratch"
version = "0"
requires-python = ">=3.11"

[project.optional-dependencies]
dev = ["devdep"]
bazaar = []
slurm = ["slurmdep"]

[tool.uv]
package = false

[tool.uv.sources]
devdep = { path = "wheels/devdep-0.1-py3-none-any.whl" }
slurmdep = { path = "wheels/slurmdep-0.1-py3-none-any.whl" }
"""


def _python_with_uv() -> str:
    """The interpreter the Makefile's `$(PYTHON) -m uv` needs (make setup installs uv into it)."""
    python = shutil.which("python3")
    if python is None or subprocess.run([python, "-m", "uv", "--version"],
                                        capture_output=True).returncode != 0:
        pytest.skip("no python3 with uv on PATH (make setup installs it)")
    return python


def _wheel(folder: Path, name: str, script: str | None = None) -> None:
    """A minimal pure-Python wheel; `script` names a console script that prints and exits 0."""
    files = {
        f"{name}/__init__.py": f"def main():\n    print('{name} ran')\n",
        f"{name}-0.1.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n",
        f"{name}-0.1.dist-info/WHEEL":
            "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    if script:
        files[f"{name}-0.1.dist-info/entry_points.txt"] = (
            f"[console_scripts]\n{script} = {name}:main\n")
    record = []
    for path, text in files.items():
        digest = hashlib.sha256(text.encode()).digest()
        b64 = base64.urlsafe_b64encode(digest).rstrip(b"=").decode()
        record.append(f"{path},sha256={b64},{len(text.encode())}")
    record.append(f"{name}-0.1.dist-info/RECORD,,")
    files[f"{name}-0.1.dist-info/RECORD"] = "\n".join(record) + "\n"
    with zipfile.ZipFile(folder / f"{name}-0.1-py3-none-any.whl", "w") as archive:
        for path, text in files.items():
            archive.writestr(path, text)


@pytest.fixture
def scratch(tmp_path: Path) -> tuple[Path, dict[str, str], str]:
    python = _python_with_uv()
    project = tmp_path / "project"
    (project / "wheels").mkdir(parents=True)
    shutil.copy2(ROOT / "Makefile", project / "Makefile")
    (project / "pyproject.toml").write_text(PYPROJECT)
    _wheel(project / "wheels", "devdep", script="pytest")
    _wheel(project / "wheels", "slurmdep")
    env = {k: v for k, v in os.environ.items()
           if k not in ("VIRTUAL_ENV", "UV_PROJECT_ENVIRONMENT", "MAKEFLAGS", "MFLAGS")}
    env.update(UV_CACHE_DIR=str(tmp_path / "uv-cache"), UV_OFFLINE="1", UV_NO_PROGRESS="1")
    subprocess.run([python, "-m", "uv", "lock"], cwd=project, env=env, check=True,
                   capture_output=True)
    return project, env, python


def _make(project: Path, env: dict[str, str], python: str, *args: str):
    return subprocess.run(["make", "--no-print-directory", f"PYTHON={python}", *args],
                          cwd=project, env=env, capture_output=True, text=True, timeout=300)


def test_make_test_repairs_an_environment_that_drifted_from_the_lock(scratch):
    project, env, python = scratch
    built = _make(project, env, python, "setup")
    assert built.returncode == 0, built.stdout + built.stderr
    assert (project / ".venv/bin/pytest").exists()

    # The old first command of docs/cluster.md: exact sync to one extra drops the others.
    subprocess.run([python, "-m", "uv", "sync", "--extra", "slurm"], cwd=project, env=env,
                   check=True, capture_output=True)
    assert not (project / ".venv/bin/pytest").exists()

    done = _make(project, env, python, "test")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "devdep ran" in done.stdout
    assert (project / ".venv/bin/pytest").exists()


def test_make_setup_syncs_nothing_when_nothing_drifted(scratch):
    project, env, python = scratch
    assert _make(project, env, python, "setup").returncode == 0
    again = _make(project, env, python, "setup")
    assert again.returncode == 0, again.stdout + again.stderr
    assert "--compile-bytecode" not in again.stdout
    assert again.stdout.strip() == "" and "Installed" not in again.stderr


def test_the_slurm_extra_is_installed_only_when_asked_and_then_kept(scratch):
    """Snakemake imports every installed executor plugin at each start (the SLURM one imports
    pandas): `make setup` leaves the `slurm` extra out; `EXTRAS=--all-extras` adds it, and a
    plain setup after that keeps it (--inexact), as it keeps a plug-in installed by hand."""
    project, env, python = scratch
    site = project / ".venv/lib"
    assert _make(project, env, python, "setup").returncode == 0
    assert not list(site.glob("python*/site-packages/slurmdep"))
    done = _make(project, env, python, "setup", "EXTRAS=--all-extras")
    assert done.returncode == 0, done.stdout + done.stderr
    assert list(site.glob("python*/site-packages/slurmdep"))
    again = _make(project, env, python, "setup")
    assert again.returncode == 0 and "Uninstalled" not in again.stderr, again.stderr
    assert list(site.glob("python*/site-packages/slurmdep"))
