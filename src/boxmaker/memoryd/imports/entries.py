"""Memory-like entries of an import, under the identity-write rule (issue 17; `write.origin`).

A Hermes MEMORY.md or USER.md entry, a Claude Code auto-memory bullet or a Gemini "added memory" was
written by another product, maybe by a session that had read a web page: its provenance is unknown.
So each entry

1. is skipped when memory.md or user.md already holds it (`present`), or an earlier import already
   brought it (`imported`: a staged line of an import origin with the same file and text, decided or
   not), so importing twice changes nothing;
2. otherwise becomes a note labelled private and untrusted, its header naming ``via import:<source>``
   (`Writer.note`: the note rules and the write check; a refused entry is `refused`, with the check's
   code and sentence, and nothing is written for it), and a pending identity change carrying the
   import's origin (`staged.stage`), which the owner accepts or rejects (`noted`);
3. with `accept` (``bxctl import --accept``, the owner's choice), is then accepted at once as the owner's
   edit (`staged.accept`, confirmed: every check and the limit run against the file as it is; the
   journal line names the import's origin): `accepted`, or `noted` with the reason it was not applied.
   An entry an earlier import staged that still waits is accepted the same way.

A dry run reports what each entry would be without writing anything.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from boxmaker.memoryd.files import pending
from boxmaker.memoryd.files.edits import vet_note
from boxmaker.memoryd.files.entries import IDENTITY_FILES, prepare
from boxmaker.memoryd.sentences import Refusal
from boxmaker.memoryd.write import staged
from boxmaker.memoryd.write.actions import Add
from boxmaker.memoryd.write.answer import Caller
from boxmaker.memoryd.write.origin import origin_of
from boxmaker.memoryd.write.writer import Writer
from boxmaker.proto.labels import DataClass, Label
from boxmaker.proto.messages import ImportedEntry

EntryState = Literal["present", "imported", "refused", "noted", "accepted", "would-note"]

#: The label of every imported entry's note: private (the owner's data) and untrusted (unknown provenance).
IMPORTED = Label(DataClass.PRIVATE, True)


@dataclass(slots=True)
class Outcome:
    """What became of one entry: its place in the source, its file, its state, and the code, sentence,
    pending id and edit id (the note's, or the accept's) that apply."""

    place: str
    file: str
    state: EntryState
    code: str = ""
    sentence: str = ""
    pending: str = ""
    edit: str = ""

    def data(self) -> dict[str, str]:
        """The outcome as the answer's data carries it."""
        found = {"place": self.place, "file": self.file, "state": self.state}
        for key in ("code", "sentence", "pending", "edit"):
            value = getattr(self, key)
            if value:
                found[key] = value
        return found


def caller(source: str) -> Caller:
    """Who an import's writes come from: ``imp-<source>``, private and untrusted, kind ``import``."""
    return Caller(f"imp-{source}", "", IMPORTED, kind="import")


def bring(
    writer: Writer, source: str, entries: Sequence[ImportedEntry], *, accept: bool, dry_run: bool
) -> list[Outcome]:
    """Bring `entries` in (module docstring); one outcome per entry, in order.

    Raises:
        FileUnreadable, OSError: a memory file cannot be read or written (`guarded` by the caller).
    """
    who = caller(source)
    done = _imported_before(writer)
    outcomes: list[Outcome] = []
    for entry in entries:
        spec = IDENTITY_FILES[entry.file]
        text = prepare(entry.text)
        outcome = Outcome(entry.place, spec.name, "noted")
        outcomes.append(outcome)
        if text in writer.store.read_identity(spec).entries:
            outcome.state = "present"
            continue
        if (entry.file, text) in done:
            outcome.state = "imported"
            waiting = done[entry.file, text]
            if accept and waiting and not dry_run:  # staged by an earlier import, still pending
                outcome.pending = waiting
                _accept(writer, outcome)
            continue
        vetted = vet_note(entry.text)
        if isinstance(vetted, Refusal):
            outcome.state, outcome.code, outcome.sentence = "refused", vetted.code, vetted.sentence
            continue
        done[entry.file, text] = ""
        if dry_run:
            outcome.state = "would-note"
            continue
        noted = writer.note(
            who, entry.text, "add", spec.name, origin_ref=f"import:{source}", header=f"via import:{source}"
        )
        if not noted.ok:
            outcome.state, outcome.code, outcome.sentence = "refused", noted.code, noted.output
            continue
        with writer.lock:
            outcome.pending = staged.stage(writer, who, Add(file=entry.file, text=entry.text))
        outcome.code, outcome.sentence, outcome.edit = noted.code, noted.output, noted.edit
        if accept:
            _accept(writer, outcome)
    return outcomes


def _accept(writer: Writer, outcome: Outcome) -> None:
    """The owner's accept of the outcome's pending change, confirmed (``--accept``)."""
    applied = staged.accept(writer, outcome.pending, confirmed=True)
    if applied.ok:
        outcome.state, outcome.edit = "accepted", applied.edit
    outcome.code, outcome.sentence = applied.code, applied.output


def _imported_before(writer: Writer) -> dict[tuple[str, str], str]:
    """(file key, prepared text) of every write an import ever staged, decided or not, with its
    pending id while it waits for the owner ("" once decided)."""
    found: dict[tuple[str, str], str] = {}
    waiting = {e["id"] for e in pending.pending(writer.store.pending_path)}
    for event in pending.read_events(writer.store.pending_path):
        origin = origin_of(event.get("origin"))
        arguments = event.get("arguments")
        if event.get("event") != "staged" or origin is None or origin.kind != "import":
            continue
        if isinstance(arguments, dict) and isinstance(arguments.get("text"), str):
            key = (str(arguments.get("file")), prepare(arguments["text"]))
            found[key] = event["id"] if event["id"] in waiting else ""
    return found
