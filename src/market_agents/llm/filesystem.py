"""Where a response cache may live: not on a network filesystem in SQLite's WAL mode.

diskcache opens its sqlite store in WAL mode. The WAL index lives in shared memory (a memory
map of ``cache.db-shm``), which processes on different hosts cannot share, so "WAL does not work
over a network filesystem" (https://www.sqlite.org/wal.html): two nodes of a cluster writing one
cache there can corrupt the record. A cache on NFS, CIFS/SMB, Lustre, GPFS, ... is refused
unless the user opts in to SQLite's rollback journal (``MARKET_AGENTS_CACHE_JOURNAL=delete``),
which takes the filesystem's POSIX locks instead and is as safe as those locks are (NFSv4 and
Lustre mounted with ``flock`` provide them).

Imports nothing else from the package but its errors.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from market_agents.errors import MarketAgentsError

JOURNAL_ENV = "MARKET_AGENTS_CACHE_JOURNAL"
MOUNTINFO = "/proc/self/mountinfo"
# Filesystem types (as /proc/self/mountinfo names them) whose files processes on several hosts
# share: the network and cluster filesystems an HPC site or a NAS mounts.
NETWORK_FILESYSTEMS = frozenset({
    "nfs", "nfs4", "cifs", "smb3", "smbfs", "ncpfs", "afs", "9p", "lustre", "gpfs", "beegfs",
    "ceph", "glusterfs", "ocfs2", "gfs2", "panfs", "pvfs2", "orangefs", "fuse.glusterfs",
    "fuse.cephfs", "fuse.sshfs", "fuse.s3fs", "fuse.gcsfuse", "fuse.juicefs",
})
# The rollback journal, fully synced, without a memory map (SQLite advises against mmap where
# another host may change the file).
NETWORK_SAFE = {"sqlite_journal_mode": "delete", "sqlite_synchronous": 2, "sqlite_mmap_size": 0}
_ESCAPE = re.compile(r"\\([0-7]{3})")


def _existing(path: Path) -> Path:
    """``path`` itself, or its nearest ancestor that exists (a cache not created yet lives
    where its parent does)."""
    path = Path(os.path.abspath(path))
    while not path.exists() and path != path.parent:
        path = path.parent
    return Path(os.path.realpath(path))


def filesystem_type(path: str | Path) -> str | None:
    """The type of the filesystem holding ``path`` (``ext4``, ``tmpfs``, ``nfs4``, ...).

    Read from ``/proc/self/mountinfo``: the mount with the longest mount point that contains
    ``path`` (or its nearest existing ancestor), the last one listed when several share it.
    Python has no ``os.statfs``, and mountinfo names the type where ``statfs`` gives a number.

    Args:
        path: a file or directory, existing or not.

    Returns:
        The type, or None where there is no mountinfo (not Linux) or no mount matches.
    """
    target = str(_existing(Path(path)))
    try:
        lines = Path(MOUNTINFO).read_text(errors="replace").splitlines()
    except OSError:
        return None
    best, found = -1, None
    for line in lines:
        left, sep, right = line.partition(" - ")
        fields, after = left.split(" "), right.split(" ")
        if not sep or len(fields) < 5 or not after[0]:
            continue
        mount = _ESCAPE.sub(lambda m: chr(int(m.group(1), 8)), fields[4])
        inside = target == mount or target.startswith(mount.rstrip("/") + "/")
        if inside and len(mount) >= best:
            best, found = len(mount), after[0]
    return found


def is_network(fstype: str | None) -> bool:
    """Whether ``fstype`` (as :func:`filesystem_type` names it) is a network filesystem."""
    return fstype is not None and (fstype in NETWORK_FILESYSTEMS or fstype.startswith("nfs"))


def store_settings(path: str | Path, where: str = "--cache") -> dict[str, Any]:
    """The diskcache settings under which the cache at ``path`` may be opened.

    Args:
        path: the cache directory (existing or not).
        where: how the message names the path (the option the user gave it with).

    Returns:
        ``{}`` (diskcache's defaults, WAL) on a local filesystem; :data:`NETWORK_SAFE` when
        ``MARKET_AGENTS_CACHE_JOURNAL=delete`` is set, wherever the cache lives.

    Raises:
        MarketAgentsError: the cache is on a network filesystem and the journal is not opted
            in, or the variable holds another value; one line saying why and what to do.
    """
    raw = os.environ.get(JOURNAL_ENV, "")
    mode = raw.strip().lower()
    if mode == "delete":
        return dict(NETWORK_SAFE)
    if mode:
        raise MarketAgentsError(f"{JOURNAL_ENV}={raw!r}: expected 'delete' (SQLite's rollback "
                                "journal, for a cache on a network filesystem) or unset")
    fstype = filesystem_type(path)
    if is_network(fstype):
        raise MarketAgentsError(
            f"{where} {path}: is on a network filesystem ({fstype}), where SQLite's WAL "
            "journal (the cache's default) does not work and processes on two hosts can "
            "corrupt the record; put the cache on a local disk, or set "
            f"{JOURNAL_ENV}=delete in every process that opens it to use the rollback journal, "
            "safe there as long as the filesystem's file locks work (docs/cache.md)")
    return {}
