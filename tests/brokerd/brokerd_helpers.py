"""Helpers for brokerd's tests: grant files and requests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from boxmaker.proto.labels import Label
from boxmaker.proto.messages import Body, MemoryCall, ToolRequest, ToolResponse
from boxmaker.proto.wire import FrameServer


def write_grant(home: Path, name: str, text: str) -> Path:
    """Write ``grants/<name>.toml``."""
    folder = home / "grants"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.toml"
    path.write_text(text, encoding="utf-8")
    return path


def grant_text(tool: str, mode: str = "auto", max_taint: str = "secret", **extra: Any) -> str:
    """A grant file's TOML with the five required keys and any extra ones (lists and strings)."""
    lines = [
        f'tool = "{tool}"',
        f'mode = "{mode}"',
        f'max_taint = "{max_taint}"',
        f'result_class = "{extra.pop("result_class", "public")}"',
        f"untrusted = {'true' if extra.pop('untrusted', False) else 'false'}",
    ]
    for key, value in extra.items():
        if isinstance(value, list):
            lines.append(f"{key} = [{', '.join(repr(v) for v in value)}]")
        else:
            lines.append(f"{key} = {value!r}")
    return "\n".join(lines) + "\n"


def request(
    tool: str, arguments: dict[str, Any] | None = None, session: str = "chat-a", call: str = "c1"
) -> ToolRequest:
    """A `tool_request`."""
    return ToolRequest(session=session, call_id=call, tool=tool, arguments=arguments or {})


class FakeMemoryd:
    """memoryd's broker socket as a real FrameServer in a thread, recording each memory_call."""

    def __init__(self, path: Path, label: Label | None = None) -> None:
        self.calls: list[MemoryCall] = []
        self.label = label
        self.server = FrameServer(path, self.handle, frozenset({"memory_call"}))

    def handle(self, kind: str, body: Body) -> Body:
        assert isinstance(body, MemoryCall)
        self.calls.append(body)
        return ToolResponse(
            call_id=body.request.call_id, output="[1] memory · hit", code="ok", label=self.label
        )
