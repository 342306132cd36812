"""Writing a file so that readers see the old version or the new one, never half of one.

Imports nothing else from the package: every part that writes a result file uses it.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import polars as pl


def write_json_atomic(path: str | Path, data: Any) -> None:
    """Strict JSON (sorted keys, one-space indent, a final newline), written atomically."""
    write_text_atomic(path, json.dumps(data, indent=1, sort_keys=True, allow_nan=False) + "\n")


def write_parquet_atomic(path: str | Path, frame: pl.DataFrame) -> None:
    """Write ``frame`` to a temp file in the same directory, then rename it into place."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        frame.write_parquet(tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_text_atomic(path: str | Path, text: str) -> None:
    """Write ``text`` to a temp file in the same directory, then rename it into place."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
