"""The shapes of recall's and memory's arguments (M5a sections 5 and 8), checked before deciding."""

from __future__ import annotations

from typing import Any

import pytest

from boxmaker.brokerd.arguments import check

GOOD: list[tuple[str, dict[str, Any]]] = [
    ("recall", {"query": "deploy day"}),
    ("recall", {"query": "x" * 500, "k": 10}),
    ("recall", {"query": "a", "k": 1}),
    ("memory", {"action": "add", "file": "memory", "text": "Deploys happen on Thursday."}),
    ("memory", {"action": "replace", "file": "user", "old": "a", "text": "b"}),
    ("memory", {"action": "remove", "file": "user", "old": "a"}),
    ("memory", {"action": "note", "text": "example.org says the release moved."}),
    ("memory", {"action": "note", "text": "NAS at 10.0.0.7", "kind": "state", "subject": "nas:ip"}),
    ("memory", {"action": "add", "file": "user", "text": "UTC", "confidence": "confirmed", "scope": "time"}),
    ("memory", {"action": "forget", "items": ["mem-2026-09-24-001"], "sessions": ["chat-a"]}),
    ("memory", {"action": "index"}),
    ("memory", {"action": "topic", "topic": "backups"}),
    (
        "memory",
        {
            "action": "consolidate",
            "file": "memory",
            "entries": [
                {"old": "a", "keep": True},
                {"old": "b", "text": "b2"},
                {"old": "c", "move": True},
                {"old": "d", "drop": True},
                {"text": "new"},
            ],
        },
    ),
]

BAD: list[tuple[str, dict[str, Any], str]] = [
    ("recall", {}, "the argument `query` is missing"),
    ("recall", {"query": ""}, "`query` must be 1 to 500 characters (it is 0)"),
    ("recall", {"query": "x" * 501}, "`query` must be 1 to 500 characters (it is 501)"),
    ("recall", {"query": 3}, "`query` must be a string"),
    ("recall", {"query": "a", "k": 11}, "`k` must be an integer from 1 to 10"),
    ("recall", {"query": "a", "k": 0}, "`k` must be an integer from 1 to 10"),
    ("recall", {"query": "a", "k": True}, "`k` must be an integer from 1 to 10"),
    ("recall", {"query": "a", "k": 2.0}, "`k` must be an integer from 1 to 10"),
    ("recall", {"query": "a", "limit": 3}, "unknown argument `limit`"),
    ("memory", {}, "`action` must be one of add, replace, remove, note, consolidate"),
    ("memory", {"action": "delete"}, "`action` must be one of"),
    ("memory", {"action": "add", "file": "memory"}, "the argument `text` is missing"),
    ("memory", {"action": "add", "file": "soul", "text": "x"}, '`file` must be "memory" or "user"'),
    ("memory", {"action": "add", "file": "memory", "text": 5}, "`text` must be a string"),
    ("memory", {"action": "note", "text": "x", "file": "memory"}, "unknown argument `file`"),
    (
        "memory",
        {"action": "replace", "file": "user", "old": "a", "text": "b", "kind": "state"},
        "unknown argument `kind`",
    ),
    ("memory", {"action": "index", "topic": "x"}, "unknown argument `topic`"),
    ("memory", {"action": "note", "text": ""}, "`text` must be 1 to 1,000 characters"),
    ("memory", {"action": "note", "text": "x" * 1001}, "`text` must be 1 to 1,000 characters (it is 1,001)"),
    ("memory", {"action": "remove", "file": "user"}, "the argument `old` is missing"),
    ("memory", {"action": "consolidate", "file": "memory", "entries": {}}, "`entries` must be a list"),
    ("memory", {"action": "consolidate", "file": "memory", "entries": [3]}, "item 1 must be an object"),
    (
        "memory",
        {"action": "consolidate", "file": "memory", "entries": [{"old": "a", "keep": True, "drop": True}]},
        "exactly one of keep, text, move, drop",
    ),
    ("memory", {"action": "consolidate", "file": "memory", "entries": [{"keep": True}]}, "only `text`"),
    (
        "memory",
        {"action": "consolidate", "file": "memory", "entries": [{"old": "a", "keep": 1}]},
        "must be true",
    ),
    ("memory", {"action": "consolidate", "file": "memory", "entries": [{"x": 1}]}, "unknown key `x`"),
    ("http_fetch", {"url": "ftp://example.org/"}, "http or https"),
    ("http_fetch", {}, "the argument `url` is missing"),
    ("read_file", {"path": "etc/passwd"}, "absolute path"),
    ("clock", {"zone": "UTC"}, "unknown argument `zone`"),
    ("find_tool", {"query": 3}, "`query` must be a string"),
]


@pytest.mark.parametrize(("tool", "arguments"), GOOD)
def test_good_arguments_pass(tool: str, arguments: dict[str, Any]) -> None:
    assert check(tool, arguments) is None


@pytest.mark.parametrize(("tool", "arguments", "why"), BAD)
def test_bad_arguments_are_named(tool: str, arguments: dict[str, Any], why: str) -> None:
    problem = check(tool, arguments)
    assert problem is not None
    assert why in problem


def test_an_unknown_tool_is_not_checked() -> None:
    assert check("weather", {"anything": 1}) is None
