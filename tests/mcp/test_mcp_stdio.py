"""boxmaker-mcp driven by the MCP SDK's own client over stdio, against a real memoryd (issue 17).

One memoryd serves the module's tests that never stop it (each test uses its own client names, so what
one writes cannot change what another asserts); the tests that stop or restart memoryd start their own.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from mcp.client.stdio import StdioServerParameters
from mcp_types import CallToolResult

from boxmaker.bxctl.cli import cli as bxctl
from boxmaker.mcpserver.cli import cli
from boxmaker.mcpserver.memoryd import MemorySocket
from boxmaker.proto import wire
from boxmaker.proto.errors import PeerError
from boxmaker.proto.ids import new_mcp_session_id
from boxmaker.proto.messages import McpCall, MemoryAdmin, MemoryAdminReply, ToolRequest, ToolResponse
from conftest import spawn_memoryd, stop, wait_until_answers
from mcp import Client

SHIM = str(Path(sys.executable).with_name("boxmaker-mcp"))
CONFIG = """
[mcp.clients.clean-app]
trust = "clean"

[mcp.clients.hooked]
trust = "declared"
"""


def admin_socket(home: Path) -> Path:
    return home / "run" / "owner-memory" / "admin.sock"


def mcp_socket(home: Path) -> Path:
    return home / "run" / "mcp-memory" / "mcp.sock"


def start_memoryd(home: Path) -> subprocess.Popen[bytes]:
    config = home.parent / "memoryd.toml"
    config.write_text(CONFIG, encoding="utf-8")
    process = spawn_memoryd(home, "--config", str(config), "--home", str(home))
    wait_until_answers(process, admin_socket(home))
    return process


@pytest.fixture(scope="module")
def shared() -> Iterator[Path]:
    """A home with a memoryd serving it for the whole module (trust: clean-app clean, hooked declared)."""
    root = Path(tempfile.mkdtemp(prefix="bx-", dir="/tmp"))
    home = root / "home"
    process = start_memoryd(home)
    try:
        yield home
    finally:
        stop(process)
        shutil.rmtree(root, ignore_errors=True)


def client(home: Path, name: str, *extra: str, mode: str = "auto") -> Client:
    """The SDK's client, launching ``boxmaker-mcp --client NAME --home HOME`` as its stdio server."""
    params = StdioServerParameters(command=SHIM, args=["--client", name, "--home", str(home), *extra])
    return Client(params, mode=mode)


def text(result: CallToolResult) -> str:
    first = result.content[0]
    assert first.type == "text"
    return first.text


def meta(result: CallToolResult) -> dict[str, Any]:
    return dict(result.meta or {})


def run(coroutine: Any) -> Any:
    return asyncio.run(coroutine)


def memory_md(home: Path) -> bytes:
    path = home / "memory" / "memory.md"
    return path.read_bytes() if path.exists() else b""


def jsonl(folder: Path) -> list[dict[str, Any]]:
    """Every line of the ``*.jsonl`` files of a folder."""
    return [json.loads(line) for p in sorted(folder.glob("*.jsonl")) for line in p.read_text().splitlines()]


def walk(schema: Any) -> Iterator[str]:
    """Every key anywhere in a JSON schema."""
    if isinstance(schema, dict):
        for key, value in schema.items():
            yield key
            yield from walk(value)
    elif isinstance(schema, list):
        for value in schema:
            yield from walk(value)


def test_two_tools_with_flat_schemas_and_honest_annotations(shared: Path) -> None:
    async def go() -> tuple[Any, Any, str, str]:
        async with client(shared, "lister", mode="legacy") as c:  # the 2025-11-25 handshake
            assert c.protocol_version == "2025-11-25"
            listed = (await c.list_tools()).tools
            again = (await c.list_tools()).tools
            block = (await c.read_resource("boxmaker://memory/block")).contents[0]
            assert block.mime_type == "text/markdown"
            return listed, again, c.instructions or "", getattr(block, "text", "")

    listed, again, instructions, block = run(go())
    assert [t.name for t in listed] == ["recall", "memory"]
    assert [t.model_dump() for t in listed] == [t.model_dump() for t in again]
    for tool in listed:
        keys = set(walk(tool.input_schema))
        assert not keys & {"$ref", "$defs", "oneOf", "anyOf", "allOf"}, tool.name
        assert tool.input_schema["type"] == "object"
    recall, memory = listed
    assert recall.annotations.read_only_hint is True
    assert recall.annotations.idempotent_hint is True
    assert recall.annotations.open_world_hint is False
    assert memory.annotations.read_only_hint is False
    assert memory.annotations.destructive_hint is False  # an untrusted client only adds notes
    assert memory.annotations.open_world_hint is False
    assert recall.input_schema["required"] == ["query"]
    assert "taint" in memory.input_schema["properties"]
    assert instructions.startswith("boxmaker is your long-term memory.")
    assert "# soul.md" in instructions
    assert "# soul.md" in block


def test_a_note_is_found_by_another_client_tagged_tainted_and_named(shared: Path) -> None:
    async def write() -> CallToolResult:
        async with client(shared, "writer-a") as c:
            assert c.protocol_version == "2026-07-28"  # auto: server/discover, the per-request envelope
            return await c.call_tool("memory", {"action": "note", "text": "The heron nests by the weir."})

    async def read() -> CallToolResult:
        async with client(shared, "reader-b", mode="legacy") as c:
            return await c.call_tool("recall", {"query": "heron weir"})

    noted = run(write())
    assert not noted.is_error
    assert text(noted).startswith("noted as mem-")
    assert text(noted).endswith("(untrusted)")
    assert meta(noted)["boxmaker/result"] == {"code": "noted"}
    assert meta(noted)["boxmaker/session"]["untrusted"] is True
    found = run(read())
    assert not found.is_error
    first = text(found).splitlines()[0]
    assert first.startswith("[1] memory-tainted · note, ")
    assert "via mcp:writer-a" in first
    assert meta(found)["io.modelcontextprotocol/trust-annotations"] == {"sensitive": True, "untrusted": True}
    assert meta(found)["boxmaker/label"] == {"class": "private", "untrusted": True}
    notes = (shared / "memory" / "notes.md").read_text(encoding="utf-8")
    header = next(line for line in notes.splitlines() if "mcp-writer-a-" in line)
    assert header.endswith("· via mcp:writer-a")
    assert "· untrusted ·" in header
    # the journal and the recall log name the client and the peer the kernel saw
    journal = jsonl(shared / "memory" / "edits")
    line = next(j for j in journal if j.get("mcp", {}).get("client") == "writer-a")
    assert line["mcp"]["peer_uid"] == os.getuid()
    assert isinstance(line["mcp"]["peer_pid"], int)
    recalls = jsonl(shared / "memory" / "recalls")
    assert any(r.get("mcp", {}).get("client") == "reader-b" for r in recalls)


def test_an_identity_add_from_a_default_client_is_an_untrusted_note_and_a_pending_change(
    shared: Path,
) -> None:
    before = memory_md(shared)

    async def go() -> tuple[CallToolResult, CallToolResult]:
        async with client(shared, "stranger") as c:
            added = await c.call_tool(
                "memory", {"action": "add", "file": "memory", "text": "Owner's bank is North Fen."}
            )
            removed = await c.call_tool("memory", {"action": "remove", "file": "memory", "old": "anything"})
            huge = await c.call_tool("memory", {"action": "note", "text": "x" * (5 << 20)})
            assert huge.is_error
            assert text(huge).startswith("boxmaker's memory refused the call (frame-too-large): ")
            return added, removed

    added, removed = run(go())
    assert not added.is_error
    assert text(added).startswith("saved as note mem-")
    assert text(added).endswith("(untrusted): this session has read untrusted content")
    assert meta(added)["boxmaker/result"] == {"code": "noted"}
    assert memory_md(shared) == before
    assert removed.is_error
    assert (
        text(removed) == "this session has read untrusted content; it can take notes but not change memory.md"
    )
    assert meta(removed)["boxmaker/result"] == {"code": "refused:tainted"}
    pending = [json.loads(line) for line in (shared / "memory" / "pending.jsonl").read_text().splitlines()]
    staged = next(p for p in pending if p.get("origin", {}).get("name") == "stranger")
    assert staged["origin"] == {"kind": "mcp", "name": "stranger", "class": "private", "untrusted": True}
    # the owner can accept it: their edit, confirmed because its origin is untrusted
    reply = wire.call(
        admin_socket(shared), MemoryAdmin(command="accept", arg=staged["id"], args={"yes": True})
    )
    assert isinstance(reply, MemoryAdminReply)
    assert "North Fen" in memory_md(shared).decode()


def test_a_client_the_owner_marked_clean_changes_memory_md(shared: Path) -> None:
    async def go() -> tuple[Any, CallToolResult]:
        async with client(shared, "clean-app") as c:
            memory = (await c.list_tools()).tools[1]
            return memory, await c.call_tool(
                "memory", {"action": "add", "file": "memory", "text": "Standup is at nine."}
            )

    memory, added = run(go())
    assert memory.annotations.destructive_hint is True  # its replace and remove change memory.md
    assert not added.is_error, text(added)
    assert meta(added)["boxmaker/result"] == {"code": "ok"}
    assert "Standup is at nine." in memory_md(shared).decode()


def test_a_declared_taint_is_kept_by_the_process_and_by_memoryd(shared: Path) -> None:
    async def go() -> list[CallToolResult]:
        async with client(shared, "hooked") as c:
            note = {"action": "note", "text": "A quiet note."}
            clean = await c.call_tool("memory", note)
            tainted = await c.call_tool("memory", {**note, "text": "Read a web page.", "taint": "untrusted"})
            after = await c.call_tool("memory", {**note, "text": "Later, no taint sent.", "taint": "clean"})
            return [clean, tainted, after]

    clean, tainted, after = run(go())
    assert text(clean).startswith("noted as mem-")
    assert "(untrusted)" not in text(clean)
    assert meta(clean)["boxmaker/session"]["untrusted"] is False
    assert text(tainted).endswith("(untrusted)")
    assert text(after).endswith("(untrusted)")
    assert meta(after)["boxmaker/session"]["untrusted"] is True

    # memoryd keeps the session's label: a process reusing the id and sending untrusted=false is not believed
    session = meta(after)["boxmaker/session"]["id"]
    reply = raw_note(shared, "hooked", session, "Lowering attempt.")
    assert reply.output.endswith("(untrusted)")
    assert reply.session_label is not None
    assert reply.session_label.untrusted


def test_a_taint_declared_in_another_form_still_raises_the_label(shared: Path) -> None:
    """A model that writes the taint argument or the _meta flag a little off (``true``, another case,
    a string for the flag) has still declared taint: it never passes as undeclared (fail closed)."""
    add = {"action": "add", "file": "memory", "text": "Declared off-form."}
    forms: list[tuple[dict[str, Any], dict[str, Any] | None]] = [
        ({**add, "taint": True}, None),
        ({**add, "taint": "Untrusted"}, None),
        (add, {"boxmaker/session-untrusted": "true"}),
    ]

    async def one(arguments: dict[str, Any], flag: dict[str, Any] | None) -> CallToolResult:
        async with client(shared, "hooked") as c:
            return await c.call_tool("memory", arguments, meta=flag)

    async def go() -> list[CallToolResult]:
        return list(await asyncio.gather(*(one(a, m) for a, m in forms)))

    before = memory_md(shared)
    for result in run(go()):
        assert meta(result)["boxmaker/session"]["untrusted"] is True, text(result)
        assert meta(result)["boxmaker/result"]["code"] != "ok", text(result)
    assert memory_md(shared) == before


def raw_note(home: Path, name: str, session: str, note: str) -> ToolResponse:
    """One ``mcp_call`` straight on memoryd's MCP socket, declaring no taint."""
    request = ToolRequest(session, "raw-1", "memory", {"action": "note", "text": note})
    reply = wire.call(
        mcp_socket(home), McpCall(client=name, session=session, untrusted=False, request=request)
    )
    assert isinstance(reply, ToolResponse)
    return reply


def test_two_clients_writing_at_once_lose_nothing(shared: Path) -> None:
    async def writer(name: str) -> list[CallToolResult]:
        async with client(shared, name) as c:
            return [
                await c.call_tool("memory", {"action": "note", "text": f"{name} fact {i}."}) for i in range(8)
            ]

    async def both() -> list[list[CallToolResult]]:
        return list(await asyncio.gather(writer("twin-one"), writer("twin-two")))

    for results in run(both()):
        assert all(not r.is_error for r in results)
    notes = (shared / "memory" / "notes.md").read_text(encoding="utf-8")
    for name in ("twin-one", "twin-two"):
        assert [notes.count(f"{name} fact {i}.") for i in range(8)] == [1] * 8


def test_mcp_clients_lists_the_clients_seen_and_their_trust(shared: Path) -> None:
    raw_note(shared, "lister-x", new_mcp_session_id("lister-x"), "lister-x was here.")
    reply = wire.call(admin_socket(shared), MemoryAdmin(command="mcp-clients"))
    assert isinstance(reply, MemoryAdminReply)
    by_name = {r["client"]: r for r in reply.data}
    assert by_name["lister-x"]["trust"] == "untrusted"
    assert by_name["lister-x"]["sessions"] >= 1
    assert by_name["clean-app"]["trust"] == "clean"
    assert by_name["hooked"]["trust"] == "declared"
    assert by_name["lister-x"]["peer_uid"] == os.getuid()
    # the owner's view: bxctl mcp clients (text and --json)
    listed = CliRunner().invoke(bxctl, ["--home", str(shared), "mcp", "clients", "--json"])
    assert listed.exit_code == 0, listed.output
    assert {r["client"]: r["trust"] for r in json.loads(listed.output)}["hooked"] == "declared"
    text_view = CliRunner().invoke(bxctl, ["--home", str(shared), "mcp", "clients"])
    assert "lister-x: trust untrusted (not in the config: untrusted); 1 session(s)" in text_view.output


def test_memoryd_down_is_an_error_result_and_a_restart_between_calls_loses_nothing(home: Path) -> None:
    processes: list[subprocess.Popen[bytes]] = []

    async def go() -> tuple[str, list[CallToolResult]]:
        async with client(home, "hooked", "--wait", "0") as c:
            down = await c.call_tool("recall", {"query": "anything"})
            processes.append(start_memoryd(home))
            flagged = await c.call_tool(
                "memory", {"action": "note", "text": "Before."}, meta={"boxmaker/session-untrusted": True}
            )
            stop(processes[-1])
            processes.append(
                spawn_memoryd(home, "--config", str(home.parent / "memoryd.toml"), "--home", str(home))
            )
            # a call while memoryd starts again waits for it (nothing was sent while nothing answered)
            waiting = MemorySocket(mcp_socket(home), wait=30.0)
            session = meta(flagged)["boxmaker/session"]["id"]
            request = ToolRequest(session, "raw-2", "memory", {"action": "note", "text": "While it starts."})
            during = waiting.call(McpCall(client="hooked", session=session, untrusted=False, request=request))
            assert isinstance(during, ToolResponse)
            assert during.output.endswith("(untrusted)")
            after = await c.call_tool("memory", {"action": "note", "text": "After the restart."})
            return c.instructions or "", [down, flagged, after]

    try:
        instructions, (down, flagged, after) = run(go())
    finally:
        for process in processes:
            stop(process)
    assert down.is_error
    assert text(down).startswith("memoryd-unreachable: boxmaker's memory did not answer at ")
    assert meta(down)["boxmaker/result"] == {"code": "memoryd-unreachable"}
    assert "memoryd-unreachable" in instructions
    assert not flagged.is_error
    assert text(flagged).endswith("(untrusted)")
    assert not after.is_error
    assert text(after).endswith("(untrusted)")
    notes = (home / "memory" / "notes.md").read_text(encoding="utf-8")
    assert all(notes.count(t) == 1 for t in ("Before.", "While it starts.", "After the restart."))


def test_a_bad_client_name_is_one_sentence_and_no_traceback(home: Path) -> None:
    done = CliRunner().invoke(cli, ["--client", "Claude Code", "--home", str(home)])
    assert done.exit_code == 2
    assert "is not a client name" in done.output
    assert done.exception is not None
    assert isinstance(done.exception, SystemExit)


def test_memoryd_refuses_a_session_that_is_not_the_clients(shared: Path) -> None:
    other = new_mcp_session_id("someone")
    request = ToolRequest(other, "x1", "recall", {"query": "heron"})
    with pytest.raises(PeerError) as caught:
        wire.call(
            mcp_socket(shared), McpCall(client="writer-a", session=other, untrusted=False, request=request)
        )
    assert caught.value.code == "invalid-body"
