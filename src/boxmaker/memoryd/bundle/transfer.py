"""The owner's export and import of a bundle (seed 003 sections 12.2 and 20; `format` gives the bundle's
shape and its checks): each is one journal commit under the write lock.

- `export` writes a new file (never over one) with every item event and the withdrawals that apply to
  them, signed with the home's key (`signing`), journalled (action ``export``) before the file is
  written, so the journal errs towards a copy it knows of (an erasure then reaches it);
- `import_bundle` validates the whole bundle against the store first, then appends its items and
  controls in one commit (action ``import``); nothing is written when any part is refused.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

from boxmaker.memoryd.bundle import format as bundle
from boxmaker.memoryd.bundle import signing
from boxmaker.memoryd.files.journal import Change
from boxmaker.memoryd.files.store import FileUnreadable
from boxmaker.memoryd.items.projections import Excluded
from boxmaker.memoryd.sentences import Refusal, unavailable
from boxmaker.memoryd.sentences import files as files_sentences
from boxmaker.memoryd.write.writer import Writer
from boxmaker.proto import fsio
from boxmaker.proto.ids import OWNER_SESSION


def export(writer: Writer, excluded: Excluded, path: Path, omit_withdrawn: bool) -> bundle.Export | Refusal:
    """Write a bundle of the item store to `path` (a new file) and journal it (action export).

    Returns ``refused:exists`` when `path` exists, ``refused:unavailable`` when it cannot be written
    (a folder that cannot take a file is refused first, with nothing journalled; a write that fails
    later, such as on a full disk, leaves the journal line recording the attempt, erring towards a known
    copy).
    """
    if path.exists() or path.is_symlink():
        return files_sentences.export_exists(str(path))
    if not path.parent.is_dir():
        return files_sentences.unwritable(str(path), "its folder does not exist")
    # a folder that cannot take a file (read-only, no permission): refused before any work or journal line
    probe = path.with_name(f".{path.name}.tmp-{os.getpid()}")  # the name `write_new` writes through
    try:
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        probe.unlink()
    except FileExistsError:
        pass  # left by a write that was killed: write_new replaces it
    except OSError as exc:
        return files_sentences.unwritable(str(path), exc.strerror or str(exc))
    with writer.lock:
        try:
            events = writer.items.events()
            controls = bundle.read_controls(writer.store.dir)
        except OSError as exc:
            return files_sentences.unwritable(str(path), f"the item store cannot be read: {exc}")
        try:
            key = signing.home_key(writer.store.dir)
        except OSError as exc:
            return files_sentences.unwritable(str(path), f"the home's bundle key cannot be read: {exc}")
        made = bundle.build_export(events, controls, excluded, omit_withdrawn, writer.now())
        entry = {
            "session": OWNER_SESSION,
            "call": "",
            "action": "export",
            "file": str(path),
            "where": "export",
            "before": [],
            "after": [],
            "untrusted": False,
            "ids": made.ids,
            "exported_controls": made.controls,
        }
        writer.journal.commit(Change(entry))
    signed = signing.sign(made.bundle, key)
    data = json.dumps(signed, ensure_ascii=True, indent=1).encode("ascii") + b"\n"
    try:
        bundle.write_new(path, data)
    except FileExistsError:
        return files_sentences.export_exists(str(path))
    except OSError as exc:
        return files_sentences.unwritable(str(path), exc.strerror or str(exc))
    return made


def import_bundle(
    writer: Writer, on_controls: Callable[[], None], path: Path, trusted: bool = False
) -> tuple[bundle.ImportPlan, str, signing.Whose] | Refusal:
    """Validate and import a bundle (`format`): one journal commit (action import); its items untrusted
    unless `trusted` and this home signed the bundle (`signing.verify`). With controls, `on_controls`
    is called after the commit (the index is rebuilt in the background, as after a withdrawal).

    Returns the plan, the edit id and whose the bundle is, or the refusal (nothing written).
    """
    loaded = bundle.read_bundle(path)
    if isinstance(loaded, Refusal):
        return loaded
    memory_dir = writer.store.dir
    try:
        whose = signing.verify(loaded, signing.existing_key(memory_dir))
    except OSError as exc:
        return unavailable(f"the home's bundle key cannot be read: {exc}", "nothing was imported")
    trusted = trusted and whose == "this-home"
    with writer.lock:
        try:
            events = writer.items.events()
            present = writer.items.items()
            controls = bundle.read_controls(memory_dir)
            position = len(writer.store.parsed_notes())
        except (OSError, FileUnreadable) as exc:
            return unavailable(str(exc), "nothing was imported")
        plan = bundle.plan_import(loaded, present, controls, trusted)
        if isinstance(plan, Refusal):
            return plan
        fields, appends, added = bundle.import_appends(
            memory_dir,
            plan=plan,
            events=events,
            first_position=position,
            notes_need_newline=not fsio.ends_with_newline(writer.store.notes_path),
            bundle_name=path.name,
            moment=writer.now(),
        )
        entry = {
            "session": OWNER_SESSION,
            "call": "",
            "action": "import",
            "file": path.name,
            "where": "items.jsonl",
            "before": [],
            "after": [],
            "untrusted": False,
            **fields,
        }
        line = writer.journal.commit(Change(entry, appends))
        if added:
            data = next(a.data for a in appends if a.path == "notes.md")
            writer.on_notes(added, data)
    if plan.controls:
        on_controls()
    return plan, str(line["id"]), whose
