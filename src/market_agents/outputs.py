"""Where a command may write: the one rule every command that writes or replaces a folder
applies before any work (docs/guards.md, "What no command removes").

A command names the folder it writes with an argument (``ma run --out``, ``ma paper --out``,
``ma design --results``, ``ma bazaar … --out``, ``ma validate --out``). Before any work,
:func:`check_dir` refuses, in one line naming the argument:

- an empty path (it means the working directory);
- the working directory, the project (:func:`market_agents.layout.project_of`), the
  package's own checkout, or a folder above any of them;
- for an output folder (not a results root): a results root or a response cache, or a folder
  holding one;
- an existing folder with files in it that the command did not write (``ours`` says what it
  wrote: a run directory for ``ma run``, a paper for ``ma paper``).

A command replaces only what it recognises as its own; everything else stays where it is.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from market_agents.errors import ConfigError
from market_agents.layout import CACHE_DB, project_of

# What makes a folder a results root: its manifests (the spend ledger, the freeze) or its runs.
RESULTS_MARKERS = ("manifests", "runs")
CHECKOUT = project_of(Path(__file__).resolve().parent)
"""The checkout this package runs from (for an installed wheel: the project holding its
environment, if any; else None)."""


def _shown(path: str | Path) -> str:
    return repr(str(path)) if not str(path).strip() else str(path)


def _guarded() -> list[tuple[Path, str]]:
    """The folders no command writes over, with their names for a message."""
    cwd = Path.cwd().resolve()
    places = [(cwd, "the working directory")]
    project = project_of(cwd)
    if project is not None:
        places.append((project, "the project"))
    if CHECKOUT is not None:
        places.append((CHECKOUT, "the package's checkout"))
    return places


def holds_results(path: Path) -> str | None:
    """What makes ``path`` a folder no output may be, by the files it keeps: a response cache
    (``cache.db``) or a results root (``manifests/`` or ``runs/``); None otherwise."""
    if (path / CACHE_DB).exists():
        return "is a response cache"
    if any((path / name).is_dir() for name in RESULTS_MARKERS):
        return "is a results root"
    return None


def foreign(path: Path) -> str:
    """The reason a folder with files this command did not write is refused (for ``ours``)."""
    first = sorted(p.name for p in path.iterdir())[0]
    return f"holds files this command did not write (e.g. {first})"


def check_dir(path: str | Path, arg: str, ours: Callable[[Path], str | None] | None = None,
              output: bool = True) -> Path:
    """Refuse a folder a command would write into (or replace) before any work.

    Args:
        path: the folder as given on the command line.
        arg: the argument that named it, for the message (``--out``, ``--results``).
        ours: for a command that replaces the folder or writes fixed names into it: why an
            existing folder with files in it may not be replaced (:func:`foreign` for one
            this command did not write), or None when it may; None in place of the function:
            the command only adds files of its own (a results root).
        output: an output folder (True), which may not be or hold a results root or a
            response cache; False for a results root itself.

    Returns:
        ``path`` as a :class:`~pathlib.Path` (unresolved, as given).

    Raises:
        ConfigError: one line naming ``arg``, the path and why it is refused.
    """
    if not str(path).strip():
        raise ConfigError(f"{arg} {_shown(path)}: an empty path names the working directory; "
                          "give a folder of its own")
    target = Path(path)
    where = target.resolve()
    for place, name in _guarded():
        if place == where or place.is_relative_to(where):
            what = "is" if place == where else "holds"
            raise ConfigError(f"{arg} {path}: {what} {name} ({place}); nothing there is "
                              "replaced: give a folder of its own")
    if target.exists() and not target.is_dir():
        raise ConfigError(f"{arg} {path}: exists and is not a directory")
    if output and target.is_dir():
        problem = holds_results(target)
        if problem:
            raise ConfigError(f"{arg} {path}: {problem}; nothing there is replaced: give a "
                              "folder of its own")
    problem = ours(target) if ours is not None and target.is_dir() else None
    if problem:
        raise ConfigError(f"{arg} {path}: {problem}; nothing there is replaced: give a new "
                          "folder or move them away")
    return target
