"""Grants: the built-ins, the owner's files, every kind of problem, and the fail-closed state (M5a 8)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from boxmaker.brokerd.grants import BUILTIN_TEXTS, GrantWatcher, Mode, load_grants
from boxmaker.brokerd.sentences import MEMORY_GRANT
from boxmaker.brokerd.service import Brokerd
from boxmaker.proto.labels import DataClass
from brokerd.brokerd_helpers import grant_text, request, write_grant

SEED_RECALL = (
    '# built in: recall\ntool = "recall"\nmode = "auto"\nmax_taint = "secret"\n'
    'result_class = "private"\nuntrusted = false\n'
)


def test_the_builtins_are_present_with_an_empty_or_missing_folder(home: Path) -> None:
    missing = load_grants(home / "grants")
    (home / "grants").mkdir(parents=True)
    empty = load_grants(home / "grants")
    for grants in (missing, empty):
        assert grants.valid
        assert grants.owner == ()
        assert [g.id for g in grants.builtin] == [
            "builtin-recall",
            "builtin-memory",
            "builtin-clock",
            "builtin-find-tool",
        ]


def test_the_memory_builtins_are_the_seed_text_and_hash() -> None:
    assert BUILTIN_TEXTS["builtin-recall"] == SEED_RECALL
    assert BUILTIN_TEXTS["builtin-memory"] == SEED_RECALL.replace("recall", "memory")
    grants = load_grants(Path("/nonexistent"))
    recall = grants.for_tool("recall")[0]
    assert recall.sha256 == hashlib.sha256(SEED_RECALL.encode()).hexdigest()
    assert (recall.mode, recall.max_taint, recall.result_class, recall.untrusted) == (
        Mode.AUTO,
        DataClass.SECRET,
        DataClass.PRIVATE,
        False,
    )
    assert not recall.constrained
    clock = grants.for_tool("clock")[0]
    assert (clock.result_class, clock.untrusted) == (DataClass.PUBLIC, False)


def test_an_owner_grant_is_read_with_its_constraints(home: Path) -> None:
    text = grant_text("http_fetch", "ask", "private", hosts=["Docs.Python.org", "*.example.org"])
    write_grant(home, "web", text)
    grants = load_grants(home / "grants")
    assert grants.valid
    (web,) = grants.owner
    assert (web.id, web.tool, web.mode, web.hosts) == (
        "web",
        "http_fetch",
        Mode.ASK,
        ("docs.python.org", "*.example.org"),
    )
    assert web.sha256 == hashlib.sha256(text.encode()).hexdigest()
    assert grants.for_tool("http_fetch") == [web]


@pytest.mark.parametrize("tool", ["recall", "memory"])
def test_a_grant_for_recall_or_memory_is_a_problem_and_every_call_is_refused(
    home: Path, broker: Brokerd, tool: str
) -> None:
    write_grant(home, "mine", grant_text(tool, "deny"))
    grants = load_grants(home / "grants")
    assert not grants.valid
    assert grants.problems[0].file == "grants/mine.toml"
    assert grants.problems[0].why == MEMORY_GRANT
    assert MEMORY_GRANT == "the policy of recall and memory is built in; remove this grant"
    for call in (
        request("recall", {"query": "x"}),
        request("memory", {"action": "note", "text": "x"}),
        request("clock"),
    ):
        response = broker.tool_call(call)
        assert response.code == "refused:grants-invalid"
        assert response.label is None
        assert "grants/mine.toml" in response.output
        assert MEMORY_GRANT in response.output
        assert "(runbook: grants-invalid)" in response.output


PROBLEMS = [
    ("builtin-clock", grant_text("clock"), "reserved for the built-in grants"),
    ("Web", grant_text("clock"), "must match"),
    ("web", grant_text("http_fetch") + 'colour = "red"\n', "unknown key 'colour' at the top level"),
    ("web", 'tool = "http_fetch"\nmode = "auto"\n', "max_taint"),
    ("web", grant_text("http_fetch", mode="sometimes"), "mode"),
    ("web", grant_text("http_fetch", max_taint="top"), "max_taint"),
    ("web", "tool = = 1", "not valid TOML"),
    ("web", grant_text("read_file", paths=["relative/dir"]), "not an absolute path"),
    ("web", grant_text("http_fetch", hosts=["exa mple.org"]), "not a host name"),
    ("web", grant_text("clock", patterns=["(unclosed"]), "not a regular expression"),
]


@pytest.mark.parametrize(("name", "text", "why"), PROBLEMS, ids=[p[2] for p in PROBLEMS])
def test_each_problem_is_named_and_fails_closed(
    home: Path, broker: Brokerd, name: str, text: str, why: str
) -> None:
    write_grant(home, name, text)
    grants = load_grants(home / "grants")
    assert not grants.valid
    assert why in grants.problems[0].why
    response = broker.tool_call(request("clock"))
    assert response.code == "refused:grants-invalid"
    assert f"grants/{name}.toml" in response.output


def test_an_unreadable_file_is_a_problem(home: Path) -> None:
    if os.geteuid() == 0:
        path = write_grant(home, "web", "\xff")
        path.write_bytes(b"\xff\xfe")
        assert load_grants(home / "grants").problems[0].why == "not UTF-8"
        return
    path = write_grant(home, "web", grant_text("clock"))
    path.chmod(0)
    assert "cannot read it" in load_grants(home / "grants").problems[0].why


def test_other_names_in_the_folder_are_ignored(home: Path) -> None:
    write_grant(home, "web", grant_text("clock"))
    (home / "grants" / "README").write_text("notes")
    (home / "grants" / "web.toml~").write_text("junk")
    assert [g.id for g in load_grants(home / "grants").owner] == ["web"]


def test_the_folder_is_reread_when_it_changes(home: Path, broker: Brokerd) -> None:
    watcher = GrantWatcher(home / "grants")
    assert watcher.current().owner == ()
    path = write_grant(home, "bad", grant_text("memory"))
    assert not watcher.current().valid
    assert broker.tool_call(request("clock")).code == "refused:grants-invalid"
    path.unlink()
    write_grant(home, "web", grant_text("http_fetch", hosts=["example.org"]))
    assert watcher.current().valid
    assert [g.id for g in watcher.current().owner] == ["web"]
    assert broker.tool_call(request("clock")).code == "ok"
