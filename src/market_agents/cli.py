"""``ma``: the command line. Each subcommand lives in ``market_agents.commands.<name>`` and
exposes ``register(subparsers)``; this file only dispatches and is the one error boundary:
a named error (bad input), an ``OSError`` (a full disk, a lost permission: the writers in
``market_agents.atomic`` name the file), a number JSON cannot hold (``atomic.NotJSON``, naming
the file and key) and a bad argument each become one line on stderr and exit code 2, never a
traceback. SIGTERM (a SLURM time limit or preemption, systemd, ``kill``)
takes Ctrl-C's path in every command: one line, exit 143 (Ctrl-C: 130), nothing received
lost and no claim left (``market_agents.llm.interrupt``)."""

from __future__ import annotations

import argparse
import contextlib
import gc
import importlib
import os
import signal
import sys
import threading
from collections.abc import Iterator
from typing import NoReturn

from market_agents.atomic import NotJSON
from market_agents.errors import MarketAgentsError, Terminated
from market_agents.inputs import check_environment

# Subcommand modules, in the order `ma --help` lists them.
COMMANDS = ["run", "validate", "plot", "outcomes", "gather", "summary", "sensitivity", "budget",
            "cell", "design", "status", "gate", "spend", "pilot", "freeze", "deviations", "sigma",
            "paper", "schema", "dag", "cache", "library", "record", "verify", "bazaar"]


class _Parser(argparse.ArgumentParser):
    """argparse that reports a bad argument in one line (with where to find the usage)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {one_line(message)} (see {self.prog} --help)\n")


def one_line(message: str) -> str:
    """``message`` with every run of whitespace, newlines included, as one space."""
    return " ".join(message.split())


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """All subcommands, or just ``only``: importing one command's module keeps start-up fast."""
    parser = _Parser(
        prog="ma",
        description="market_agents: an artificial stock market with LLM traders. "
        "Every run is reproducible from a config, a seed and a response cache.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMANDS:
        if only is None or name == only:
            importlib.import_module(f"market_agents.commands.{name}").register(sub)
    return parser


def _terminate(signum: int, frame: object) -> None:
    raise Terminated(f"signal {signal.Signals(signum).name}")


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """While inside, SIGTERM raises :class:`Terminated` (a ``KeyboardInterrupt``) in the main
    thread, as Ctrl-C does, instead of ending the process where it stands (which leaves
    claims pending and loses answers in flight); the previous handler is restored after.
    Outside the main thread (where no handler can be set) it does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def main(argv: list[str] | None = None) -> int:
    """The ``ma`` command: parse ``argv`` and run one subcommand.

    Args:
        argv: the arguments after ``ma``; None: the process's own (``sys.argv[1:]``), and
            then what start-up built is frozen out of the garbage collector (``gc.freeze``).

    Returns:
        The subcommand's exit code; 2 for a :class:`MarketAgentsError`, an ``OSError``, a
        ``NotJSON`` or an environment variable ``ma`` would misread
        (``inputs.check_environment``): one line on stderr naming the command, never a
        traceback; 130 on Ctrl-C, 143 on
        SIGTERM (one line each; the same command resumes).
    """
    own_process = argv is None
    argv = sys.argv[1:] if argv is None else argv
    # pydantic looks for its own plug-ins (observers of validation, none of which the instrument
    # uses) by scanning every installed distribution's metadata when the first model is built:
    # 5-15 ms of every `ma` process, one more scan than the registries' (plugins.py)
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    command = argv[0] if argv and argv[0] in COMMANDS else None
    try:
        # before the parser, whose --replay/--new-cache defaults read the switches: a switch
        # that is neither on nor off, a stop grace or a base URL ma would misread, is refused
        # now, before any file is read or written (a bad stop grace would surface at a stop)
        check_environment()
    except MarketAgentsError as exc:
        print(f"ma{' ' + command if command else ''}: error: {one_line(str(exc))}",
              file=sys.stderr)
        return 2
    parser = build_parser(command)
    args = parser.parse_args(argv)
    if own_process:
        # What start-up built (modules, classes, the config models) lives as long as the
        # process: frozen, the garbage collector no longer walks it at every full collection,
        # nor at exit (5 % of a short `ma run`'s CPU). Not in-process callers' objects.
        gc.freeze()
    try:
        with sigterm_as_interrupt():
            return int(args.func(args) or 0)
    except MarketAgentsError as exc:
        print(f"ma {args.command}: error: {one_line(str(exc))}", file=sys.stderr)
        return 2
    except NotJSON as exc:  # a NaN or infinity bound for a JSON file: nothing was written
        print(f"ma {args.command}: error: {one_line(str(exc))}", file=sys.stderr)
        return 2
    except OSError as exc:  # nothing is half-written: the writers are atomic
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"ma {args.command}: error: {where}{one_line(exc.strerror or str(exc))}",
              file=sys.stderr)
        return 2
    except Terminated:
        print(f"ma {args.command}: terminated (SIGTERM): every answer received is stored and "
              "no claim is left; run the same command to resume", file=sys.stderr)
        return 143
    except KeyboardInterrupt:
        print(f"ma {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
