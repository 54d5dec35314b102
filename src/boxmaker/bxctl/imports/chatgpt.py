"""A ChatGPT data export's ``conversations.json`` (issue 17).

PATH is the file, or the unzipped export's folder holding it. The file is a list of conversations, each
``{"id" or "conversation_id", "title", "create_time", "current_node", "mapping": {node id: {"message",
"parent", "children"}}}``. Regenerations and edits are sibling branches of the tree: only the active one
is imported, found by walking ``parent`` from ``current_node`` to the root.

Each message (``author.role``, ``create_time`` in epoch seconds or null, ``content.content_type`` and
``parts``, ``recipient``):

- ``user``: the owner's turn (text parts joined; an image or file part is ``[image]``/``[file]``);
- ``assistant`` to ``all``: a reply; to anything else (``python``, ``browser``, ``web.run``, a plugin):
  a tool call of that name; ``thoughts`` and reasoning recaps are kept as reasoning (never indexed);
- ``tool``: a tool's or web page's output: an untrusted ``tool_result`` (so what follows is tainted);
- ``system`` and hidden messages are left out, except a hidden ``tool`` message (its output still
  reached the model, so it is kept as an untrusted result and what follows stays tainted); the custom
  instructions (``user_editable_context``) are shown to the owner as a suggestion, never stored.

A message without a time takes the one before it (or the conversation's).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from boxmaker.bxctl.imports.parsed import (
    Conversation,
    Malformed,
    Parsed,
    Suggestion,
    from_epoch,
    load_json,
    text_of,
)


def parse(path: Path) -> Parsed:
    """Read conversations.json (module docstring).

    Raises:
        Malformed: not a list of conversations, or a conversation that cannot be read (naming it).
    """
    file = path / "conversations.json" if path.is_dir() else path
    value = load_json(file)
    if not isinstance(value, list):
        raise Malformed(file, "the top level", "is not a list of conversations")
    parsed = Parsed(file=file)
    for number, item in enumerate(value, start=1):
        conversation = _conversation(file, number, item, parsed)
        if conversation.records:
            parsed.conversations.append(conversation)
    return parsed


def _conversation(file: Path, number: int, item: Any, parsed: Parsed) -> Conversation:
    place = f"conversation {number}"
    if not isinstance(item, dict):
        raise Malformed(file, place, "is not an object")
    ident = item.get("conversation_id") or item.get("id")
    mapping = item.get("mapping")
    if not isinstance(ident, str) or not ident:
        raise Malformed(file, place, "has no id")
    place = f"conversation {number} ({ident})"
    if not isinstance(mapping, dict):
        raise Malformed(file, place, "has no mapping")
    conversation = Conversation(ident, str(item.get("title") or ""), file=file)
    last = from_epoch(item.get("create_time")) or from_epoch(item.get("update_time"))
    for node_id, node in _branch(file, place, item.get("current_node"), mapping):
        message = node.get("message")
        if message is None:
            continue
        where = f"{place} node {node_id}"
        if not isinstance(message, dict):
            raise Malformed(file, where, "has a message that is not an object")
        author = message.get("author")
        role = author.get("role") if isinstance(author, dict) else None
        content = message.get("content")
        if not isinstance(role, str) or not isinstance(content, dict):
            raise Malformed(file, where, "has a message without author.role or content")
        when = from_epoch(message.get("create_time")) or last
        if when is None:
            raise Malformed(file, where, "has no time, nor has its conversation")
        last = when
        _message(conversation, message, node_id, when, parsed=parsed, where=where)
    return conversation


def _message(
    conversation: Conversation,
    message: dict[str, Any],
    node_id: str,
    when: str,
    *,
    parsed: Parsed,
    where: str,
) -> None:
    """One message of the active branch as records (module docstring); a tool result answers the last
    tool call before it (`Conversation.open_call`)."""
    author = message["author"]
    content = message["content"]
    role = author["role"]
    kind = content.get("content_type")
    metadata = message.get("metadata")
    hidden = isinstance(metadata, dict) and bool(metadata.get("is_visually_hidden_from_conversation"))
    if kind == "user_editable_context":
        _instructions(content, where, parsed)
        return
    if role == "system" or (hidden and role != "tool"):
        return  # a tool's output, hidden or not, is kept: what follows it read it (taint fails closed)
    text = _text(content)
    if role == "user":
        if text.strip():
            conversation.user(when, text)
    elif role == "assistant":
        recipient = message.get("recipient") or "all"
        if kind in ("thoughts", "reasoning_recap"):
            conversation.assistant(when, None, reasoning=text)
        elif recipient != "all":
            conversation.open_call = f"call-{node_id}"
            arguments = json.dumps({"input": text}, ensure_ascii=False)
            conversation.assistant(when, None, [(conversation.open_call, str(recipient), arguments)])
        elif text.strip():
            conversation.assistant(when, text)
    elif role == "tool":
        ident = conversation.open_call or f"call-{node_id}"
        conversation.tool_result(when, str(author.get("name") or "tool"), ident, text)
        conversation.open_call = ""
    else:
        raise Malformed(parsed.file, where, f"has author.role {role!r}")


def _branch(
    file: Path, place: str, current: Any, mapping: dict[str, Any]
) -> list[tuple[str, dict[str, Any]]]:
    """The active branch, root first: `current` and its parents."""
    if current is None and not mapping:
        return []
    if not isinstance(current, str) or current not in mapping:
        raise Malformed(file, place, "has a current_node that is not in its mapping")
    chain: list[tuple[str, dict[str, Any]]] = []
    seen: set[str] = set()
    node_id: Any = current
    while node_id is not None:
        if not isinstance(node_id, str):
            raise Malformed(file, place, f"names a parent {text_of(node_id)} that is not a node id")
        if node_id in seen:
            raise Malformed(file, place, f"has a cycle of parents at node {node_id}")
        seen.add(node_id)
        node = mapping.get(node_id)
        if not isinstance(node, dict):
            raise Malformed(file, place, f"names a parent node {node_id} that is not in its mapping")
        chain.append((str(node_id), node))
        node_id = node.get("parent")
    return chain[::-1]


def _text(content: dict[str, Any]) -> str:
    """A message's text: its parts (strings; an image or a file as a short marker), or its ``text``."""
    parts = content.get("parts")
    if isinstance(parts, list):
        pieces = []
        for part in parts:
            if isinstance(part, str):
                pieces.append(part)
            elif isinstance(part, dict) and isinstance(part.get("text"), str):
                pieces.append(part["text"])
            elif isinstance(part, dict) and "asset_pointer" in part:
                pieces.append("[image]")
            elif part is not None:
                pieces.append(text_of(part))
        return "\n".join(p for p in pieces if p)
    for key in ("text", "result"):
        if isinstance(content.get(key), str):
            return str(content[key])
    return ""


def _instructions(content: dict[str, Any], where: str, parsed: Parsed) -> None:
    """The custom instructions: shown once to the owner as a suggestion."""
    shown = {s.text for s in parsed.suggestions}
    for key, target in (("user_profile", "user.md"), ("user_instructions", "soul.md or conventions.md")):
        text = content.get(key)
        if isinstance(text, str) and text.strip() and text.strip() not in shown:
            parsed.suggestions.append(
                Suggestion(f"custom instructions ({key}, {where})", text.strip(), target)
            )
