"""Eight clients writing at once through memoryd's broker socket, racing on shared entries (issue 14):
no update is lost, no entry is there twice, memory.md never goes over its limit (not even in one
journal line), and every refusal is a `tool_response` the model reads.

Each client replaces its own entry of memory.md version after version (a lost update would show as
an older version), adds and removes long shared entries the others race for (one wins; the others are
refused ``duplicate``, ``not-found`` or ``limit``), and writes notes. The quick version makes 12 rounds
per client; ``--long`` 200.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from boxmaker.memoryd.files.entries import parse_entries, text_length
from faultkit import MEMORYD, journal_lines, memory_call, spawn, stop, verify, wait_answers

CLIENTS = 8
LIMIT = 2200
ALLOWED = {"ok", "noted", "refused:duplicate", "refused:not-found", "refused:limit", "refused:ambiguous"}


def shared(j: int) -> str:
    return f"shared fact {j}: " + "the tide tables for the north quay " * 8


def test_concurrent_writers_lose_no_update(home: Path, request: pytest.FixtureRequest) -> None:
    rounds = 200 if request.config.getoption("--long") else 12
    process = spawn(MEMORYD, home)
    codes: list[str] = []
    last = [0] * CLIENTS
    notes: list[str] = []
    failures: list[str] = []
    try:
        wait_answers(process, MEMORYD, home)
        for c in range(CLIENTS):
            reply = memory_call(home, {"action": "add", "file": "memory", "text": f"slot {c}: v0"}, f"s{c}")
            assert reply is not None
            assert reply.code == "ok"

        def client(c: int) -> None:
            for k in range(1, rounds + 1):
                replace = {"action": "replace", "file": "memory", "old": f"slot {c}: v{k - 1}"}
                reply = memory_call(home, {**replace, "text": f"slot {c}: v{k}"}, f"r{c}-{k}", timeout=30)
                if reply is None or reply.code != "ok":
                    failures.append(f"client {c} round {k}: {reply}")
                    return
                last[c] = k
                j = (c + k) % 9
                action = {"action": "add", "file": "memory", "text": shared(j)}
                if k % 2:
                    action = {"action": "remove", "file": "memory", "old": shared(j)}
                for arguments in (action, {"action": "note", "text": f"client {c} note {k}"}):
                    answer = memory_call(home, arguments, f"x{c}-{k}", timeout=30)
                    if answer is None:
                        failures.append(f"client {c} round {k}: no answer")
                        return
                    codes.append(answer.code)
                    if arguments["action"] == "note" and answer.code == "noted":
                        notes.append(str(arguments["text"]))

        threads = [threading.Thread(target=client, args=(c,)) for c in range(CLIENTS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=300)
            assert not thread.is_alive()
    finally:
        assert stop(process) == 0
    assert failures == []
    assert set(codes) <= ALLOWED, set(codes) - ALLOWED
    entries = parse_entries((home / "memory" / "memory.md").read_text(encoding="utf-8"))
    lost = [c for c in range(CLIENTS) if f"slot {c}: v{last[c]}" not in entries]
    duplicates = sorted({e for e in entries if entries.count(e) > 1})
    over = [
        x["id"]
        for x in journal_lines(home)
        if x.get("where") == "memory.md" and text_length(x["after"]) > LIMIT
    ]
    assert (lost, duplicates, over) == ([], [], []), (lost, duplicates, over)
    assert text_length(entries) <= LIMIT
    verdict = verify(home, notes)
    assert verdict.clean, verdict
    refused = sum(1 for code in codes if code.startswith("refused:"))
    figure = (
        f"concurrent writers: {CLIENTS} clients x {rounds} rounds ({CLIENTS * rounds * 3:,} calls): "
        f"{len(lost)} lost updates, {len(duplicates)} duplicates, limit exceeded {len(over)} times, "
        f"{refused} refusals, all tool_responses"
    )
    request.node.user_properties.append(("figure", figure))
