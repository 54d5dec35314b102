"""The shapes of the known tools' arguments, checked before a call is decided (M5a sections 5 and 8).

`check(tool, arguments)` returns None when the arguments fit, else a sentence naming the argument.
Pure: no I/O. memoryd checks the content rules of `memory` again when it applies a write.

- ``recall``: ``{"query": str 1..500 characters, "k": int 1..10 (default 5)}``, no other keys.
- ``memory``: one of (``file`` is ``"memory"`` or ``"user"``)::

      {"action": "add", "file", "text"}
      {"action": "replace", "file", "old", "text"}
      {"action": "remove", "file", "old"}
      {"action": "note", "text"}
      {"action": "consolidate", "file", "entries": [{"old", "keep"|"text"|"move"|"drop"} | {"text"}]}

- ``clock``: ``{}``; ``find_tool``: ``{"query": str}`` (at most 500 characters, may be empty or absent);
  ``http_fetch``: ``{"url": str}`` (http or https, with a host); ``read_file``: ``{"path": str}``
  (absolute).

``note`` and ``add`` also take the protocol's optional capture fields (`CAPTURE_KEYS`: kind, subject,
confidence, scope, corroborating_refs, inspired_by; issue 6), and the protocol's ``forget`` (items,
sessions, text), ``index``, ``topic`` (topic), ``propose`` (target, text, refs, benefit, risk),
``feedback`` (retrieval, verdict, items, role, confidence, outcome, decision, evidence) and
autodream's maintenance actions (dream-input, supersede, mark, cool, merge, assign) are let
through by their keys: memoryd checks every value, and who may call them, and answers with the
refusal sentence the model reads.

A tool not listed here is not checked (no runtime here runs it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

MAX_ENTRIES = 200
MAX_URL = 2_000
MAX_PATH = 4_096

_ACTION_KEYS: dict[str, tuple[str, ...]] = {
    "add": ("file", "text"),
    "replace": ("file", "old", "text"),
    "remove": ("file", "old"),
    "note": ("text",),
    "consolidate": ("file", "entries"),
}


def _keys(arguments: dict[str, Any], required: tuple[str, ...], optional: tuple[str, ...] = ()) -> str | None:
    for key in required:
        if key not in arguments:
            return f"the argument `{key}` is missing"
    for key in sorted(arguments):
        if key not in required and key not in optional:
            return f"unknown argument `{key}`"
    return None


def _string(arguments: dict[str, Any], key: str, low: int, high: int) -> str | None:
    value = arguments.get(key)
    if not isinstance(value, str):
        return f"the argument `{key}` must be a string"
    if not low <= len(value) <= high:
        return f"the argument `{key}` must be {low:,} to {high:,} characters (it is {len(value):,})"
    return None


def check_recall(arguments: dict[str, Any]) -> str | None:
    """``recall``: `query` 1 to 500 characters, `k` an integer 1 to 10 (default 5)."""
    problem = _keys(arguments, ("query",), ("k",)) or _string(arguments, "query", 1, 500)
    if problem:
        return problem
    k = arguments.get("k", 5)
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= 10:
        return "the argument `k` must be an integer from 1 to 10"
    return None


#: The protocol's optional fields of a capture (`note`, `add`); memoryd checks their values.
CAPTURE_KEYS = ("kind", "subject", "confidence", "scope", "corroborating_refs", "inspired_by")
#: The protocol's read and withdrawal actions (issue 6) and their optional keys; memoryd checks them.
_PROTOCOL_KEYS: dict[str, tuple[str, ...]] = {
    "forget": ("items", "sessions", "reason"),
    "index": (),
    "topic": ("topic",),
    # promotion (seed 003 sections 17 and 23.5): memoryd checks lengths, refs and content
    "propose": ("target", "text", "refs", "benefit", "risk"),
    # metamemory (seed 003 section 23.2): a session's feedback on one of its retrievals
    "feedback": ("retrieval", "verdict", "items", "role", "confidence", "outcome", "decision", "evidence"),
    # autodream's maintenance actions (issue 7; memoryd refuses them outside a maintenance job's run)
    "dream-input": ("date", "untrusted"),
    "supersede": ("old", "new"),
    "mark": ("id", "status"),
    "cool": ("id",),
    "merge": ("ids", "text"),
    "assign": ("id", "topic", "triggers"),
}


def check_memory(arguments: dict[str, Any]) -> str | None:
    """``memory``: the five actions of M5a section 5, each with exactly its keys (`note` and `add`
    with the optional `CAPTURE_KEYS`); ``tiers`` (M5d 4.4, our addition: the tiering listing as a
    labelled tool result), with optional `untrusted`, `offset` and `limit` (one page of notes); and the
    protocol's forget, index, topic."""
    action = arguments.get("action")
    if action == "tiers":
        problem = _keys(arguments, ("action",), ("untrusted", "offset", "limit"))
        if problem is None and not isinstance(arguments.get("untrusted", False), bool):
            problem = "the argument `untrusted` must be true or false"
        for key in ("offset", "limit"):
            value = arguments.get(key, 0)
            if problem is None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
                problem = f"the argument `{key}` must be a whole number, 0 or more"
        return problem
    if isinstance(action, str) and action in _PROTOCOL_KEYS:
        return _keys(arguments, ("action",), _PROTOCOL_KEYS[action])
    if action not in _ACTION_KEYS:
        return (
            "the argument `action` must be one of add, replace, remove, note, consolidate, tiers, "
            + ", ".join(_PROTOCOL_KEYS)
        )
    assert isinstance(action, str)
    optional = CAPTURE_KEYS if action in ("note", "add") else ()
    problem = _keys(arguments, ("action", *_ACTION_KEYS[action]), optional)
    if problem:
        return problem
    if "file" in arguments and arguments["file"] not in ("memory", "user"):
        return 'the argument `file` must be "memory" or "user"'
    for key in ("old", "text"):
        if key in arguments and not isinstance(arguments[key], str):
            return f"the argument `{key}` must be a string"
    if action == "note":
        return _string(arguments, "text", 1, 1_000)
    if action == "consolidate":
        return _check_entries(arguments["entries"])
    return None


def _check_entries(entries: Any) -> str | None:
    if not isinstance(entries, list) or len(entries) > MAX_ENTRIES:
        return f"the argument `entries` must be a list of at most {MAX_ENTRIES} objects"
    for number, item in enumerate(entries, 1):
        where = f"`entries` item {number}"
        if not isinstance(item, dict):
            return f"{where} must be an object"
        unknown = sorted(set(item) - {"old", "keep", "text", "move", "drop"})
        if unknown:
            return f"{where} has an unknown key `{unknown[0]}`"
        for key in ("old", "text"):
            if key in item and not isinstance(item[key], str):
                return f"{where}: `{key}` must be a string"
        for key in ("keep", "move", "drop"):
            if key in item and item[key] is not True:
                return f"{where}: `{key}` must be true"
        ops = [k for k in ("keep", "text", "move", "drop") if k in item]
        if "old" in item and len(ops) != 1:
            return f"{where} must have exactly one of keep, text, move, drop beside `old`"
        if "old" not in item and ops != ["text"]:
            return f"{where} without `old` must have only `text` (a new entry)"
    return None


def check_clock(arguments: dict[str, Any]) -> str | None:
    """``clock``: no arguments."""
    return _keys(arguments, ())


def check_find_tool(arguments: dict[str, Any]) -> str | None:
    """``find_tool``: an optional `query` string of at most 500 characters."""
    problem = _keys(arguments, (), ("query",))
    if problem or "query" not in arguments:
        return problem
    return _string(arguments, "query", 0, 500)


def check_http_fetch(arguments: dict[str, Any]) -> str | None:
    """``http_fetch``: `url`, an http or https URL with a host."""
    problem = _keys(arguments, ("url",)) or _string(arguments, "url", 1, MAX_URL)
    if problem:
        return problem
    try:
        parts = urlsplit(arguments["url"])
        host = parts.hostname
    except ValueError:
        return "the argument `url` is not a URL"
    if parts.scheme not in ("http", "https") or not host:
        return "the argument `url` must be an http or https URL with a host"
    return None


def check_read_file(arguments: dict[str, Any]) -> str | None:
    """``read_file``: `path`, an absolute path."""
    problem = _keys(arguments, ("path",)) or _string(arguments, "path", 1, MAX_PATH)
    if problem:
        return problem
    path = arguments["path"]
    if not path.startswith("/") or "\x00" in path:
        return "the argument `path` must be an absolute path"
    return None


CHECKS: dict[str, Callable[[dict[str, Any]], str | None]] = {
    "recall": check_recall,
    "memory": check_memory,
    "clock": check_clock,
    "find_tool": check_find_tool,
    "http_fetch": check_http_fetch,
    "read_file": check_read_file,
}


def check(tool: str, arguments: dict[str, Any]) -> str | None:
    """None when `arguments` fit `tool` (or the tool is not known here), else why not."""
    checker = CHECKS.get(tool)
    return None if checker is None else checker(arguments)
