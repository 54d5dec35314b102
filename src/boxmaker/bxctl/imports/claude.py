"""A claude.ai data export's ``conversations.json`` (issue 17).

PATH is the file, or the unzipped export's folder holding it (``conversations.jsonl``, one conversation a
line, is read too). The file is a list of conversations
``{"uuid", "name", "created_at", "chat_messages": [...]}``; each message ``{"uuid", "sender": "human" |
"assistant", "created_at" (ISO 8601), "text", "content": [blocks], "attachments": [{"file_name",
"extracted_content"}]}``. A conversation is linear.

- ``human``: the owner's turn: its text blocks, then each attachment's extracted text (content the owner
  supplied) under ``[attachment NAME]``;
- ``assistant``: its blocks in order: text is the reply; a ``tool_use`` block (``server_tool_use``,
  ``mcp_tool_use``) is a tool call (its ``input`` as the arguments); a ``tool_result`` block
  (``web_search_tool_result``, ``mcp_tool_result``: any type ending so, a web search's or a tool's
  output) is an untrusted ``tool_result``, so what follows it is tainted; ``thinking`` is kept as
  reasoning. A ``tool_result`` block in a ``human`` message is an untrusted result too, before its words.

A message without blocks is read from its ``text``. ``projects.json`` and ``users.json`` are not read;
the standard export carries no Claude memory (it is exported separately), so there are no entries.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from boxmaker.bxctl.imports.parsed import (
    Conversation,
    Malformed,
    Parsed,
    from_iso,
    load_json,
    loads,
    read_text,
    text_of,
)


def parse(path: Path) -> Parsed:
    """Read conversations.json (module docstring).

    Raises:
        Malformed: not a list of conversations, or a message that cannot be read (naming it).
    """
    file = path
    if path.is_dir():
        file = path / "conversations.json"
        if not file.exists() and (path / "conversations.jsonl").exists():
            file = path / "conversations.jsonl"
    value = _lines(file) if file.suffix == ".jsonl" else load_json(file)
    if not isinstance(value, list):
        raise Malformed(file, "the top level", "is not a list of conversations")
    parsed = Parsed()
    for number, item in enumerate(value, start=1):
        conversation = _conversation(file, number, item)
        if conversation.records:
            parsed.conversations.append(conversation)
    return parsed


def _lines(file: Path) -> list[Any]:
    """conversations.jsonl (a newer layout): one conversation object a line."""
    found = []
    for number, line in enumerate(read_text(file).splitlines(), start=1):
        if not line.strip():
            continue
        found.append(loads(line, file, f"line {number}"))
    return found


def _conversation(file: Path, number: int, item: Any) -> Conversation:
    place = f"conversation {number}"
    if not isinstance(item, dict) or not isinstance(item.get("uuid"), str) or not item["uuid"]:
        raise Malformed(file, place, "is not an object with a uuid")
    place = f"conversation {number} ({item['uuid']})"
    messages = item.get("chat_messages", [])
    if not isinstance(messages, list):
        raise Malformed(file, place, "has chat_messages that is not a list")
    conversation = Conversation(item["uuid"], str(item.get("name") or ""), file=file)
    last = from_iso(item.get("created_at"))
    for index, message in enumerate(messages, start=1):
        where = f"{place} message {index}"
        if not isinstance(message, dict):
            raise Malformed(file, where, "is not an object")
        when = from_iso(message.get("created_at")) or last
        if when is None:
            raise Malformed(file, where, "has no created_at time, nor has its conversation")
        last = when
        sender = message.get("sender")
        blocks = message.get("content")
        if not isinstance(blocks, list) or not blocks:
            blocks = [{"type": "text", "text": message.get("text") or ""}]
        if sender == "human":
            _human(conversation, when, blocks, message.get("attachments"))
        elif sender == "assistant":
            _assistant(conversation, when, blocks, file, where)
        else:
            raise Malformed(file, where, f"has sender {sender!r}, not human or assistant")
    return conversation


def _human(conversation: Conversation, when: str, blocks: list[Any], attachments: Any) -> None:
    pieces = []
    for block in blocks:
        if isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str):
            pieces.append(block["text"])
        elif isinstance(block, dict) and str(block.get("type")).endswith("tool_result"):
            _result(conversation, when, block)  # a tool's output carried in a human turn: untrusted
    for attachment in attachments if isinstance(attachments, list) else []:
        if isinstance(attachment, dict) and isinstance(attachment.get("extracted_content"), str):
            name = attachment.get("file_name") or "file"
            pieces.append(f"[attachment {name}]\n{attachment['extracted_content']}")
    text = "\n\n".join(p for p in pieces if p.strip())
    if text:
        conversation.user(when, text)


def _assistant(conversation: Conversation, when: str, blocks: list[Any], file: Path, where: str) -> None:
    text: list[str] = []
    reasoning: list[str] = []

    def flush(calls: list[tuple[str, str, str]] | None = None) -> None:
        content = "\n\n".join(t for t in text if t.strip()) or None
        if content or calls or reasoning:
            conversation.assistant(when, content, calls, "\n\n".join(reasoning) or None)
        text.clear()
        reasoning.clear()

    for number, block in enumerate(blocks, start=1):
        if not isinstance(block, dict):
            raise Malformed(file, where, f"has content block {number} that is not an object")
        kind = block.get("type")
        if kind == "text":
            text.append(str(block.get("text") or ""))
        elif kind == "thinking":
            reasoning.append(str(block.get("thinking") or ""))
        elif isinstance(kind, str) and kind.endswith("tool_use"):  # tool_use, server_tool_use, mcp_tool_use
            ident = str(block.get("id") or f"{where} block {number}")
            arguments = json.dumps(block.get("input", {}), ensure_ascii=False)
            flush([(ident, str(block.get("name") or "tool"), arguments)])
        elif isinstance(kind, str) and kind.endswith("tool_result"):  # web_search_tool_result too
            flush()
            _result(conversation, when, block)
    flush()


def _result(conversation: Conversation, when: str, block: dict[str, Any]) -> None:
    """A ``*tool_result`` block as an untrusted ``tool_result`` record."""
    body = block.get("content")
    if isinstance(body, list):
        output = "\n".join(
            str(b.get("text")) if isinstance(b, dict) and "text" in b else text_of(b) for b in body
        )
    else:
        output = text_of(body) if body is not None else ""
    ident = str(block.get("tool_use_id") or "")
    conversation.tool_result(when, str(block.get("name") or "tool"), ident, output)
