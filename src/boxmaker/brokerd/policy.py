"""Deciding one `tool_request` against the grants (M5a section 8; docs/brokerd.md). Pure: no I/O.

The order, first failing step wins:

1. ``grants/`` has a problem -> ``refused:grants-invalid`` (every call, the memory tools included);
2. no grant names the tool -> ``refused:denied``;
3. the arguments do not fit the tool's shape -> ``refused:invalid-arguments``;
4. a ``deny`` grant whose constraints fit the call -> ``refused:denied`` (deny wins);
5. no ``auto``/``ask`` grant's constraints fit -> ``refused:denied`` naming the first mismatch;
6. the session's class is above every fitting grant's `max_taint` -> ``refused:taint``;
7. an ``auto`` grant fits -> allow; else an ``ask`` grant fits -> ask the owner.

Constraints: `paths` constrain the ``path`` argument (an absolute path, compared after lexical
normalisation; the runtime compares its real path again), `hosts` the host of the ``url`` argument,
`patterns` every top-level string argument (each must fully match one pattern).
"""

from __future__ import annotations

import fnmatch
import os
import re
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlsplit

from boxmaker.brokerd import arguments, sentences
from boxmaker.brokerd.grants import Grant, GrantSet, Mode
from boxmaker.brokerd.sentences import Refusal
from boxmaker.proto.labels import Label
from boxmaker.proto.messages import ToolRequest

Verdict = Literal["allow", "ask", "deny"]


@dataclass(frozen=True, slots=True)
class Decision:
    """The verdict, the grant it rests on (None when none), and the refusal when denied."""

    verdict: Verdict
    grant: Grant | None
    refusal: Refusal | None = None


def _deny(refusal: Refusal, grant: Grant | None = None) -> Decision:
    return Decision("deny", grant, refusal)


def decide(grants: GrantSet, request: ToolRequest, session: Label) -> Decision:
    """Decide `request` for a session whose label is `session` (see the module docstring)."""
    if not grants.valid:
        first = grants.problems[0]
        return _deny(sentences.grants_invalid(first.file, first.why, len(grants.problems) - 1))
    candidates = grants.for_tool(request.tool)
    if not candidates:
        return _deny(sentences.no_grant(request.tool))
    problem = arguments.check(request.tool, request.arguments)
    if problem:
        return _deny(sentences.invalid_arguments(request.tool, problem))
    fitting: list[Grant] = []
    first_mismatch: tuple[Grant, str] | None = None
    for grant in candidates:
        why = mismatch(grant, request.arguments)
        if why is None and grant.mode is Mode.DENY:
            return _deny(sentences.denied_by(grant.id, request.tool), grant)
        if why is None:
            fitting.append(grant)
        elif first_mismatch is None and grant.mode is not Mode.DENY:
            first_mismatch = (grant, why)
    if not fitting:
        if first_mismatch is None:
            return _deny(sentences.no_grant(request.tool))
        grant, why = first_mismatch
        return _deny(sentences.constraint(grant.id, why), grant)
    clean = [g for g in fitting if session.data_class <= g.max_taint]
    if not clean:
        top = fitting[0]
        refusal = sentences.taint(top.id, request.tool, session.data_class.value, top.max_taint.value)
        return _deny(refusal, top)
    auto = [g for g in clean if g.mode is Mode.AUTO]
    return Decision("allow", auto[0]) if auto else Decision("ask", clean[0])


def mismatch(grant: Grant, args: dict[str, Any]) -> str | None:
    """None when the call's arguments fit the grant's constraints, else which one they miss."""
    if grant.paths:
        path = args.get("path")
        if not isinstance(path, str) or not path_allowed(os.path.normpath(path), grant.paths):
            return f"the path is not under {_list(grant.paths)}"
    if grant.hosts:
        host, port = host_of(args.get("url")), port_of(args.get("url"))
        if host is None or not host_allowed(host, grant.hosts, port):
            return f"the host is not one of {_list(grant.hosts)}"
    if grant.patterns:
        for key in sorted(args):
            value = args[key]
            if isinstance(value, str) and not any(re.fullmatch(p, value) for p in grant.patterns):
                return f"the argument `{key}` does not match the grant's patterns"
    return None


def _list(items: tuple[str, ...]) -> str:
    return ", ".join(items)


def path_allowed(path: str, allowed: tuple[str, ...]) -> bool:
    """True when `path` (absolute, normalised) is one of the folders in `allowed` or inside one, or
    matches one of its glob patterns (``fnmatch``: ``*`` also matches ``/``)."""
    for entry in allowed:
        if any(c in entry for c in "*?["):
            if fnmatch.fnmatchcase(path, entry):
                return True
        elif path == entry or path.startswith(entry.rstrip("/") + "/"):
            return True
    return False


def host_of(url: Any) -> str | None:
    """The lower-case host of an http(s) URL without a trailing dot; None when there is none."""
    if not isinstance(url, str):
        return None
    try:
        parts = urlsplit(url)
        host = parts.hostname
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or not host:
        return None
    return host.lower().rstrip(".")


def port_of(url: Any) -> int | None:
    """The port an http(s) URL connects to (its own, else 80 or 443); None when it has none."""
    if not isinstance(url, str):
        return None
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    if port is not None:
        return port
    return {"http": 80, "https": 443}.get(parts.scheme)


def _is_ip(host: str) -> bool:
    return bool(host) and (all(c.isdigit() or c == "." for c in host) or ":" in host)


def host_allowed(host: str, allowed: tuple[str, ...], port: int | None = None) -> bool:
    """True when `host` (and `port`) match an entry of `allowed`: ``host`` (any port), ``host:port``
    (that port only), ``*.domain`` or ``*.domain:port`` (its subdomains; never an IP address: a
    wildcard over IP literals is refused when the grant is read, and an IP host matches only an
    entry naming it exactly)."""
    host = host.lower().rstrip(".")
    for entry in allowed:
        name, _, wanted = entry.rpartition(":") if ":" in entry else (entry, "", "")
        if wanted and port != int(wanted):
            continue
        if name.startswith("*."):
            if not _is_ip(host) and host.endswith(name[1:]):
                return True
        elif host == name:
            return True
    return False
