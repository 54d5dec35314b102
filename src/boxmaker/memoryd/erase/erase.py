"""Authorised erasure in memoryd's files (seed 003 section 12.3, checklist 21; DESIGN 8).

The owner runs ``bxctl memory erase --item … --session … --authority REF``; bxctl asks memoryd for a
plan (`plan`, admin command ``erase-plan``), asks loopd and brokerd for theirs, prints it, and with
``--yes`` asks loopd and brokerd to erase in their files, then memoryd (`execute`, admin command
``erase``), which erases in its own and writes the tombstone.

What is erased. For an item: its text. For a session: every item captured in it, every note it wrote,
every identity entry and staged write it made (from the journal and pending.jsonl), and the texts
loopd reports for it (the owner's and the model's messages, passed in as `texts`). Those texts are
replaced in EVERY file under ``memory/``, whatever wrote it (files that later work adds are covered
without being known here), by kind:

- ``notes.md``: an erased note keeps its header (positions and keys stay stable) and its body
  becomes ``[erased memerase-…]``; other notes have the texts replaced;
- ``memory.md``, ``user.md``: an entry equal to an erased text is removed; others have the texts
  replaced;
- ``items.jsonl`` and the journal's ``events``: the capture event of an erased item keeps its id and
  its text becomes the marker ``[erased memerase-…]``; the fold marks it erased (an ``erase`` event is
  appended) and shows no text;
- ``recalls/*.jsonl``: a recall made by an erased session, or one that found an erased note or a
  record of an erased session, has its query replaced (it quotes what it looked for);
- ``feedback.jsonl`` and the journal's ``feedback``: an event naming an erased item keeps its ids but its
  ``outcome`` and ``action_or_decision`` become the marker (they may paraphrase it);
- ``proposals.jsonl`` and the journal's ``proposals``: a proposal citing an erased item keeps its id and
  refs but its ``proposed_change``, ``expected_benefit`` and ``risk`` become the marker;
- any ``*.jsonl``: each line parsed, every string value scrubbed, re-encoded as ASCII JSON;
- anything else (``archive/*.md``, ``index.md``, ``topics/*.md``, ``soul.md``, torn tails, …): the
  texts replaced as bytes, raw and JSON-escaped.

Anchors into an erased session (``sessions/<id>/…``, ``sessions/<id>#…``, recall keys
``session/<id>/…``) become ``source-erased:memerase-…`` (seed 12.3's `source-erased`); the items and
archive sections that carried them are the tombstone's ``sanitized_replacement_refs``.

Then the index is rebuilt from the scrubbed files into a new file renamed over the old one (its -wal
and -shm removed), vacuumed when it has free pages, checkpointed and switched out of WAL and back so
no frame of the old pages remains; leftovers (``*.damaged-*``, ``*.new``) are removed. Every file is
byte-searched afterwards: a holder where a text is still found is ``partially-completed``.

Exports the journal records (action ``export``, its ``file``): one inside the home is scrubbed and
byte-checked; one outside it is ``unevaluated`` (``outside-home``), never claimed.

What is refused, changing nothing (seed 12.3: a holder must not claim success it cannot vouch for):
an item an earlier erasure erased, and a session an earlier erasure erased whose folder is gone and
of which no text is known any more (``refused:erased``, `erasure_sentences.erase_already_erased`: the texts
are not kept, so a new run could not search for copies; the sentence names that tombstone's holders
that were not completed); and, when bxctl passes ``held`` (the sessions loopd and brokerd hold), a
session nothing holds (``refused:not-found``, `erasure_sentences.erase_nothing_held`; no tombstone).

The tombstone (``erasures.jsonl``, seed 12.3's shape) holds only opaque ids, the owner's authority
reference (validated: it cannot be a sentence), times and each holder's result: no text, no hash of
it. Its journal line (action ``erase``) carries only the tombstone and the content-free ``erase``
item event.
"""

from __future__ import annotations

import datetime as dt
import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from boxmaker.memoryd.files.entries import BY_NAME, file_content, normalise_newlines, parse_entries
from boxmaker.memoryd.files.journal import Append, Change, encode_line, read_jsonl
from boxmaker.memoryd.files.mdtext import md_text
from boxmaker.memoryd.files.names import ERASURES_FILE, FEEDBACK_FILE, ITEMS_FILE, PROPOSALS_FILE
from boxmaker.memoryd.files.notes import is_header
from boxmaker.memoryd.files.notes import parse as parse_notes
from boxmaker.memoryd.items.store import ItemStore, is_item_id, item_id_of
from boxmaker.memoryd.sentences import Refusal, identity
from boxmaker.memoryd.sentences import erasure as erasure_sentences
from boxmaker.proto import erasure
from boxmaker.proto.erasure import COMPLETED, PARTIAL, RESULTS, UNEVALUATED, Scrubber
from boxmaker.proto.ids import OWNER_SESSION, is_session_id

if TYPE_CHECKING:
    from boxmaker.memoryd.service import Memoryd

log = logging.getLogger("boxmaker.memoryd.erase")

#: Files under memory/ that are never scrubbed: the lock, and the content-free tombstones.
NOT_SCRUBBED = frozenset({".lock", ERASURES_FILE})
FEEDBACK_TEXTS = ("outcome", "action_or_decision")
PROPOSALS_TEXTS = ("proposed_change", "expected_benefit", "risk")
#: A holder reference: a path or id, never a sentence.
_HOLDER_REF = re.compile(r"^[A-Za-z0-9._:/#@-]{1,200}\Z")
_TIME = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z\Z")
#: The holders memoryd always lists (seed 12.3's scope analysis), even when they hold nothing.
FIXED_HOLDERS = erasure.MEMORYD_HOLDERS
INDEX_HOLDER = "index/memory.sqlite3"


@dataclass(frozen=True, slots=True)
class Scope:
    """What the owner named: item ids and session ids (validated)."""

    items: tuple[str, ...]
    sessions: tuple[str, ...]

    @property
    def anchors(self) -> tuple[str, ...]:
        """Prefixes of references into the erased sessions."""
        return tuple(
            prefix for s in self.sessions for prefix in (f"sessions/{s}/", f"sessions/{s}#", f"session/{s}/")
        )


@dataclass(slots=True)
class Covered:
    """What a scope covers in memoryd: the items it erases and the texts to remove."""

    items: list[str] = field(default_factory=list)
    texts: set[str] = field(default_factory=set)
    replacements: set[str] = field(default_factory=set)  # dependent records that get source-erased refs
    note_keys: set[str] = field(default_factory=set)  # recall keys of the notes erased whole


def parse_scope(args: dict[str, Any]) -> Scope | Refusal:
    """The scope from an admin request's args ``{"items": [...], "sessions": [...]}``."""
    items, sessions = args.get("items", []), args.get("sessions", [])
    if not isinstance(items, list) or not all(isinstance(i, str) and is_item_id(i) for i in items):
        return identity.arguments("items must be a list of item ids mem-YYYY-MM-DD-NNN")
    if not isinstance(sessions, list) or not all(
        isinstance(s, str) and is_session_id(s) and s != OWNER_SESSION for s in sessions
    ):
        return identity.arguments("sessions must be a list of session ids")
    if not items and not sessions:
        return erasure_sentences.ERASE_NO_SCOPE
    return Scope(tuple(dict.fromkeys(items)), tuple(dict.fromkeys(sessions)))


def _texts_arg(args: dict[str, Any]) -> list[str] | Refusal:
    texts = args.get("texts", [])
    if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
        return identity.arguments("texts must be a list of strings")
    return texts


# What a scope covers ---------------------------------------------------------------------------------


def covered(memory: Memoryd, scope: Scope) -> Covered | Refusal:
    """The items and texts `scope` covers in memoryd's files (see the module docstring)."""
    memory_dir = memory.config.layout.memory
    store = ItemStore(memory_dir)
    items = store.items()
    for wanted in scope.items:
        if wanted not in items:
            return erasure_sentences.erase_unknown_item(wanted)
        if items[wanted].erased:  # its text is gone: a new run could not search for its copies
            return _already_erased(memory_dir, "item", wanted)
    found = Covered()
    sessions = set(scope.sessions)
    chosen = [i for i in items.values() if i.id in scope.items or i.session in sessions]
    found.items = [i.id for i in chosen]
    found.texts.update(i.text for i in chosen if i.text)
    note_keys = {i.note for i in chosen if i.note}
    anchors = scope.anchors
    for item in items.values():
        refs = (item.captured_from, *item.corroborating_refs, item.inspired_by or "")
        if anchors and any(r.startswith(anchors) for r in refs if r):
            found.replacements.add(item.id)
        if item.id in found.items and item.archive_ref:
            found.replacements.add(item.archive_ref)
    try:
        notes = parse_notes(memory.store.read_notes())
    except Exception as exc:  # an unreadable notes.md: its texts cannot be known
        log.error("erasure: notes.md cannot be read: %s", exc)
        notes = []
    for note in notes:
        if note.session in sessions or item_id_of(note) in found.items or note.key in note_keys:
            found.texts.add(note.text)
            found.note_keys.add(note.key)
    for entry in memory.journal.entries_newest_first():
        if entry.get("session") not in sessions:
            continue
        before, after = entry.get("before"), entry.get("after")
        if isinstance(after, list):
            kept = before if isinstance(before, list) else []
            found.texts.update(str(t) for t in after if t not in kept)
        for note in entry.get("notes") or []:
            if isinstance(note, dict) and isinstance(note.get("text"), str):
                found.texts.add(note["text"])
    for event in read_jsonl(memory.store.pending_path, ("event",)):
        if event.get("session") in sessions and isinstance(event.get("arguments"), dict):
            _strings(event["arguments"], found.texts, skip={"action", "file"})
    found.texts = {t.strip() for t in found.texts if t.strip() and not _is_marker(t.strip())}
    for note in notes:  # a note whose whole body is an erased text is erased whole too
        if note.text.strip() in found.texts:
            found.note_keys.add(note.key)
    return found


def _already_erased(memory_dir: Path, what: str, ref: str) -> Refusal:
    """The refusal for a scope ref an earlier erasure erased, naming that erasure's open holders."""
    erased_by = [t for t in tombstones(memory_dir) if ref in (t.get("scope_refs") or [])]
    if not erased_by:
        return erasure_sentences.erase_already_erased(what, ref, "an earlier erasure", [])
    last = erased_by[-1]
    open_holders = [
        f"{h.get('holder_ref')} ({h.get('result')}"
        + (f", {h.get('limitation_ref')})" if h.get("limitation_ref") else ")")
        for h in last.get("holders") or []
        if isinstance(h, dict) and h.get("result") != COMPLETED
    ]
    return erasure_sentences.erase_already_erased(what, ref, str(last.get("erasure_id")), open_holders)


def _holds_session(memory: Memoryd, session: str) -> bool:
    """True when memoryd (or sessions/, which it indexes) holds anything of `session`: its folder, an
    item, a note, a journal line, a staged write or a recall line."""
    if (memory.config.layout.sessions / session).exists():
        return True
    memory_dir = memory.config.layout.memory
    if any(i.session == session for i in ItemStore(memory_dir).items().values()):
        return True
    try:
        if any(n.session == session for n in parse_notes(memory.store.read_notes())):
            return True
    except Exception:  # an unreadable notes.md: count it as holding (fail towards erasing)
        return True
    if any(e.get("session") == session for e in memory.journal.entries_newest_first()):
        return True
    if any(e.get("session") == session for e in read_jsonl(memory.store.pending_path, ("event",))):
        return True
    return any(
        r.get("session") == session
        for path in sorted((memory_dir / "recalls").glob("*.jsonl"))
        for r in read_jsonl(path, ("session",))
    )


def check_sessions(
    memory: Memoryd, scope: Scope, held: list[str] | None, extra: Iterable[str] = ()
) -> Refusal | None:
    """Refuse a scope session that an earlier erasure erased and whose texts are no longer known (its
    folder is gone, loopd passed no text of it in `extra`, memoryd holds none), and, when `held` (the
    sessions loopd and brokerd say they hold) is given, a session nothing holds at all (it never
    existed: no tombstone for it)."""
    passed = {t.strip() for t in extra if t.strip()}
    for session in scope.sessions:
        erased_before = any(
            session in (t.get("scope_refs") or []) for t in tombstones(memory.config.layout.memory)
        )
        if erased_before and not (memory.config.layout.sessions / session).exists():
            alone = covered(memory, Scope((), (session,)))
            # a text that holds a marker is an already scrubbed copy: searching for it finds nothing new
            found = alone.texts | passed if not isinstance(alone, Refusal) else {""}
            known = {t for t in found if "[erased" not in t}
            if not known:
                return _already_erased(memory.config.layout.memory, "session", session)
        if held is not None and session not in held and not _holds_session(memory, session):
            return erasure_sentences.erase_nothing_held(session)
    return None


def _held_arg(args: dict[str, Any]) -> list[str] | Refusal | None:
    held = args.get("held")
    if held is None:
        return None
    if not isinstance(held, list) or not all(isinstance(h, str) for h in held):
        return identity.arguments("held must be a list of session ids")
    return held


def _is_marker(text: str) -> bool:
    return text == "[erased]" or (text.startswith("[erased memerase-") and text.endswith("]"))


def _strings(value: Any, into: set[str], skip: Iterable[str] = ()) -> None:
    if isinstance(value, str):
        into.add(value)
    elif isinstance(value, list):
        for v in value:
            _strings(v, into)
    elif isinstance(value, dict):
        for k, v in value.items():
            if k not in skip:
                _strings(v, into)


# The files ---------------------------------------------------------------------------------------------


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
            return self.scrubber.jsonl(data, line=self._journal_line)
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
        if whole and core != self.scrubber.mark:
            self.scrubber.count += 1
            start = joined.index(core)
            return (joined[:start] + self.scrubber.mark + joined[start + len(core) :]).split("\n")
        return self.scrubber.text(joined).split("\n") if core else body

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


# Planning and executing ----------------------------------------------------------------------------------


def next_erasure_id(memory_dir: Path, day: dt.date, reserved: Iterable[str] = ()) -> str:
    """``memerase-YYYY-MM-DD-NNN``: the highest of `day` in erasures.jsonl (and `reserved`) plus one."""
    prefix = f"memerase-{day.isoformat()}-"
    taken = [str(t.get("erasure_id", "")) for t in read_jsonl(memory_dir / ERASURES_FILE, ("erasure_id",))]
    numbers = [
        int(t[len(prefix) :])
        for t in [*taken, *reserved]
        if t.startswith(prefix) and t[len(prefix) :].isascii() and t[len(prefix) :].isdigit()
    ]
    return f"{prefix}{max(numbers, default=0) + 1:03d}"


def tombstones(memory_dir: Path) -> list[dict[str, Any]]:
    """Every tombstone in erasures.jsonl, oldest first."""
    return read_jsonl(memory_dir / ERASURES_FILE, ("erasure_id", "record_type"))


def _exports(memory: Memoryd) -> list[tuple[str, Path | None]]:
    """(holder ref, file) of every export the journal records (action ``export``); the file is None
    when the line names none."""
    found = []
    for entry in memory.journal.entries_newest_first():
        if entry.get("action") != "export":
            continue
        named = entry.get("file")  # the file written (``where`` is only the word "export")
        path: Path | None = None
        if isinstance(named, str) and named:
            path = Path(named)
            if not path.is_absolute():
                path = memory.config.layout.memory / named
        found.append((f"export:{entry.get('id', '?')}", path))
    return found


def _inside(path: Path, folder: Path) -> bool:
    try:
        path.resolve().relative_to(folder.resolve())
    except ValueError:
        return False
    return True


def plan(memory: Memoryd, args: dict[str, Any]) -> dict[str, Any] | Refusal:
    """What an erasure of ``args`` (``items``, ``sessions``, ``texts`` from loopd) would do, changing
    nothing. With ``reserve`` true, the erasure id is held for this memoryd's life.

    Returns:
        ``{"erasure_id", "scope_refs", "items", "texts", "holders": [{"holder_ref", "holds", "result"
        (the result expected), "limitation_ref"}]}``. ``texts`` are for the other roles: bxctl never
        prints them.
    """
    scope = parse_scope(args)
    if isinstance(scope, Refusal):
        return scope
    extra = _texts_arg(args)
    if isinstance(extra, Refusal):
        return extra
    held = _held_arg(args)
    if isinstance(held, Refusal):
        return held
    found = covered(memory, scope)
    if isinstance(found, Refusal):
        return found
    refused = check_sessions(memory, scope, held, extra)
    if refused is not None:
        return refused
    texts = found.texts | {t.strip() for t in extra if t.strip()}
    memory_dir = memory.config.layout.memory
    erasure_id = next_erasure_id(memory_dir, memory.now().date(), memory.reserved_erasures)
    if args.get("reserve") is True:
        memory.reserved_erasures.add(erasure_id)
    rules = Rules(
        Scrubber(texts, erasure_id, scope.anchors), scope, frozenset(found.items), frozenset(found.note_keys)
    )
    holds: dict[str, int] = dict.fromkeys(FIXED_HOLDERS, 0)
    for path in memory_files(memory_dir):
        rel = str(path.relative_to(memory_dir))
        before = rules.scrubber.count
        try:
            rules.scrub(rel, path.read_bytes())
        except OSError:
            continue
        ref = holder_of(rel)
        holds[ref] = holds.get(ref, 0) + rules.scrubber.count - before
    holds[INDEX_HOLDER] = _index_holds(memory, rules.scrubber)
    holders: list[dict[str, Any]] = [
        {"holder_ref": ref, "holds": count, "result": COMPLETED, "limitation_ref": None}
        for ref, count in holds.items()
    ]
    for ref, exported in _exports(memory):
        outside = exported is None or not _inside(exported, memory.config.home)
        holders.append(
            {
                "holder_ref": ref,
                "holds": None,
                "result": UNEVALUATED if outside else COMPLETED,
                "limitation_ref": "outside-home" if outside else None,
            }
        )
    scope_refs = sorted(set(scope.items) | set(found.items)) + list(scope.sessions)
    return {
        "erasure_id": erasure_id,
        "scope_refs": scope_refs,
        "items": found.items,
        "texts": sorted(texts),
        "holders": holders,
        "short_texts": rules.scrubber.short,
    }


def _index_holds(memory: Memoryd, scrubber: Scrubber) -> int:
    """How many of the index's files hold an erased text as bytes (the file, -wal, leftovers)."""
    folder = memory.config.layout.index
    if not folder.is_dir():
        return 0
    count = 0
    for path in folder.iterdir():
        try:
            if path.is_file() and scrubber.remains(path.read_bytes()):
                count += 1
        except OSError:
            continue
    return count


def _holders_arg(args: dict[str, Any]) -> list[dict[str, Any]] | Refusal:
    """The other roles' holders as bxctl passes them, checked to be content-free."""
    value = args.get("holders", [])
    if not isinstance(value, list):
        return identity.arguments("holders must be a list")
    checked = []
    for item in value:
        if not isinstance(item, dict):
            return identity.arguments("each holder must be an object")
        ref, result = item.get("holder_ref"), item.get("result")
        limitation, refs = item.get("limitation_ref"), item.get("sanitized_replacement_refs", [])
        if not isinstance(ref, str) or not _HOLDER_REF.match(ref):
            return identity.arguments("a holder_ref must be a path or id of 1 to 200 characters")
        if result not in RESULTS:
            return identity.arguments(f"a holder's result is one of {', '.join(RESULTS)}")
        if limitation is not None and limitation not in erasure.LIMITATIONS:
            return identity.arguments("a holder's limitation_ref must be a known limitation code")
        if not isinstance(refs, list) or not all(isinstance(r, str) and _HOLDER_REF.match(r) for r in refs):
            return identity.arguments("sanitized_replacement_refs must be a list of ids")
        checked.append(erasure.holder(ref, str(result), limitation, refs))
    return checked


def execute(memory: Memoryd, args: dict[str, Any]) -> dict[str, Any] | Refusal:
    """Erase ``args``'s scope in memoryd's files, rebuild the index, and write the tombstone.

    Args (in ``args``): ``items``, ``sessions``, ``texts`` (loopd's texts of the sessions),
    ``authority`` (the owner's reference), ``erasure_id`` (from `plan` with ``reserve``),
    ``decided_at``, ``holders`` (the other roles' results, already run).

    Returns:
        The tombstone as written.
    """
    scope = parse_scope(args)
    if isinstance(scope, Refusal):
        return scope
    authority = args.get("authority")
    if not isinstance(authority, str) or not erasure.is_authority(authority):
        return erasure_sentences.ERASE_AUTHORITY
    extra = _texts_arg(args)
    if isinstance(extra, Refusal):
        return extra
    others = _holders_arg(args)
    if isinstance(others, Refusal):
        return others
    held = _held_arg(args)
    if isinstance(held, Refusal):
        return held
    erasure_id = args.get("erasure_id")
    memory_dir = memory.config.layout.memory
    if not isinstance(erasure_id, str) or erasure_id not in memory.reserved_erasures:
        return erasure_sentences.ERASE_ID_TAKEN
    if any(t.get("erasure_id") == erasure_id for t in tombstones(memory_dir)):
        return erasure_sentences.ERASE_ID_TAKEN
    decided = args.get("decided_at")
    now = _stamp(memory.now())
    decided_at = decided if isinstance(decided, str) and _TIME.match(decided) else now
    with memory.writer.lock:
        found = covered(memory, scope)
        if isinstance(found, Refusal):
            return found
        refused = check_sessions(memory, scope, held, extra)
        if refused is not None:
            return refused
        texts = found.texts | {t.strip() for t in extra if t.strip()}
        scrubber = Scrubber(texts, erasure_id, scope.anchors)
        rules = Rules(scrubber, scope, frozenset(found.items), frozenset(found.note_keys))
        results = _scrub_memory(memory_dir, rules)
        results[INDEX_HOLDER] = _rebuild_index(memory, scrubber)
        holders = [*others]
        for ref in dict.fromkeys([*FIXED_HOLDERS, *results]):
            result, limitation = results.get(ref, (COMPLETED, None))
            replacements = _replacements_of(ref, found.replacements)
            holders.append(erasure.holder(ref, result, limitation, replacements))
        holders.extend(_erase_exports(memory, scrubber))
        tombstone = {
            "erasure_id": erasure_id,
            "record_type": erasure.RECORD_TYPE,
            "scope_refs": sorted(set(scope.items) | set(found.items)) + list(scope.sessions),
            "authority_ref": authority,
            "decided_at": decided_at,
            "executed_at": _stamp(memory.now()),
            "holders": holders,
        }
        event = {"event": "erase", "time": now, "erasure": erasure_id, "ids": found.items}
        appends = [Append(ERASURES_FILE, encode_line(tombstone) + b"\n")]
        if found.items:
            appends.append(Append(ITEMS_FILE, encode_line(event) + b"\n"))
        entry: dict[str, Any] = {
            "session": OWNER_SESSION,
            "call": "",
            "untrusted": False,
            "action": "erase",
            "file": ERASURES_FILE,
            "where": ERASURES_FILE,
            "before": [],
            "after": [],
            "tombstone": tombstone,
            "events": [event] if found.items else [],
            # the identity files as the erasure left them (an entry equal to an erased text is
            # removed, not marked), so a replay of the journal reproduces them
            "identity": {
                name: list(memory.store.read_identity(spec).entries) for name, spec in BY_NAME.items()
            },
        }
        memory.journal.commit(Change(entry, appends))
        memory.reserved_erasures.discard(erasure_id)
    log.info("erasure %s: %d items, %d sessions", erasure_id, len(found.items), len(scope.sessions))
    return tombstone


def _replacements_of(ref: str, replacements: set[str]) -> list[str]:
    if ref == "memory/items.jsonl":
        return sorted(r for r in replacements if is_item_id(r))
    if ref == "memory/archive/":
        return sorted(r for r in replacements if r.startswith("archive/"))
    return []


def _scrub_memory(memory_dir: Path, rules: Rules) -> dict[str, tuple[str, str | None]]:
    """Scrub every file under memory/; returns each holder's (result, limitation)."""
    results: dict[str, tuple[str, str | None]] = {}
    scrubber = rules.scrubber
    for path in memory_files(memory_dir):
        rel = str(path.relative_to(memory_dir))
        ref = holder_of(rel)
        results.setdefault(ref, (COMPLETED, None))
        try:
            data = path.read_bytes()
            new = rules.scrub(rel, data)
            if new != data:
                erasure.rewrite(path, new)
        except OSError as exc:
            log.error("erasure: cannot rewrite %s: %s", path, exc)
            results[ref] = (PARTIAL, "write-failed")
            continue
        if scrubber.remains(new) or any(form in new for form in md_forms(scrubber)):
            results[ref] = (PARTIAL, "remains")
        elif _short_remains(scrubber, new) and results[ref][0] == COMPLETED:
            results[ref] = (PARTIAL, "short-text")
    return results


def md_forms(scrubber: Scrubber) -> list[bytes]:
    """The long erased texts as generated Markdown shows them (`mdtext.md_text`), longest first."""
    texts = [t for t in scrubber.whole if len(t) >= erasure.MIN_SUBSTRING]
    return sorted({md_text(t).encode("utf-8") for t in texts}, key=lambda f: (-len(f), f))


def _short_remains(scrubber: Scrubber, data: bytes) -> bool:
    """True when a text too short to be replaced inside other text still occurs in `data`."""
    shorts = [t for t in scrubber.whole if len(t) < erasure.MIN_SUBSTRING]
    return any(form.encode("utf-8") in data for t in shorts for form in erasure.variants(t))


def _rebuild_index(memory: Memoryd, scrubber: Scrubber) -> tuple[str, str | None]:
    """Rebuild the index from the scrubbed files and seal it; then byte-search its folder."""
    memory.index.rebuild()
    memory.index.seal()
    folder = memory.config.layout.index
    for path in folder.iterdir() if folder.is_dir() else []:
        try:
            if path.is_file() and scrubber.remains(path.read_bytes()):
                log.error("erasure: %s still holds an erased text after the rebuild", path)
                return PARTIAL, "remains"
        except OSError:
            continue
    return COMPLETED, None


def _erase_exports(memory: Memoryd, scrubber: Scrubber) -> list[dict[str, Any]]:
    holders = []
    for ref, path in _exports(memory):
        if path is None or not _inside(path, memory.config.home):
            holders.append(erasure.holder(ref, UNEVALUATED, "outside-home"))
            continue
        if not path.is_file():
            holders.append(erasure.holder(ref, COMPLETED))
            continue
        try:
            erasure.scrub_file(path, scrubber)
        except OSError as exc:
            log.error("erasure: cannot rewrite the export %s: %s", path, exc)
            holders.append(erasure.holder(ref, PARTIAL, "write-failed"))
            continue
        remains = scrubber.remains(path.read_bytes())
        holders.append(erasure.holder(ref, PARTIAL if remains else COMPLETED, "remains" if remains else None))
    return holders


def _stamp(moment: dt.datetime) -> str:
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def describe(tombstone: dict[str, Any]) -> str:
    """A tombstone as the owner reads it (`bxctl memory erasures`)."""
    scope = ", ".join(str(s) for s in tombstone.get("scope_refs", [])) or "(none)"
    lines = [
        f"{tombstone.get('erasure_id')}  decided {tombstone.get('decided_at')}  executed "
        f"{tombstone.get('executed_at')}  authority {tombstone.get('authority_ref')}",
        f"  scope: {scope}",
    ]
    for item in tombstone.get("holders", []):
        if not isinstance(item, dict):
            continue
        limitation = item.get("limitation_ref")
        why = f" ({limitation}: {erasure.LIMITATIONS.get(str(limitation), '')})" if limitation else ""
        refs = item.get("sanitized_replacement_refs") or []
        more = f"; source-erased in {', '.join(refs)}" if refs else ""
        lines.append(f"  {item.get('result'):<20} {item.get('holder_ref')}{why}{more}")
    return "\n".join(lines)
