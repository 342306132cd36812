"""A real full disk for write-failure tests: a small tmpfs mounted in a private mount namespace
(``unshare -m`` as root, ``unshare -rm`` in a user namespace otherwise), visible only to the
command run on it. Where neither is allowed, :func:`tmpfs_available` is False and the tests
that need it skip (the simulated-ENOSPC tests still run)."""

from __future__ import annotations

import functools
import os
import shlex
import subprocess
from pathlib import Path


@functools.cache
def _prefix() -> tuple[str, ...] | None:
    for prefix in (("unshare", "-m"), ("unshare", "-rm")):
        if prefix == ("unshare", "-m") and os.geteuid() != 0:
            continue
        try:
            probe = subprocess.run([*prefix, "sh", "-c", "mount -t tmpfs -o size=16k tmpfs /mnt"],
                                   capture_output=True, timeout=60)
        except (OSError, subprocess.SubprocessError):
            continue
        if probe.returncode == 0:
            return prefix
    return None


def tmpfs_available() -> bool:
    return _prefix() is not None


def run_on_tmpfs(cmd: list[str], mount: Path, size_kb: int,
                 **kw) -> subprocess.CompletedProcess:
    """Run ``cmd`` with a fresh ``size_kb`` kB tmpfs on ``mount``. The tmpfs goes away with the
    namespace, so what the command left on it is listed right after it (:func:`listed_files`);
    the exit code is the command's."""
    prefix = _prefix()
    assert prefix is not None, "no mount namespace here: check tmpfs_available() first"
    mount.mkdir(parents=True, exist_ok=True)
    script = (f"mount -t tmpfs -o size={size_kb}k tmpfs {shlex.quote(str(mount))} && "
              + shlex.join(cmd) + "; rc=$?; echo '--- files'; "
              f"find {shlex.quote(str(mount))} -mindepth 1 | sort; exit $rc")
    return subprocess.run([*prefix, "sh", "-c", script], capture_output=True, text=True,
                          timeout=300, **kw)


def listed_files(proc: subprocess.CompletedProcess) -> list[Path]:
    """The files :func:`run_on_tmpfs` found on the tmpfs after the command."""
    return [Path(line) for line in proc.stdout.split("--- files\n", 1)[1].splitlines()]
