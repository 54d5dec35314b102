"""The decision, step by step (M5a section 8; docs/brokerd.md): no grant, deny, constraints, taint."""

from __future__ import annotations

from pathlib import Path

from boxmaker.brokerd.grants import load_grants
from boxmaker.brokerd.policy import decide, host_allowed, path_allowed
from boxmaker.proto.labels import SESSION_START_LABEL, DataClass, Label
from brokerd.brokerd_helpers import grant_text, request, write_grant

SECRET = Label(DataClass.SECRET, False)


def test_an_ungranted_tool_is_denied(home: Path) -> None:
    decision = decide(load_grants(home / "grants"), request("shell", {"cmd": "ls"}), SESSION_START_LABEL)
    assert decision.verdict == "deny"
    assert decision.refusal is not None
    assert decision.refusal.code == "refused:denied"
    assert decision.refusal.sentence == "no grant allows the tool shell; the owner can add one in grants/"


def test_the_memory_tools_are_allowed_in_any_session(home: Path) -> None:
    grants = load_grants(home / "grants")
    tainted = Label(DataClass.SECRET, True)
    for call in (request("recall", {"query": "x"}), request("memory", {"action": "note", "text": "x"})):
        decision = decide(grants, call, tainted)
        assert decision.verdict == "allow"
        assert decision.grant is not None
        assert decision.grant.builtin


def test_invalid_arguments_are_refused_before_anything_runs(home: Path) -> None:
    decision = decide(load_grants(home / "grants"), request("recall", {"query": "x", "k": 50}), SECRET)
    assert decision.refusal is not None
    assert decision.refusal.code == "refused:invalid-arguments"
    assert (
        decision.refusal.sentence
        == "invalid arguments for recall: the argument `k` must be an integer from 1 to 10"
    )


def test_mode_deny_wins(home: Path) -> None:
    write_grant(home, "read-docs", grant_text("read_file", paths=["/srv/docs"]))
    write_grant(home, "no-secrets", grant_text("read_file", "deny", paths=["/srv/docs/secret"]))
    grants = load_grants(home / "grants")
    allowed = decide(grants, request("read_file", {"path": "/srv/docs/a.txt"}), SESSION_START_LABEL)
    assert (allowed.verdict, allowed.grant and allowed.grant.id) == ("allow", "read-docs")
    denied = decide(grants, request("read_file", {"path": "/srv/docs/secret/key"}), SESSION_START_LABEL)
    assert denied.verdict == "deny"
    assert denied.refusal is not None
    assert denied.refusal.sentence == "the grant no-secrets denies the tool read_file"


def test_a_constraint_mismatch_names_it(home: Path) -> None:
    write_grant(home, "read-docs", grant_text("read_file", paths=["/srv/docs"]))
    write_grant(home, "web", grant_text("http_fetch", hosts=["*.example.org"]))
    write_grant(home, "say", grant_text("find_tool", patterns=["[a-z ]*"]))
    grants = load_grants(home / "grants")
    cases = [
        (request("read_file", {"path": "/srv/docs/../etc/passwd"}), "the path is not under /srv/docs"),
        (request("read_file", {"path": "/srv/docsx/a"}), "the path is not under /srv/docs"),
        (request("http_fetch", {"url": "https://example.org/"}), "the host is not one of *.example.org"),
        (request("http_fetch", {"url": "https://evil.org/?x=a.example.org"}), "the host is not one of"),
    ]
    for call, why in cases:
        decision = decide(grants, call, SESSION_START_LABEL)
        assert decision.refusal is not None, call
        assert decision.refusal.code == "refused:denied"
        assert why in decision.refusal.sentence
    ok = decide(grants, request("http_fetch", {"url": "https://docs.example.org/a"}), SESSION_START_LABEL)
    assert ok.verdict == "allow"


def test_max_taint_refuses_a_session_above_it(home: Path) -> None:
    write_grant(home, "web", grant_text("http_fetch", max_taint="private", hosts=["example.org"]))
    grants = load_grants(home / "grants")
    call = request("http_fetch", {"url": "http://example.org/"})
    assert decide(grants, call, Label(DataClass.PRIVATE, True)).verdict == "allow"
    decision = decide(grants, call, SECRET)
    assert decision.refusal is not None
    assert decision.refusal.code == "refused:taint"
    assert decision.refusal.sentence == (
        "this session has read secret data; the grant web allows http_fetch only in sessions up to private"
    )


def test_auto_is_preferred_over_ask(home: Path) -> None:
    write_grant(home, "a-ask", grant_text("http_fetch", "ask", hosts=["example.org"]))
    write_grant(home, "b-auto", grant_text("http_fetch", "auto", hosts=["example.org"]))
    decision = decide(
        load_grants(home / "grants"), request("http_fetch", {"url": "http://example.org"}), SECRET
    )
    assert (decision.verdict, decision.grant and decision.grant.id) == ("allow", "b-auto")


def test_path_and_host_matching() -> None:
    assert path_allowed("/srv/docs", ("/srv/docs",))
    assert path_allowed("/srv/docs/a/b", ("/srv/docs",))
    assert not path_allowed("/srv/docs2", ("/srv/docs",))
    assert path_allowed("/home/me/notes.txt", ("/home/me/*.txt",))
    assert not path_allowed("/home/me/notes.md", ("/home/me/*.txt",))
    assert host_allowed("a.b.example.org", ("*.example.org",))
    assert not host_allowed("example.org", ("*.example.org",))
    assert not host_allowed("badexample.org", ("*.example.org",))
    assert host_allowed("Example.ORG.", ("example.org",))
