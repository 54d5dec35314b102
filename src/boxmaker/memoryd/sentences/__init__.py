"""The vocabulary of memoryd's tools and owner commands: `Refusal`, the success codes and every
`refused:<reason>` code (DESIGN 10.3, 10.6), with the fixed sentences split by area:


- `identity`: The identity and note writes of `memory`, and `recall`'s own sentences (M5a section 5).
- `withdrawal`: Withdrawal: `forget`, the owner's withdraw and reinstate, receipts (seed 003 section 12).
- `capture`: Capture and the item store: kinds, subjects, supersede, status (seed 003 sections 9, 14.2).
- `files`: Archive, projections, export/import and replay (seed 003 sections 10-13, 12.2).
- `erasure`: Erasure (seed 003 section 12.3; docs/runbook.md `erasure`).
- `promotion`: Promotion: `propose` and the owner's decisions on proposals (seed 003 sections 17, 23.5).
- `review`: Skeptical recall, review, metamemory: retrievals, feedback (seed 003 sections 15.2, 16, 23).
- `dream`: Autodream's maintenance actions and staging (seed 003 section 14).
- `revert`: Revert any edit: ``bxctl memory revert`` (issue 19).
- `imports`: Imports of other products' memory (issue 17, ``bxctl import``).
- `damage`: A full disk, damage found at start, and `bxctl memory repair` (docs/runbook.md
  ``disk-full`` and ``memory-damaged``).

A sentence is fixed apart from the numbers, file names and ids it names; tests assert the exact text
(tests/sentences.snapshot.json pins every one). The model reads `output`; programs branch on `code`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

# Codes of successful calls (DESIGN 10.3).
OK = "ok"
NOTED = "noted"
STAGED = "staged"


class Code:
    """Every ``refused:<reason>`` code memoryd answers, by name (``Code.NOT_FOUND``); the write
    check's codes are ``refused:<rule>``, built from the rule's name (`check.rules.CONTENT_RULES`)."""

    AMBIGUOUS: Final = "refused:ambiguous"
    ARGUMENTS: Final = "refused:arguments"
    AUTHORITY: Final = "refused:authority"
    BUNDLE: Final = "refused:bundle"
    CHAIN: Final = "refused:chain"
    CHANGED: Final = "refused:changed"
    CLASS: Final = "refused:class"
    CONFIRM: Final = "refused:confirm"
    CONFLICT: Final = "refused:conflict"
    CONSOLIDATE: Final = "refused:consolidate"
    DAMAGED: Final = "refused:damaged"
    DECIDED: Final = "refused:decided"
    DENIED: Final = "refused:denied"
    DISK_FULL: Final = "refused:disk-full"
    DUPLICATE: Final = "refused:duplicate"
    EMPTY: Final = "refused:empty"
    ERASED: Final = "refused:erased"
    ERASURE_ID: Final = "refused:erasure-id"
    EXISTS: Final = "refused:exists"
    FORMAT: Final = "refused:format"  # the write check's rule (issue 15), listed for the record
    HEADING: Final = "refused:heading"  # the write check's rule (issue 15), listed for the record
    KIND: Final = "refused:kind"
    LENGTH: Final = "refused:length"
    LIMIT: Final = "refused:limit"
    MAINTENANCE: Final = "refused:maintenance"
    NOT_FOUND: Final = "refused:not-found"
    NOT_LATEST: Final = "refused:not-latest"
    NOT_UNDOABLE: Final = "refused:not-undoable"
    ORDER: Final = "refused:order"
    ORIGIN: Final = "refused:origin"
    REASON: Final = "refused:reason"
    REFS: Final = "refused:refs"
    SCOPE: Final = "refused:scope"
    STATUS: Final = "refused:status"
    SUBJECT: Final = "refused:subject"
    TAINTED: Final = "refused:tainted"
    UNAVAILABLE: Final = "refused:unavailable"
    UNTRUSTED: Final = "refused:untrusted"
    WITHDRAWN: Final = "refused:withdrawn"


@dataclass(frozen=True, slots=True)
class Refusal:
    """A refused call: `code` is ``refused:<reason>``, `sentence` what the model reads."""

    code: str
    sentence: str


def unavailable(why: str, outcome: str = "nothing was written") -> Refusal:
    """A memory file, log or the index cannot be read or written: `why` (the error), then what the
    call did about it (``nothing was written``, ``nothing to list``, ``nothing was recorded`` …)."""
    return Refusal(Code.UNAVAILABLE, f"{why}; {outcome}")
