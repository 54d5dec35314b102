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

Import archives (``imports/<source>/<id>.jsonl``, issue 17) are memoryd's too: an erased import session's
archive is deleted (its texts are erased everywhere else, as loopd's are for its sessions), and every
other archive has the texts replaced line by line, like a session log (holder ``imports/``).

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
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from boxmaker.memoryd.erase.rules import (
    FIXED_HOLDERS,
    IMPORTS_HOLDER,
    INDEX_HOLDER,
    Rules,
    holder_of,
    md_forms,
    memory_files,
    short_remains,
)
from boxmaker.memoryd.erase.scope import (
    Covered,
    Holdings,
    Scope,
    check_sessions,
    covered,
    held_arg,
    parse_scope,
    texts_arg,
    tombstones,
)
from boxmaker.memoryd.files.entries import BY_NAME
from boxmaker.memoryd.files.journal import Append, Change, encode_line, read_jsonl
from boxmaker.memoryd.files.names import ERASURES_FILE, ITEMS_FILE
from boxmaker.memoryd.items.store import is_item_id
from boxmaker.memoryd.sentences import Refusal, identity
from boxmaker.memoryd.sentences import erasure as erasure_sentences
from boxmaker.proto import erasure, fsio
from boxmaker.proto.archives import archive_ids, archive_path
from boxmaker.proto.erasure import COMPLETED, PARTIAL, RESULTS, UNEVALUATED, Scrubber
from boxmaker.proto.ids import OWNER_SESSION

log = logging.getLogger("boxmaker.memoryd.erase")

#: A holder reference: a path or id, never a sentence.
_HOLDER_REF = re.compile(r"^[A-Za-z0-9._:/#@-]{1,200}\Z")
_TIME = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z\Z")


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


def _exports(holdings: Holdings) -> list[tuple[str, Path | None]]:
    """(holder ref, file) of every export the journal records (action ``export``); the file is None
    when the line names none."""
    found = []
    for entry in holdings.journal.entries_newest_first():
        if entry.get("action") != "export":
            continue
        named = entry.get("file")  # the file written (``where`` is only the word "export")
        path: Path | None = None
        if isinstance(named, str) and named:
            path = Path(named)
            if not path.is_absolute():
                path = holdings.layout.memory / named
        found.append((f"export:{entry.get('id', '?')}", path))
    return found


def _inside(path: Path, folder: Path) -> bool:
    try:
        path.resolve().relative_to(folder.resolve())
    except ValueError:
        return False
    return True


def plan(holdings: Holdings, args: dict[str, Any]) -> dict[str, Any] | Refusal:
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
    extra = texts_arg(args)
    if isinstance(extra, Refusal):
        return extra
    held = held_arg(args)
    if isinstance(held, Refusal):
        return held
    found = covered(holdings, scope)
    if isinstance(found, Refusal):
        return found
    refused = check_sessions(holdings, scope, held, extra)
    if refused is not None:
        return refused
    texts = found.texts | {t.strip() for t in extra if t.strip()}
    memory_dir = holdings.layout.memory
    erasure_id = next_erasure_id(memory_dir, holdings.now().date(), holdings.reserved)
    if args.get("reserve") is True:
        holdings.reserved.add(erasure_id)
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
    holds[IMPORTS_HOLDER] = _archives_holding(holdings, scope, rules.scrubber)
    holds[INDEX_HOLDER] = _index_holds(holdings, rules.scrubber)
    holders: list[dict[str, Any]] = [
        {"holder_ref": ref, "holds": count, "result": COMPLETED, "limitation_ref": None}
        for ref, count in holds.items()
    ]
    for ref, exported in _exports(holdings):
        outside = exported is None or not _inside(exported, holdings.layout.home)
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


def _archives_holding(holdings: Holdings, scope: Scope, scrubber: Scrubber) -> int:
    """How many import archives an erasure changes: those of erased sessions, and those holding an
    erased text."""
    count = 0
    for archive in archive_ids(holdings.layout.imports):
        path = archive_path(holdings.layout.imports, archive)
        try:
            if archive in scope.sessions or scrubber.remains(path.read_bytes()):
                count += 1
        except OSError:
            continue
    return count


def _erase_archives(holdings: Holdings, scope: Scope, scrubber: Scrubber) -> tuple[str, str | None]:
    """Delete the import archives of erased sessions and scrub every other one (issue 17: memoryd
    writes them, so memoryd erases in them, as loopd does in sessions/); then byte-search them."""
    imports = holdings.layout.imports
    result: tuple[str, str | None] = (COMPLETED, None)
    for archive in archive_ids(imports):
        path = archive_path(imports, archive)
        try:
            if archive in scope.sessions:
                path.unlink()
                fsio.fsync_dir(path.parent)
                continue
            erasure.scrub_file(path, scrubber)
            if scrubber.remains(path.read_bytes()):
                log.error("erasure: %s still holds an erased text", path)
                result = (PARTIAL, "remains")
        except OSError as exc:
            log.error("erasure: cannot rewrite %s: %s", path, exc)
            result = (PARTIAL, "write-failed")
    return result


def _index_holds(holdings: Holdings, scrubber: Scrubber) -> int:
    """How many of the index's files hold an erased text as bytes (the file, -wal, leftovers)."""
    folder = holdings.layout.index
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


def execute(holdings: Holdings, args: dict[str, Any]) -> dict[str, Any] | Refusal:
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
    extra = texts_arg(args)
    if isinstance(extra, Refusal):
        return extra
    others = _holders_arg(args)
    if isinstance(others, Refusal):
        return others
    held = held_arg(args)
    if isinstance(held, Refusal):
        return held
    erasure_id = args.get("erasure_id")
    memory_dir = holdings.layout.memory
    if not isinstance(erasure_id, str) or erasure_id not in holdings.reserved:
        return erasure_sentences.ERASE_ID_TAKEN
    if any(t.get("erasure_id") == erasure_id for t in tombstones(memory_dir)):
        return erasure_sentences.ERASE_ID_TAKEN
    decided = args.get("decided_at")
    now = _stamp(holdings.now())
    decided_at = decided if isinstance(decided, str) and _TIME.match(decided) else now
    with holdings.lock:
        found = covered(holdings, scope)
        if isinstance(found, Refusal):
            return found
        refused = check_sessions(holdings, scope, held, extra)
        if refused is not None:
            return refused
        texts = found.texts | {t.strip() for t in extra if t.strip()}
        marked = holdings.checkpoints.erasing(erasure_id) if holdings.checkpoints else nullcontext()
        with marked:
            tombstone = _scrub_and_commit(
                holdings, scope, found, _Run(texts, erasure_id, authority, decided_at, now, others)
            )
        holdings.reserved.discard(erasure_id)
    log.info("erasure %s: %d items, %d sessions", erasure_id, len(found.items), len(scope.sessions))
    return tombstone


@dataclass(frozen=True, slots=True)
class _Run:
    """One erasure's own values: the texts to erase, its id and authority, its times, and the
    other roles' holders."""

    texts: set[str]
    erasure_id: str
    authority: str
    decided_at: str
    now: str
    others: list[dict[str, Any]]


def _scrub_and_commit(holdings: Holdings, scope: Scope, found: Covered, run: _Run) -> dict[str, Any]:
    """Scrub every file under memory/, rebuild the index, and commit the tombstone (the caller holds
    the write lock, and the checkpoints mark the erasure in progress). Returns the tombstone."""
    scrubber = Scrubber(run.texts, run.erasure_id, scope.anchors)
    rules = Rules(scrubber, scope, frozenset(found.items), frozenset(found.note_keys))
    results = _scrub_memory(holdings.layout.memory, rules)
    results[IMPORTS_HOLDER] = _erase_archives(holdings, scope, scrubber)
    results[INDEX_HOLDER] = _rebuild_index(holdings, scrubber)
    holders = [*run.others]
    for ref in dict.fromkeys([*FIXED_HOLDERS, *results]):
        result, limitation = results.get(ref, (COMPLETED, None))
        replacements = _replacements_of(ref, found.replacements)
        holders.append(erasure.holder(ref, result, limitation, replacements))
    holders.extend(_erase_exports(holdings, scrubber))
    tombstone = {
        "erasure_id": run.erasure_id,
        "record_type": erasure.RECORD_TYPE,
        "scope_refs": sorted(set(scope.items) | set(found.items)) + list(scope.sessions),
        "authority_ref": run.authority,
        "decided_at": run.decided_at,
        "executed_at": _stamp(holdings.now()),
        "holders": holders,
    }
    event = {"event": "erase", "time": run.now, "erasure": run.erasure_id, "ids": found.items}
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
            name: list(holdings.store.read_identity(spec).entries) for name, spec in BY_NAME.items()
        },
    }
    holdings.journal.commit(Change(entry, appends))
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
        elif short_remains(scrubber, new) and results[ref][0] == COMPLETED:
            results[ref] = (PARTIAL, "short-text")
    return results


def _rebuild_index(holdings: Holdings, scrubber: Scrubber) -> tuple[str, str | None]:
    """Rebuild the index from the scrubbed files and seal it; then byte-search its folder."""
    holdings.index.rebuild()
    holdings.index.seal()
    folder = holdings.layout.index
    for path in folder.iterdir() if folder.is_dir() else []:
        try:
            if path.is_file() and scrubber.remains(path.read_bytes()):
                log.error("erasure: %s still holds an erased text after the rebuild", path)
                return PARTIAL, "remains"
        except OSError:
            continue
    return COMPLETED, None


def _erase_exports(holdings: Holdings, scrubber: Scrubber) -> list[dict[str, Any]]:
    holders = []
    for ref, path in _exports(holdings):
        if path is None or not _inside(path, holdings.layout.home):
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
