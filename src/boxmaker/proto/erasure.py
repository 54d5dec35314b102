"""Authorised erasure, the parts every role shares (seed 003 section 12.3, checklist 21; DESIGN 8).

Erasure is the one destructive exception to append-only: each role rewrites its own files so that
the erased texts are gone, and memoryd records a content-free tombstone. The roles share:

- the forms: erasure ids ``memerase-YYYY-MM-DD-NNN``, the owner's authority reference (1 to 80
  characters of ``[A-Za-z0-9._:/-]``, a ticket id or similar: it cannot quote content), the holder
  results ``completed`` / ``partially-completed`` / ``unevaluated`` and the limitation codes;
- `Scrubber`: replaces every occurrence of an erased text by ``[erased memerase-…]`` inside the string
  values of JSON lines (re-encoded the way the file was written), in text, and in raw bytes (lines
  that are not JSON, torn tails), matching each text raw and in its JSON-escaped forms;
- `rewrite`: an atomic rewrite that keeps the file's mode.

A text shorter than `MIN_SUBSTRING` characters is replaced only where a whole string value (or a
whole entry) equals it: replacing "yes" inside every sentence of the home would destroy unrelated
records. Such texts are counted (`Scrubber.short`) so a receipt can say so.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from boxmaker.proto import fsio
from boxmaker.proto.fsio import complete_lines

ERASURE_ID_PATTERN = r"^memerase-([0-9]{4}-[0-9]{2}-[0-9]{2})-([0-9]{3,})\Z"
AUTHORITY_PATTERN = r"^[A-Za-z0-9._:/-]{1,80}\Z"
_ERASURE_ID = re.compile(ERASURE_ID_PATTERN)
_AUTHORITY = re.compile(AUTHORITY_PATTERN)

RECORD_TYPE = "erasure-tombstone-v1"
COMPLETED = "completed"
PARTIAL = "partially-completed"
UNEVALUATED = "unevaluated"
RESULTS = (COMPLETED, PARTIAL, UNEVALUATED)

#: Texts shorter than this (in characters) are matched only as whole values, never inside others.
MIN_SUBSTRING = 8

#: Limitation references (content-free codes; docs/runbook.md `erasure` says what each means).
LIMITATIONS: dict[str, str] = {
    "live-session-context": "the live session's context still holds it until it ends",
    "role-down": "the role did not answer, so nothing of it was evaluated",
    "outside-home": "the file is outside the home; bxctl cannot vouch for copies elsewhere",
    "no-slot-erase": "the model server does not erase its slots' prompt caches on request",
    "slot-busy": "a slot was serving a live turn and was not erased",
    "model-unreachable": "the model server did not answer",
    "short-text": "a text shorter than 8 characters is removed only where a whole value equals it",
    "remains": "a byte search after the rewrite still found an erased text",
    "write-failed": "a file could not be rewritten",
}


#: memoryd's holders (seed 12.3's scope analysis): listed by memoryd even when they hold nothing, and by
#: bxctl when memoryd does not answer.
MEMORYD_HOLDERS = (
    "memory/items.jsonl",
    "memory/notes.md",
    "memory/memory.md",
    "memory/user.md",
    "memory/archive/",
    "memory/edits/",
    "memory/recalls/",
    "memory/pending.jsonl",
    "memory/controls.jsonl",
    "memory/projections",
    "index/memory.sqlite3",
)


def is_erasure_id(value: str) -> bool:
    """True for ``memerase-YYYY-MM-DD-NNN``."""
    return _ERASURE_ID.match(value) is not None


def is_authority(value: str) -> bool:
    """True for an authority reference: 1 to 80 characters of ``A-Z a-z 0-9 . _ : / -``."""
    return _AUTHORITY.match(value) is not None


def marker(erasure_id: str) -> str:
    """What an erased text becomes: ``[erased memerase-…]`` (``[erased]`` without an id)."""
    return f"[erased {erasure_id}]" if erasure_id else "[erased]"


def source_erased(erasure_id: str) -> str:
    """The content-free reference an anchor into erased content becomes (seed 12.3 `source-erased`)."""
    return f"source-erased:{erasure_id}" if erasure_id else "source-erased"


def holder(
    ref: str, result: str, limitation: str | None = None, replacements: Iterable[str] = ()
) -> dict[str, Any]:
    """One holder of a receipt, in the tombstone's shape (`limitation` a `LIMITATIONS` key or None)."""
    return {
        "holder_ref": ref,
        "result": result,
        "limitation_ref": limitation,
        "sanitized_replacement_refs": sorted(set(replacements)),
    }


def variants(text: str) -> list[str]:
    """The forms `text` can take inside a file: raw, and JSON-escaped (ASCII and UTF-8 escaping),
    without duplicates."""
    forms = [text, json.dumps(text, ensure_ascii=True)[1:-1], json.dumps(text, ensure_ascii=False)[1:-1]]
    return list(dict.fromkeys(f for f in forms if f))


@dataclass
class Scrubber:
    """Replaces erased texts (and anchors into erased sessions) in values, text, lines and bytes.

    Args:
        texts: the erased texts (blank ones are ignored).
        erasure_id: names the marker (``[erased memerase-…]``).
        anchors: prefixes of references into erased content (``sessions/<id>/``, ``sessions/<id>#``);
            a string value that starts with one becomes ``source-erased:memerase-…``.
    """

    texts: Iterable[str]
    erasure_id: str = ""
    anchors: tuple[str, ...] = ()
    count: int = 0
    whole: set[str] = field(default_factory=set, init=False)
    long: list[str] = field(default_factory=list, init=False)
    short: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        wanted = {t for t in (t.strip() for t in self.texts) if t}
        self.whole = wanted
        self.short = sum(1 for t in wanted if len(t) < MIN_SUBSTRING)
        forms = {v for t in wanted if len(t) >= MIN_SUBSTRING for v in variants(t)}
        self.long = sorted(forms, key=lambda v: (-len(v), v))
        self.anchors = tuple(a for a in self.anchors if a)
        self.mark = marker(self.erasure_id)
        self.mark_bytes = self.mark.encode("ascii")
        self.anchor_ref = source_erased(self.erasure_id)

    @property
    def empty(self) -> bool:
        """True when there is nothing to replace."""
        return not self.whole and not self.anchors

    def text(self, value: str) -> str:
        """`value` with every erased text replaced by the marker (a whole-value match included)."""
        if value.strip() in self.whole and value.strip():
            self.count += 1
            return self.mark
        for form in self.long:
            if form in value:
                self.count += value.count(form)
                value = value.replace(form, self.mark)
        return value

    def string(self, value: str) -> str:
        """A JSON string value: an anchor into erased content becomes ``source-erased:…``; else `text`."""
        for prefix in self.anchors:
            if value.startswith(prefix):
                self.count += 1
                return self.anchor_ref
        return self.text(value)

    def value(self, value: Any) -> Any:
        """A JSON value with every string in it scrubbed (keys kept)."""
        if isinstance(value, str):
            return self.string(value)
        if isinstance(value, list):
            return [self.value(v) for v in value]
        if isinstance(value, dict):
            return {k: self.value(v) for k, v in value.items()}
        return value

    def raw(self, data: bytes) -> bytes:
        """Bytes with every UTF-8 form of every long erased text replaced (lines that are not JSON)."""
        for form in self.long:
            encoded = form.encode("utf-8")
            if encoded in data:
                self.count += data.count(encoded)
                data = data.replace(encoded, self.mark_bytes)
        return data

    def jsonl(
        self, data: bytes, *, ascii_only: bool = True, line: Callable[[Any], bool] | None = None
    ) -> bytes:
        """A JSON-lines file's bytes with each complete line's values scrubbed and re-encoded compactly
        (``ensure_ascii`` when `ascii_only`); a line whose values do not change keeps its bytes; a line
        that is not JSON, and a torn tail, are scrubbed as bytes. `line`, when given, is called with
        each parsed value first, may change it in place for the rules of one file, and returns True
        when it did."""
        lines, tail = complete_lines(data)
        out: list[bytes] = []
        for raw in lines:
            try:
                parsed = json.loads(raw)
            except ValueError:
                out.append(self.raw(raw))
                continue
            before = self.count
            changed = line(parsed) if line is not None else False
            scrubbed = self.value(parsed)
            if self.count == before and not changed:
                out.append(raw)
            else:
                encoded = json.dumps(scrubbed, ensure_ascii=ascii_only, separators=(",", ":"))
                out.append(encoded.encode("ascii" if ascii_only else "utf-8"))
        joined = b"".join(x + b"\n" for x in out)
        return joined + self.raw(tail)

    def remains(self, data: bytes) -> bool:
        """True when `data` still holds a long erased text in any of its forms."""
        return any(form.encode("utf-8") in data for form in self.long)


def rewrite(path: Path, data: bytes) -> None:
    """Replace `path` with `data` atomically (`fsio.atomic_write`), keeping its mode.

    Raises:
        OSError: when it cannot be written.
    """
    mode = os.stat(path).st_mode & 0o777
    fsio.atomic_write(path, data)
    if mode != fsio.FILE_MODE:
        os.chmod(path, mode)


def scrub_file(path: Path, scrubber: Scrubber, *, ascii_only: bool = True) -> int:
    """Scrub one file in place by its kind (``.jsonl`` line by line, anything else as bytes); returns
    the replacements made (the file is rewritten only when there were some).

    Raises:
        OSError: when it cannot be read or written.
    """
    data = path.read_bytes()
    before = scrubber.count
    jsonl = path.name.endswith(".jsonl")
    new = scrubber.jsonl(data, ascii_only=ascii_only) if jsonl else scrubber.raw(data)
    if new != data:
        rewrite(path, new)
    return scrubber.count - before
