"""Real operating-system conditions for bad-input tests: a process without root's powers (so a
directory's permissions hold even when the suite runs as root), and a full disk (a small
tmpfs in a private mount namespace, or a file-size limit where namespaces are not allowed)."""

from __future__ import annotations

import contextlib
import functools
import os
import resource
import shlex
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

NOBODY = 65534


def run_unprivileged(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    """Run ``cmd`` as an ordinary user: as ``nobody`` when the suite runs as root."""
    if os.geteuid() == 0:
        cmd = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", *cmd]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, **kw)


@contextlib.contextmanager
def shared_tmp() -> Iterator[Path]:
    """A scratch directory every user may enter (pytest's tmp_path is private to root)."""
    path = Path(tempfile.mkdtemp(prefix="ma-shared-", dir="/tmp"))
    path.chmod(0o777)
    try:
        yield path
    finally:
        for p in [path, *path.rglob("*")]:
            with contextlib.suppress(OSError):
                p.chmod(0o777 if p.is_dir() else 0o666)
        shutil.rmtree(path, ignore_errors=True)


@functools.cache
def _namespace_prefix() -> list[str] | None:
    """How to get a private mount namespace here: `unshare -m` as root, `unshare -rm` (a user
    namespace) otherwise; None when neither is allowed."""
    for prefix in (["unshare", "-m"], ["unshare", "-rm"]):
        if prefix == ["unshare", "-m"] and os.geteuid() != 0:
            continue
        try:
            probe = subprocess.run([*prefix, "sh", "-c", "mount -t tmpfs -o size=64k tmpfs /mnt "
                                    "2>/dev/null || mount -t tmpfs -o size=64k tmpfs /tmp"],
                                   capture_output=True, timeout=60)
        except (OSError, subprocess.SubprocessError):
            continue
        if probe.returncode == 0:
            return prefix
    return None


def run_on_full_disk(cmd: list[str], mount: Path, **kw) -> subprocess.CompletedProcess:
    """Run ``cmd`` with ``mount`` on a file system that is full: a 512 kB tmpfs filled to the
    last block (ENOSPC), or, where mount namespaces are not allowed, with a file-size limit
    that makes every write past 8 kB fail (EFBIG)."""
    mount.mkdir(parents=True, exist_ok=True)
    prefix = _namespace_prefix()
    if prefix is not None:
        script = (f"mount -t tmpfs -o size=512k tmpfs {shlex.quote(str(mount))} && "
                  f"(dd if=/dev/zero of={shlex.quote(str(mount / 'filler'))} bs=4k "
                  "2>/dev/null; true) && exec " + shlex.join(cmd))
        return subprocess.run([*prefix, "sh", "-c", script], capture_output=True, text=True,
                              timeout=300, **kw)

    def limit() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (8192, 8192))

    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, preexec_fn=limit,
                          **kw)


def tmpfs_available() -> bool:
    """Whether :func:`run_on_tmpfs` can mount a tmpfs here."""
    return _namespace_prefix() is not None


def run_on_tmpfs(cmd: list[str], mount: Path, size_kb: int,
                 **kw) -> subprocess.CompletedProcess:
    """Run ``cmd`` with a fresh ``size_kb`` kB tmpfs on ``mount``. The tmpfs goes away with the
    namespace, so what the command left on it is listed right after it (:func:`listed_files`);
    the exit code is the command's."""
    prefix = _namespace_prefix()
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
