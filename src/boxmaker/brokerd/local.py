"""The local runtime: ``clock``, ``find_tool``, ``http_fetch`` and ``read_file`` (docs/brokerd.md).

- ``clock``: ``2026-11-29T16:05:00Z (Sunday)``; label (public, trusted).
- ``find_tool``: the tools the grants allow (mode not deny; recall, memory and find_tool itself left
  out: they are core tools) whose name or description contains any word of the query (all of them
  for an empty query), each with its JSON-schema parameters, and how to call one with ``call_tool``.
- ``http_fetch``: see `fetch`.
- ``read_file``: the file's real path (symlinks resolved) must be under one of the grant's `paths`
  (a grant without paths allows none), checked before the open and again on what was opened
  (`readfile`); at most `read_max_bytes` are read, as UTF-8 with replacement.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from collections.abc import Callable
from typing import Any

import httpx

from boxmaker.brokerd import readfile, sentences
from boxmaker.brokerd.fetch import FetchLimits, fetch
from boxmaker.brokerd.grants import Grant, GrantSet, Mode
from boxmaker.brokerd.policy import path_allowed
from boxmaker.brokerd.runtime import Output, RunSpec, Runtime
from boxmaker.brokerd.sentences import Code
from boxmaker.brokerd.tools import SCHEMAS
from boxmaker.proto.labels import DataClass, Label

CORE_TOOLS = frozenset({"recall", "memory", "find_tool"})

#: The clock's own label.
CLOCK_LABEL = Label(DataClass.PUBLIC, False)


def utc_now() -> dt.datetime:
    """The current time in UTC."""
    return dt.datetime.now(dt.UTC)


class LocalRuntime(Runtime):
    """Runs the tools that need neither memoryd nor a container."""

    def __init__(
        self,
        fetch_limits: FetchLimits,
        read_max_bytes: int = 1_000_000,
        now: Callable[[], dt.datetime] = utc_now,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.fetch_limits = fetch_limits
        self.read_max_bytes = read_max_bytes
        self.now = now
        self.transport = transport

    def run_labelled(self, spec: RunSpec) -> tuple[Output, Label | None]:
        """Dispatch by tool name; an unknown tool is ``refused:unavailable``."""
        args = spec.request.arguments
        tool = spec.request.tool
        if tool == "clock":
            moment = self.now().astimezone(dt.UTC)
            return Output(f"{moment:%Y-%m-%dT%H:%M:%SZ} ({moment:%A})"), CLOCK_LABEL
        if tool == "find_tool":
            return Output(find_tool(spec.grants, str(args.get("query", "")))), None
        if tool == "http_fetch":
            return fetch(str(args["url"]), spec.grant.id, spec.grant.hosts, self.fetch_limits, self.transport)
        if tool == "read_file":
            return read_file(str(args["path"]), spec.grant, self.read_max_bytes), None
        refusal = sentences.no_runtime(tool)
        return Output(refusal.sentence, refusal.code), None


def find_tool(grants: GrantSet, query: str) -> str:
    """The allowed tools matching any word of `query`, with their schemas, as the model reads them."""
    words = [w for w in query.lower().split() if w]
    found: dict[str, tuple[Grant, dict[str, Any]]] = {}
    for grant in grants.all():
        schema = SCHEMAS.get(grant.tool)
        if grant.mode is Mode.DENY or grant.tool in CORE_TOOLS or schema is None or grant.tool in found:
            continue
        text = f"{grant.tool} {grant.description} {schema.description}".lower()
        if not words or any(w in text for w in words):
            found[grant.tool] = (grant, schema.as_json())
    if not found:
        return f"no allowed tool matches {query!r}"
    lines = [f"{len(found)} tool{'s' if len(found) != 1 else ''} you may call with call_tool:"]
    for name, (grant, shown) in sorted(found.items()):
        ask = " (the owner approves each call)" if grant.mode is Mode.ASK else ""
        lines.append(f"- {name}: {shown['description']}{ask}")
        if grant.description:
            lines.append(f"  allowed for: {grant.description}")
        lines.append(f"  parameters: {json.dumps(shown['parameters'], separators=(',', ':'))}")
    lines.append('Call one as call_tool {"name": "<tool>", "arguments": {...}}.')
    return "\n".join(lines)


def read_file(path: str, grant: Grant, max_bytes: int) -> Output:
    """The text of `path` when the file opened is under the grant's `paths` (`readfile`: the path is
    checked before anything is opened, and what was opened is checked again, race-free)."""
    folders = (*grant.paths, *(os.path.realpath(p) for p in grant.paths if not any(c in p for c in "*?[")))

    def allowed(real: str) -> bool:
        return bool(grant.paths) and path_allowed(real, folders)

    try:
        outside = not allowed(os.path.realpath(path))
    except OSError:  # a link changing under realpath: the walk decides
        outside = False
    if outside:
        return Output(f"the grant {grant.id} does not allow reading {path}", Code.DENIED)
    return readfile.read_file(path, grant.id, allowed, max_bytes)
