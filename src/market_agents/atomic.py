"""Writing a file so that readers see the old version or the new one, never half of one.

Every part that writes a result file uses these writers. A write that fails (a full disk, a lost
permission) leaves nothing behind and raises :class:`OSError` naming the file it was writing,
whatever library did the writing and whatever its message (polars reports a full disk as
``ComputeError``, with or without an errno), so the command line can print it as one line
(``market_agents.cli``). JSON is strict: NaN and infinities are refused (``allow_nan=False``),
so every JSON file parses with a strict parser; such a number is :class:`NotJSON`, naming the
file and the key that holds it, which the command line prints as one line.

Imports nothing else from the package.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import json
import math
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    import polars as pl

# errno values are small: a longer number after "os error" is not one (and would overflow
# os.strerror).
_OS_ERROR = re.compile(r"os error (\d{1,4})\b")


@contextlib.contextmanager
def naming(path: str | Path) -> Iterator[None]:
    """Re-raise a failed write inside the block as ``OSError(errno, strerror, path)``.

    Every polars error (and panic) inside the block is a failed write, whatever its message:
    on a disk with 16-20 KiB free the parquet writer fails with "Invalid thrift: transport
    error" and no ``os error N`` in the text (issue 25). Such an error becomes ``EIO`` with
    polars' message and the free space of the file system, so the user reads the likely cause.

    Args:
        path: the file or directory the block writes (the one the user knows, not a temp
            file).

    Raises:
        OSError: for an ``OSError`` of the block, and for any polars error: the errno of
            ``os error N`` in its message, else ``EIO``; ``filename`` is ``path``.
    """
    try:
        yield
    except OSError as exc:
        raise OSError(exc.errno or errno.EIO, exc.strerror or str(exc), str(path)) from None
    except BaseException as exc:
        # A polars error can only come from a polars already imported: not importing it here
        # keeps it out of the commands that write no table (`ma gate check`, every live job).
        pl = sys.modules.get("polars")
        if pl is None or not isinstance(exc, (pl.exceptions.PolarsError,
                                              pl.exceptions.PanicException)):
            raise
        found = _OS_ERROR.search(str(exc))
        code = int(found.group(1)) if found is not None else 0
        if code > 0:  # errno 0 is "Success": no errno at all
            raise OSError(code, os.strerror(code), str(path)) from None
        raise OSError(errno.EIO, _unexplained(exc, Path(path)), str(path)) from None


def _unexplained(exc: BaseException, path: Path) -> str:
    """One line for a write failure that carries no errno: the library's message, its error
    class, and how much space is left where ``path`` lives (a full disk is the usual cause)."""
    message = " ".join(str(exc).split()) or "no message"
    where = path
    while not where.exists() and where != where.parent:
        where = where.parent
    try:
        free = f"; {shutil.disk_usage(where).free / 1024:,.0f} KiB free on its file system"
    except OSError:
        free = ""
    return f"cannot write: {message} (polars {type(exc).__name__}{free})"


@functools.cache
def _umask() -> int:
    """The process's umask, read once (``os.umask`` can only be read by setting it)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def file_mode() -> int:
    """The mode a new result file gets: what ``open()`` would give it under the user's umask
    (0644 under the usual 022), not the 0600 of a temporary file, so a colleague sharing the
    results folder can read it."""
    return 0o666 & ~_umask()


def dir_mode() -> int:
    """The mode a new result folder gets under the user's umask (0755 under 022), not the
    0700 of a temporary folder."""
    return 0o777 & ~_umask()


def write_atomic(path: str | Path, write: Callable[[IO[bytes]], None]) -> None:
    """Call ``write`` on a temp file in the directory of ``path``, then rename it into place.

    Args:
        path: the file to write; its parent directories are created.
        write: writes the whole content to the binary file object it is given.

    Raises:
        OSError: naming ``path`` when anything fails; the temp file is removed.
    """
    path = Path(path)
    with naming(path):
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        try:
            os.fchmod(fd, file_mode())  # mkstemp makes it 0600
            with os.fdopen(fd, "wb") as fh:
                write(fh)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


class NotJSON(ValueError):
    """Data to be written as JSON holds NaN or an infinity, which no strict JSON reader takes.
    The message names the file (when known) and the key path of the first such number; the
    file is not written. ``ma`` prints it as one line (exit 2), never a traceback."""


def json_text(data: Any, indent: int | None = 1, where: str | Path = "") -> str:
    """``data`` as strict JSON text with sorted keys, ending in a newline.

    Args:
        data: JSON-shaped data (dicts, lists, text, finite numbers, booleans, None).
        indent: as ``json.dumps``.
        where: the file the text is for, named by the error.

    Returns:
        The text.

    Raises:
        NotJSON: ``data`` holds NaN or an infinity: ``<where>: <key.path> is inf: ...``.
    """
    try:
        return json.dumps(data, indent=indent, sort_keys=True, allow_nan=False) + "\n"
    except ValueError:
        found = _non_finite(data, "")
        if found is None:
            raise
        key, value = found
        raise NotJSON(f"{f'{where}: ' if str(where) else ''}{key or '(top level)'} is {value}: "
                      "JSON holds finite numbers only, so the file is not written") from None


def _non_finite(data: Any, path: str) -> tuple[str, float] | None:
    """The key path (``a.b.0``) and value of the first NaN or infinity in ``data``, in the
    order the JSON text would hold it, or None."""
    if isinstance(data, float):
        return None if math.isfinite(data) else (path, data)
    if isinstance(data, dict):
        items = sorted(data.items(), key=lambda kv: str(kv[0]))
    elif isinstance(data, (list, tuple)):
        items = list(enumerate(data))
    else:
        return None
    for key, value in items:
        found = _non_finite(value, f"{path}.{key}" if path else str(key))
        if found is not None:
            return found
    return None


def write_text_atomic(path: str | Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically (see :func:`write_atomic`)."""
    write_atomic(path, lambda fh: fh.write(text.encode()))


def write_json_atomic(path: str | Path, data: Any) -> None:
    """Write ``data`` as strict JSON (:func:`json_text`) to ``path`` atomically.

    Raises:
        NotJSON: ``data`` holds NaN or an infinity (nothing is written); OSError: as
            :func:`write_atomic`.
    """
    write_text_atomic(path, json_text(data, where=path))


def write_parquet_atomic(path: str | Path, frame: pl.DataFrame, **options: Any) -> None:
    """Write ``frame`` as parquet (polars ``write_parquet`` ``options``) to ``path``
    atomically."""
    write_atomic(path, lambda fh: frame.write_parquet(fh, **options))
