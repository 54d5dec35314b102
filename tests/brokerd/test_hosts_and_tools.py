"""Grants name ports and never wildcard IP addresses; a grant for an unknown tool is a problem the owner
sees (issue 15 item 10)."""

from __future__ import annotations

from pathlib import Path

import pytest

from boxmaker.brokerd import admin
from boxmaker.brokerd.grants import load_grants
from boxmaker.brokerd.policy import host_allowed
from boxmaker.brokerd.service import Brokerd
from boxmaker.proto.messages import BrokerAdmin, BrokerAdminReply
from brokerd.brokerd_helpers import grant_text, request, write_grant


@pytest.mark.parametrize(
    ("host", "port", "allowed", "expected"),
    [
        ("127.0.0.1", 9000, ("127.0.0.1:9000",), True),
        ("127.0.0.1", 8080, ("127.0.0.1:9000",), False),  # the model server's port
        ("127.0.0.1", 8080, ("127.0.0.1",), True),  # a bare host still means any port
        ("docs.example.org", 443, ("*.example.org:443",), True),
        ("docs.example.org", 8443, ("*.example.org:443",), False),
        ("127.0.0.1", 80, ("*.0.0.1",), False),  # never a wildcard over an IP address
        ("10.0.0.1", 80, ("*.0.1",), False),
        ("evil-example.org", 443, ("*.example.org",), False),
    ],
)
def test_host_and_port_matching(host: str, port: int, allowed: tuple[str, ...], expected: bool) -> None:
    assert host_allowed(host, allowed, port) is expected


@pytest.mark.parametrize("entry", ["*.0.0.1", "*.1", "*.168.1.1:80", "127.0.0.1:0", "127.0.0.1:99999", "a:b"])
def test_bad_host_entries_are_grant_problems(home: Path, entry: str) -> None:
    write_grant(home, "web", grant_text("http_fetch", hosts=[entry]))
    grants = load_grants(home / "grants")
    assert not grants.valid
    assert grants.problems[0].why.startswith(f"hosts: {entry!r} is ")


def test_a_grant_with_a_port_reaches_only_that_port(home: Path, broker: Brokerd) -> None:
    write_grant(home, "local", grant_text("http_fetch", hosts=["127.0.0.1:9"]))
    denied = broker.tool_call(request("http_fetch", {"url": "http://127.0.0.1:8080/slots"}))
    assert denied.code == "refused:denied"
    reached = broker.tool_call(request("http_fetch", {"url": "http://127.0.0.1:9/"}))
    assert reached.code == "refused:fetch-failed"  # allowed, and nothing listens there


@pytest.mark.parametrize(
    ("tool", "hint"), [("http_fech", "http_fetch"), ("readfile", "read_file"), ("shell", "")]
)
def test_a_grant_for_an_unknown_tool_is_named_as_a_problem(
    home: Path, broker: Brokerd, tool: str, hint: str
) -> None:
    write_grant(home, "typo", grant_text(tool))
    reply = broker.handle("broker_admin", BrokerAdmin(command="grants"))
    assert isinstance(reply, BrokerAdminReply)
    assert isinstance(reply.data, dict)
    [problem] = reply.data["unknown_tools"]
    assert problem["file"] == "grants/typo.toml"
    assert problem["why"].startswith(f"unknown tool {tool!r}; ")
    assert (f"did you mean {hint!r}?" in problem["why"]) is bool(hint)
    assert "never match a call" in reply.text
    assert "naming no known tool" in admin.describe(load_grants(home / "grants"))
