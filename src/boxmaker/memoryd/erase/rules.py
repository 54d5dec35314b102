"""How an erasure rewrites each kind of file under memory/ (seed 003 section 12.3; `run`'s docstring
gives the rules per file): the holder each file belongs to, the files walked, and `Rules.scrub`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from boxmaker.memoryd.erase.scope import Scope
from boxmaker.memoryd.files import chain
from boxmaker.memoryd.files.entries import BY_NAME, file_content, normalise_newlines, parse_entries
from boxmaker.memoryd.files.journal import encode_line
from boxmaker.memoryd.files.mdtext import md_text
from boxmaker.memoryd.files.names import BUNDLE_KEY, ERASURES_FILE, FEEDBACK_FILE, ITEMS_FILE, PROPOSALS_FILE
from boxmaker.memoryd.files.notes import is_header
from boxmaker.memoryd.files.notes import parse as parse_notes
from boxmaker.memoryd.items.store import item_id_of
from boxmaker.proto import erasure
from boxmaker.proto.erasure import Scrubber
from boxmaker.proto.fsio import complete_lines
from boxmaker.proto.startcheck import json_object

#: Files under memory/ that are never scrubbed: the lock, the bundle key, the content-free tombstones.
NOT_SCRUBBED = frozenset({".lock", BUNDLE_KEY, ERASURES_FILE})


FEEDBACK_TEXTS = ("outcome", "action_or_decision")


PROPOSALS_TEXTS = ("proposed_change", "expected_benefit", "risk")


#: The holders memoryd always lists (seed 12.3's scope analysis), even when they hold nothing.
FIXED_HOLDERS = erasure.MEMORYD_HOLDERS


INDEX_HOLDER = "index/memory.sqlite3"

#: The import archives (issue 17): deleted for an erased import session, scrubbed otherwise.
IMPORTS_HOLDER = "imports/"


def holder_of(rel: str) -> str:
    """The holder a file under memory/ belongs to (`rel` relative to memory/)."""
    top = rel.split("/", 1)[0]
    if rel == "index.md" or top == "topics":
        return "memory/projections"
    if top in ("archive", "edits", "recalls") and "/" in rel:
        return f"memory/{top}/"
    return f"memory/{rel}"


def memory_files(memory_dir: Path) -> list[Path]:
    """Every regular file under memory/ except the lock and the tombstones, in path order."""
    if not memory_dir.is_dir():
        return []
    return sorted(
        p
        for p in memory_dir.rglob("*")
        if p.is_file() and not p.is_symlink() and str(p.relative_to(memory_dir)) not in NOT_SCRUBBED
    )


@dataclass
class Rules:
    """The per-file rules of one erasure."""

    scrubber: Scrubber
    scope: Scope
    items: frozenset[str]
    note_keys: frozenset[str] = frozenset()

    def scrub(self, rel: str, data: bytes) -> bytes:
        """`data` of the file `rel` (relative to memory/) with the erasure applied."""
        name = rel.rsplit("/", 1)[-1]
        if rel == "notes.md":
            return self._notes(data)
        if rel in BY_NAME:
            return self._identity(data)
        if rel == ITEMS_FILE:
            return self.scrubber.jsonl(data, line=self._item_event)
        if rel.startswith("edits/") and name.endswith(".jsonl"):
            return self._journal(data)
        if rel.startswith("recalls/") and name.endswith(".jsonl"):
            return self.scrubber.jsonl(data, line=self._recall_line)
        if rel == FEEDBACK_FILE:
            return self.scrubber.jsonl(data, line=self._feedback_event)
        if rel == PROPOSALS_FILE:
            return self.scrubber.jsonl(data, line=self._proposal_event)
        if name.endswith(".jsonl"):
            return self.scrubber.jsonl(data)
        if name.endswith(".md"):
            return self.scrubber.raw(self._markdown(data))
        return self.scrubber.raw(data)

    def _markdown(self, data: bytes) -> bytes:
        """Generated Markdown (archive, index, topics) shows texts escaped (`mdtext.md_text`): their
        escaped forms become the escaped marker, as a replay renders it."""
        mark = md_text(self.scrubber.mark).encode("utf-8")
        for form in md_forms(self.scrubber):
            if form in data:
                self.scrubber.count += data.count(form)
                data = data.replace(form, mark)
        return data

    def _item_event(self, event: Any) -> bool:
        if (
            isinstance(event, dict)
            and event.get("event") == "capture"
            and event.get("id") in self.items
            and event.get("text") != self.scrubber.mark
        ):
            # the marker, as the archive's rendering of it now reads, so a replay renders the same bytes
            event["text"] = self.scrubber.mark
            self.scrubber.count += 1
            return True
        return False

    def _journal(self, data: bytes) -> bytes:
        """A journal file scrubbed line by line: a line the erasure changes loses its salt and is
        marked erased by this erasure (`chain.erase`); its commitment and chain value are kept, never
        scrubbed, so the chain and every head recorded before still verify."""
        lines, tail = complete_lines(data)
        out: list[bytes] = []
        for raw in lines:
            entry = json_object(raw)
            if entry is None:
                out.append(self.scrubber.raw(raw))
                continue
            kept = {k: entry.pop(k) for k in chain.FIELDS if k in entry}
            before = self.scrubber.count
            changed = self._journal_line(entry)
            scrubbed = self.scrubber.value(entry)
            if self.scrubber.count == before and not changed:
                out.append(raw)
                continue
            out.append(encode_line(chain.erase({**scrubbed, **kept}, self.scrubber.erasure_id)))
        return b"".join(x + b"\n" for x in out) + self.scrubber.raw(tail)

    def _journal_line(self, entry: Any) -> bool:
        changed = False
        if not isinstance(entry, dict):
            return False
        for key, rule in (
            ("events", self._item_event),
            ("feedback", self._feedback_event),
            ("proposals", self._proposal_event),
        ):
            if isinstance(entry.get(key), list):
                for event in entry[key]:
                    changed = rule(event) or changed
        return changed

    def _mark_fields(self, event: dict[str, Any], keys: tuple[str, ...]) -> bool:
        changed = False
        for key in keys:
            if key in event and event[key] != self.scrubber.mark:
                event[key] = self.scrubber.mark
                self.scrubber.count += 1
                changed = True
        return changed

    def _feedback_event(self, event: Any) -> bool:
        """A feedback event naming an erased item keeps its ids (lineage) but loses its free text,
        which may paraphrase the item: ``outcome`` and ``action_or_decision`` become the marker."""
        if not isinstance(event, dict):
            return False
        named = event.get("memory_item_ids")
        if not isinstance(named, list) or not any(i in self.items for i in named):
            return False
        return self._mark_fields(event, FEEDBACK_TEXTS)

    def _proposal_event(self, event: Any) -> bool:
        """A proposal citing an erased item (or an archive anchor of one) keeps its ids and refs but
        loses its free text: ``proposed_change``, ``expected_benefit`` and ``risk`` become the marker."""
        if not isinstance(event, dict) or event.get("event") != "proposal":
            return False
        refs = event.get("supporting_refs")
        if not isinstance(refs, list):
            return False
        cited = {str(r).rsplit("#", 1)[-1] for r in refs}
        if not cited & self.items:
            return False
        return self._mark_fields(event, PROPOSALS_TEXTS)

    def _recall_line(self, line: Any) -> bool:
        """A recall made by an erased session, or that found erased content, loses its query: the
        query quotes what it looked for (the hits' keys become source-erased references)."""
        if not isinstance(line, dict) or not line.get("query") or line["query"] == self.scrubber.mark:
            return False
        hits = line.get("hits")
        hits = hits if isinstance(hits, list) else []
        found_erased = any(
            isinstance(h, str) and (h in self.note_keys or h.startswith(self.scrubber.anchors)) for h in hits
        )
        if line.get("session") in self.scope.sessions or found_erased:
            line["query"] = self.scrubber.mark
            self.scrubber.count += 1
            return True
        return False

    def _notes(self, data: bytes) -> bytes:
        text = data.decode("utf-8", errors="surrogateescape")
        lines = text.split("\n")
        out: list[str] = []
        head: str | None = None
        body: list[str] = []

        def flush() -> None:
            if head is not None:
                out.append(head)
            if head is None and not body:
                return
            out.extend(self._note_body(head, body))

        for line in lines:
            if is_header(line):
                flush()
                head, body = line, []
            else:
                body.append(line)
        flush()
        return "\n".join(out).encode("utf-8", errors="surrogateescape")

    def _note_body(self, head: str | None, body: list[str]) -> list[str]:
        joined = "\n".join(body)
        core = joined.strip()
        whole = False
        if head is not None and core:
            note = parse_notes(f"{head}\n{core}\n")[0]
            whole = note.session in self.scope.sessions or item_id_of(note) in self.items
        if not core:
            return body
        if whole and core != self.scrubber.mark:
            self.scrubber.count += 1
            scrubbed = self.scrubber.mark
        else:  # the body's text only: the blank lines around it stay, as the journal's replay writes them
            scrubbed = self.scrubber.text(core)
        start = joined.index(core)
        return (joined[:start] + scrubbed + joined[start + len(core) :]).split("\n")

    def _identity(self, data: bytes) -> bytes:
        raw = data.decode("utf-8", errors="surrogateescape")
        entries = parse_entries(normalise_newlines(raw))
        kept = []
        for entry in entries:
            if entry in self.scrubber.whole:
                self.scrubber.count += 1
                continue
            kept.append(self.scrubber.text(entry))
        if kept == entries:
            return data
        return file_content(kept).encode("utf-8", errors="surrogateescape")


def md_forms(scrubber: Scrubber) -> list[bytes]:
    """The long erased texts as generated Markdown shows them (`mdtext.md_text`), longest first."""
    texts = [t for t in scrubber.whole if len(t) >= erasure.MIN_SUBSTRING]
    return sorted({md_text(t).encode("utf-8") for t in texts}, key=lambda f: (-len(f), f))


def short_remains(scrubber: Scrubber, data: bytes) -> bool:
    """True when a text too short to be replaced inside other text still occurs in `data`."""
    shorts = [t for t in scrubber.whole if len(t) < erasure.MIN_SUBSTRING]
    return any(form.encode("utf-8") in data for t in shorts for form in erasure.variants(t))
