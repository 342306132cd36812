"""Reading what a user gives the package: text files and YAML, refused with one line naming the
file (and the key) before any work starts.

- A file must be a regular file of at most :data:`MAX_FILE_BYTES` holding UTF-8 text.
- YAML is read as JSON-shaped data: mappings, lists, strings, numbers, booleans and null.
  Dates stay strings; the tags ``!!binary``, ``!!timestamp``, ``!!set``, ``!!omap`` and
  ``!!pairs`` are refused (no JSON type holds them).
- A key written twice in one mapping is refused (YAML would keep the last one without a word);
  a merge key (``<<: *base``) may still be overridden, as YAML intends.
- Anchors and aliases are allowed, but the document they expand to may hold at most
  :data:`MAX_YAML_NODES` values and nest at most :data:`MAX_YAML_DEPTH` deep (a
  "billion laughs" file is refused after reading, before anything is expanded), and an alias
  may not contain itself.

Numbers are checked where they are used: every config model derives from
:class:`market_agents.core.Strict` (finite floats, 64-bit integers).

The environment variables ``ma`` reads before any command runs are here too (the serving
switches, the stop grace and the providers' base URLs: :func:`check_environment`), so that
reading them loads nothing of the LLM layer: a classical run never imports it. A boolean switch
takes only its documented values (:func:`parse_flag`) and a base URL only an http(s) URL with a
host (``provider_kinds.url_problem``); anything else is refused, never read as "off" or sent to.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import yaml

from market_agents import provider_kinds
from market_agents.errors import ConfigError

MAX_FILE_BYTES = 1 << 20  # configs, designs and price tables are a few kB
MAX_YAML_NODES = 100_000  # values after expanding aliases; baseline.yaml has about 100
MAX_YAML_DEPTH = 64  # nesting of mappings and lists; configs nest about 5 deep

# Serving switches a whole invocation can set through the environment (`ma run/cell/design`
# read them as the defaults of --replay and --new-cache): the workflow sets them from its config
# (`snakemake --config replay=true`), so they reach every job without being rule parameters.
REPLAY_ENV = "MARKET_AGENTS_REPLAY"
NEW_CACHE_ENV = "MARKET_AGENTS_NEW_CACHE"
STOP_GRACE_ENV = "MARKET_AGENTS_STOP_GRACE_S"
# the token a Snakemake invocation's jobs inherit (pipeline/holder.py); spend records carry it
HOLDER_ENV = "MARKET_AGENTS_HOLDER"
# Calls in flight get this long to finish after an interrupt (llm/interrupt.py): below SLURM's
# default KillWait (30 s, the time between SIGTERM and SIGKILL), above a typical answer's latency.
DEFAULT_STOP_GRACE_S = 10.0
# Every boolean switch the package reads from the environment (checked when `ma` starts).
FLAG_ENVS = (REPLAY_ENV, NEW_CACHE_ENV)
# The values a boolean switch accepts, in any case, with surrounding blanks. Anything else is
# refused: `MARKET_AGENTS_REPLAY=maybe` read as "off" would buy the answers it meant to replay.
FLAG_ON = ("1", "true", "yes")
FLAG_OFF = ("", "0", "false", "no")

_MERGE = "tag:yaml.org,2002:merge"
_REFUSED_TAGS = {f"tag:yaml.org,2002:{t}" for t in ("binary", "timestamp", "set", "omap",
                                                       "pairs")}


class _Loader(yaml.SafeLoader):
    """SafeLoader without the implicit timestamp: ``2024-01-01`` stays a string."""


_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


# The same loader on libyaml's parser, when PyYAML was built with it: 6-7x faster (a config, a
# design and the price table are read by every `ma` process). It is used only for text it
# parses without error and without a character the pure reader refuses, so every message about
# malformed YAML still comes from _Loader, word for word.
_FastLoader: type[yaml.SafeLoader] | None = None
if getattr(yaml, "__with_libyaml__", False):
    class _FastLoader(yaml.CSafeLoader):  # type: ignore[no-redef]
        """:class:`_Loader`'s resolvers on libyaml's parser."""

    _FastLoader.yaml_implicit_resolvers = _Loader.yaml_implicit_resolvers


def _shown(raw: str, limit: int = 60) -> str:
    """``raw`` as the message quotes it: repr, at most ``limit`` characters."""
    text = repr(raw)
    return text if len(text) <= limit else text[:limit - 4] + "...'"


def parse_flag(raw: str, where: str) -> bool:
    """A boolean switch's value.

    Args:
        raw: the text given (an environment variable's value).
        where: what the message names (the variable).

    Returns:
        True for 1/true/yes, False for 0/false/no or empty (any case, blanks around ignored).

    Raises:
        ConfigError: ``<where>='<raw>': ...`` for any other value, listing the accepted ones.
    """
    value = raw.strip().lower()
    if value in FLAG_ON:
        return True
    if value in FLAG_OFF:
        return False
    raise ConfigError(f"{where}={_shown(raw)}: not a switch value; use {'/'.join(FLAG_ON)} to "
                      f"turn it on, {'/'.join(v for v in FLAG_OFF if v)} or empty (or unset) to "
                      "turn it off")


def env_flag(name: str, env: Mapping[str, str] | None = None) -> bool:
    """Whether the boolean switch ``name`` is on (:func:`parse_flag`).

    Args:
        name: the environment variable.
        env: where it is read (default ``os.environ``); unset is off.

    Returns:
        True when it is set to 1/true/yes; False when unset, empty or 0/false/no.

    Raises:
        ConfigError: any other value, naming the variable and the accepted values.
    """
    return parse_flag((os.environ if env is None else env).get(name, ""), name)


def shown_url(url: str) -> str:
    """``url`` as a message may quote it: a URL can carry a password or key before an ``@``
    (``https://user:sk-...@host``), so such a URL is not quoted at all."""
    return "(not shown: it holds '@')" if "@" in url else _shown(url)


def check_base_url(url: str, where: str) -> str:
    """``url`` if it is a provider's base URL (``provider_kinds.url_problem``).

    Args:
        url: the text given.
        where: what the message names first (``OPENAI_BASE_URL``, ``--base-url``).

    Returns:
        ``url`` unchanged.

    Raises:
        ConfigError: one line, ``<where>=<url>: <problem>; ...``.
    """
    problem = provider_kinds.url_problem(url)
    if problem:
        raise ConfigError(f"{where}={shown_url(url)}: {problem}; a base URL is an http(s) URL "
                          "with a host, e.g. http://127.0.0.1:8000/v1")
    return url


def base_url_arg(text: str) -> str:
    """An argparse ``type``: a provider's base URL (``--base-url``), by the rule of
    ``provider_kinds.url_problem``.

    Returns:
        ``text``; ``argparse.ArgumentTypeError`` otherwise, which ``ma`` prints as one line
        naming the argument (never quoting a URL that holds '@').
    """
    problem = provider_kinds.url_problem(text)
    if problem:
        raise argparse.ArgumentTypeError(f"{shown_url(text)}: {problem}")
    return text


def check_environment(env: Mapping[str, str] | None = None) -> None:
    """Refuse what ``ma`` would misread in the environment, before any command runs (nothing
    is read as "off", no request is sent to a URL that is not one): the boolean switches
    (:data:`FLAG_ENVS`), the stop grace, and the providers' base-URL variables
    (``provider_kinds.ProviderKind.base_url_env``; set and empty reads as unset).

    Args:
        env: the environment (default ``os.environ``).

    Raises:
        ConfigError: one line naming the variable (never echoing a URL that holds '@').
    """
    env = os.environ if env is None else env
    for name in FLAG_ENVS:
        env_flag(name, env)
    stop_grace_s(env)
    for name in provider_kinds.base_url_envs():
        raw = env.get(name, "")
        if raw:
            check_base_url(raw, name)


def stop_grace_s(env: Mapping[str, str] | None = None) -> float:
    """Seconds the calls in flight at an interrupt may take to finish
    (:func:`market_agents.llm.interrupt.drain`).

    Args:
        env: where ``MARKET_AGENTS_STOP_GRACE_S`` is read (default ``os.environ``).

    Returns:
        The variable's value (seconds, >= 0), or 10 when it is unset or empty.

    Raises:
        ConfigError: the value is not a number >= 0 (checked when ``ma`` starts, so a typo
            is reported before any call, not at the interrupt).
    """
    raw = (os.environ if env is None else env).get(STOP_GRACE_ENV, "").strip()
    if not raw:
        return DEFAULT_STOP_GRACE_S
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value >= 0 or value == float("inf"):
        raise ConfigError(f"{STOP_GRACE_ENV}={raw!r}: not a number of seconds >= 0 (the time "
                          "calls in flight get to finish after Ctrl-C or SIGTERM)")
    return value


def read_text(path: str | Path, what: str = "") -> str:
    """The content of the file at ``path`` as text.

    Args:
        path: a regular file of at most :data:`MAX_FILE_BYTES` bytes holding UTF-8 text.
        what: what the message calls the file (``"price table"``; default ``"file"``).

    Returns:
        The decoded text.

    Raises:
        ConfigError: ``<path>: ...`` when the file is missing, a directory, unreadable, too
            large or not UTF-8 text.
    """
    path = Path(path)
    what = what or "file"
    try:
        if path.is_dir():
            raise ConfigError(f"{path}: is a directory, not a {what}")
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise ConfigError(f"{path}: {size:,} bytes; a {what} may hold at most "
                              f"{MAX_FILE_BYTES:,}")
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read {what} ({exc.strerror})") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: {what} is not UTF-8 text (byte 0x{data[exc.start]:02x} at "
                          f"offset {exc.start}); save it as UTF-8") from None


def parse_yaml(text: str, where: str) -> Any:
    """``text`` parsed as YAML under the rules of this module.

    Args:
        text: the YAML document.
        where: what the message names first (a path, or ``--set KEY=VALUE``).

    Returns:
        Plain data: dict, list, str, int, float, bool or None (None for an empty document).

    Raises:
        ConfigError: one line, ``<where>: ...``, naming the line or the key path at fault.
    """
    try:
        loader, node = _compose(text)
        try:
            if node is None:
                return None
            _check(node, where)
            return loader.construct_document(node)
        finally:
            loader.dispose()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        at = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = " ".join(str(exc.problem or exc.context or "").split())
        raise ConfigError(f"{where}: malformed YAML at {at}{problem}") from None
    except yaml.YAMLError as exc:  # e.g. a control character the reader refuses
        raise ConfigError(f"{where}: malformed YAML: {' '.join(str(exc).split())}") from None
    except RecursionError:
        raise ConfigError(f"{where}: malformed YAML: nested too deeply") from None


def _compose(text: str) -> tuple[yaml.SafeLoader, yaml.Node | None]:
    """A loader and the root node it composed from ``text``: :data:`_FastLoader`'s when it
    parses the text cleanly, else :class:`_Loader`'s (whose reader refuses control characters,
    and whose errors are the ones reported)."""
    if _FastLoader is not None and not yaml.reader.Reader.NON_PRINTABLE.search(text):
        fast = _FastLoader(text)
        try:
            return fast, fast.get_single_node()
        except yaml.YAMLError:
            fast.dispose()
    loader = _Loader(text)
    try:
        return loader, loader.get_single_node()
    except BaseException:
        loader.dispose()
        raise


def read_yaml(path: str | Path, what: str = "") -> dict[str, Any]:
    """The YAML mapping in the file at ``path`` ({} for an empty file); ``what`` as in
    :func:`read_text`.

    Raises:
        ConfigError: see :func:`read_text` and :func:`parse_yaml`; also when the top level is
            not a mapping.
    """
    data = parse_yaml(read_text(path, what), str(path))
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: top level must be a mapping, got {type(data).__name__}")
    return data


def int_in(low: int, high: int) -> Callable[[str], int]:
    """An argparse ``type``: a whole number in ``low..high`` (a count of seeds, workers).

    Returns:
        A converter that raises ``argparse.ArgumentTypeError`` otherwise, which ``ma`` prints
        as one line naming the argument.
    """
    def convert(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{value} is not in {low}..{high:,}")
        return value

    return convert


def _check(root: yaml.Node, where: str) -> None:
    """Walk the composed node graph once per node (aliases share nodes): count the values it
    expands to, refuse recursion, depth, refused tags and duplicate keys, naming the key path."""
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()

    def fail(path: str, message: str) -> None:
        raise ConfigError(f"{where}: {path + ': ' if path else ''}{message}")

    def walk(node: yaml.Node, path: str, depth: int) -> int:
        if id(node) in sizes:
            return sizes[id(node)]
        if id(node) in open_nodes:
            fail(path, "an alias refers to a node that contains it (recursive YAML)")
        if depth > MAX_YAML_DEPTH:
            fail(path, f"nested more than {MAX_YAML_DEPTH} levels deep")
        if node.tag in _REFUSED_TAGS:
            fail(path, f"line {node.start_mark.line + 1}: YAML tag !!{node.tag.rsplit(':', 1)[1]}"
                       " is not allowed (use text, numbers, true/false, lists and mappings)")
        open_nodes.add(id(node))
        size = 1
        if isinstance(node, yaml.SequenceNode):
            for i, child in enumerate(node.value):
                size += walk(child, f"{path}.{i}" if path else str(i), depth + 1)
        elif isinstance(node, yaml.MappingNode):
            seen: dict[Any, int] = {}
            for key, value in node.value:
                name = key.value if isinstance(key, yaml.ScalarNode) else "?"
                sub = f"{path}.{name}" if path else str(name)
                if key.tag != _MERGE and isinstance(key, yaml.ScalarNode):
                    line = key.start_mark.line + 1
                    ident = (key.tag, key.value)
                    if ident in seen:
                        fail(sub, f"key written twice (lines {seen[ident]} and {line}); "
                                  "YAML would keep the last value without a word")
                    seen[ident] = line
                size += walk(key, sub, depth + 1) + walk(value, sub, depth + 1)
        open_nodes.discard(id(node))
        if size > MAX_YAML_NODES:
            fail(path, f"expands to more than {MAX_YAML_NODES:,} values (anchors and aliases "
                       "repeated into a huge document?)")
        sizes[id(node)] = size
        return size

    walk(root, "", 0)
