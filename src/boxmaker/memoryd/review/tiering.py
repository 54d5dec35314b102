"""The tiering listing as the home stands now (M5d section 4.4; DESIGN 11): the identity entries and
notes with how often recall found them, withdrawn ones left out, for the `memory` action ``tiers`` and
the owner's ``bxctl memory tiers`` (the listing itself is the pure `tiers.listing`).
"""

from __future__ import annotations

from pathlib import Path

from boxmaker.memoryd.files.entries import IDENTITY_FILES
from boxmaker.memoryd.files.journal import Journal
from boxmaker.memoryd.files.store import FileUnreadable, Store
from boxmaker.memoryd.index.retrievals import read_log
from boxmaker.memoryd.review import tiers
from boxmaker.memoryd.sentences import Refusal, unavailable
from boxmaker.memoryd.withdrawal.controls import Controls, withdrawn_identity


def listing_now(
    store: Store,
    journal: Journal,
    controls: Controls,
    recalls: Path,
    untrusted: bool,
    *,
    offset: int = 0,
    limit: int = tiers.DEFAULT_PAGE,
) -> tiers.Listing | Refusal:
    """The listing: every identity entry and one page of the notes not withdrawn (`tiers.listing`'s
    `offset` and `limit`), with recall counts from the recall log under `recalls`; the text of
    untrusted notes only when `untrusted`. notes.md is parsed once and followed (`Store.parsed_notes`).

    Returns ``refused:unavailable`` when a memory file or the recall log cannot be read.
    """
    try:
        read = {s.name: store.read_identity(s).entries for s in IDENTITY_FILES.values()}
        found = store.parsed_notes()
        tallied = tiers.tally(read_log(recalls))
        excluded = controls.exclusion()
        hidden = withdrawn_identity(controls, store, journal, read)
    except (FileUnreadable, OSError) as exc:
        return unavailable(str(exc), "nothing to list")
    files = [(name, [e for e in entries if (name, e) not in hidden]) for name, entries in read.items()]
    shown = [n for n in found if not excluded.note(n)] if excluded or excluded.note_keys else found
    return tiers.listing(files, shown, tallied, untrusted=untrusted, offset=offset, limit=limit)
