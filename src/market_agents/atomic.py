"""Writing a file so that readers see the old version or the new one, never half of one.

Every part that writes a result file uses these writers. A write that fails (a full disk, a lost
permission) leaves nothing behind and raises :class:`OSError` naming the file it was writing,
whatever library did the writing (polars reports a full disk as ``ComputeError``), so the
command line can print it as one line (``market_agents.cli``). JSON is strict: NaN and
infinities are refused (``allow_nan=False``), so every JSON file parses with a strict parser.

Imports nothing else from the package.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

import polars as pl

_OS_ERROR = re.compile(r"os error (\d+)")


@contextlib.contextmanager
def naming(path: str | Path) -> Iterator[None]:
    """Re-raise a failed write inside the block as ``OSError(errno, strerror, path)``.

    Args:
        path: the file or directory the block writes (the one the user knows, not a temp
            file).

    Raises:
        OSError: for an ``OSError`` of the block, and for a polars error that wraps one.
    """
    try:
        yield
    except OSError as exc:
        raise OSError(exc.errno or errno.EIO, exc.strerror or str(exc), str(path)) from None
    except pl.exceptions.PolarsError as exc:
        found = _OS_ERROR.search(str(exc))
        if found is None:
            raise
        code = int(found.group(1))
        raise OSError(code, os.strerror(code), str(path)) from None


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
            with os.fdopen(fd, "wb") as fh:
                write(fh)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


def json_text(data: Any, indent: int | None = 1) -> str:
    """``data`` as strict JSON text with sorted keys, ending in a newline.

    Raises:
        ValueError: when ``data`` holds NaN or an infinity (no strict JSON reader takes them).
    """
    return json.dumps(data, indent=indent, sort_keys=True, allow_nan=False) + "\n"


def write_text_atomic(path: str | Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically (see :func:`write_atomic`)."""
    write_atomic(path, lambda fh: fh.write(text.encode()))


def write_json_atomic(path: str | Path, data: Any) -> None:
    """Write ``data`` as strict JSON (:func:`json_text`) to ``path`` atomically."""
    write_text_atomic(path, json_text(data))


def write_parquet_atomic(path: str | Path, frame: pl.DataFrame, **options: Any) -> None:
    """Write ``frame`` as parquet (polars ``write_parquet`` ``options``) to ``path``
    atomically."""
    write_atomic(path, lambda fh: frame.write_parquet(fh, **options))
