"""The proxy environment variables the SDKs' HTTP client honours, named in errors.

``openai`` and ``anthropic`` send through ``httpx2``, which reads ``HTTP_PROXY``,
``HTTPS_PROXY``, ``ALL_PROXY`` (lower case first, as urllib reads them) and ``NO_PROXY`` from
the environment; a SOCKS proxy (``socks5://``, ``socks5h://``) goes through ``socksio``, a
dependency of this package for that reason. This module says which variable a base URL goes
through, so that a connection that fails there, or a proxy URL the client refuses, is
reported in one line naming the variable (its URL without credentials), not as a traceback
or as an unreachable provider.
"""

from __future__ import annotations

import os
import urllib.parse
from collections.abc import Mapping

SCHEMES = ("http", "https", "socks5", "socks5h")  # what httpx2 accepts for a proxy URL


def redact(url: str) -> str:
    """``url`` without its user and password (a proxy URL may carry credentials)."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return "<not a URL>"
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"***@{host}" + (f":{parts.port}" if parts.port else "")
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc))


def proxy_for(url: str | None, environ: Mapping[str, str] | None = None
              ) -> tuple[str, str] | None:
    """The proxy variable a request to ``url`` goes through, as httpx2 picks it.

    Args:
        url: the route's base URL (None: the SDK's default, an https URL).
        environ: the environment (default: ``os.environ``).

    Returns:
        ``(variable name, its value without credentials)``, or None when the request goes
        direct (no variable set, or the host is in ``NO_PROXY``).
    """
    environ = os.environ if environ is None else environ
    parts = urllib.parse.urlsplit(url or "https://api.invalid")
    scheme = parts.scheme or "https"
    for name in (scheme, "all"):  # the scheme's own variable wins over ALL_PROXY
        var = _winner(name, environ)
        if var is not None:
            no_proxy = environ.get("no_proxy") or environ.get("NO_PROXY") or ""
            if no_proxy and _bypassed(parts.hostname or "", no_proxy):
                return None
            return var, redact(environ[var].strip())
    return None


def _bypassed(host: str, no_proxy: str) -> bool:
    """Whether ``NO_PROXY`` lets ``host`` go direct: ``*``, the host itself, or a domain it
    ends in (a leading dot or none; a port after the name is ignored)."""
    host = host.lower()
    for entry in (e.strip().lower() for e in no_proxy.split(",")):
        name = entry.rsplit(":", 1)[0] if entry.count(":") == 1 else entry
        if name == "*" or (name and (host == name.lstrip(".")
                                     or host.endswith("." + name.lstrip(".")))):
            return True
    return False


def _winner(name: str, environ: Mapping[str, str]) -> str | None:
    """The variable urllib (and so httpx2) reads for ``name`` (http, https, all): the lower
    case one when both are set."""
    for var in (f"{name}_proxy", f"{name.upper()}_PROXY"):
        if environ.get(var, "").strip():
            return var
    return None


def unsupported(environ: Mapping[str, str] | None = None) -> str | None:
    """Why a proxy variable cannot be used, in words naming it (None: every one set can).

    httpx2 builds a transport for every proxy variable set, whatever the URL and ``NO_PROXY``,
    and fails with a traceback on one it cannot use (an unknown scheme, a URL without a host),
    so each is checked before an SDK client is built.
    """
    environ = os.environ if environ is None else environ
    for name in ("http", "https", "all"):
        var = _winner(name, environ)
        if var is None:
            continue
        raw = environ[var].strip()
        try:
            parts = urllib.parse.urlsplit(raw)
            ok = parts.scheme in SCHEMES and bool(parts.hostname)
        except ValueError:
            ok = False
        if not ok:
            return (f"{var}={redact(raw)}: not a proxy URL the HTTP client can use (a proxy is "
                    f"{', '.join(s + '://HOST:PORT' for s in SCHEMES)}); fix or unset {var}")
    return None
