"""The fixed sentences of the `memory` and `recall` tools (M5a section 5) and their codes.

A sentence is fixed apart from the numbers, file names and ids it names; tests assert the exact text.
The model reads `output`; programs branch on `code` (DESIGN 10.3).
"""

from __future__ import annotations

from dataclasses import dataclass

# Codes of successful calls (DESIGN 10.3).
OK = "ok"
NOTED = "noted"
STAGED = "staged"


@dataclass(frozen=True, slots=True)
class Refusal:
    """A refused call: `code` is ``refused:<reason>``, `sentence` what the model reads."""

    code: str
    sentence: str


def limit(file: str, size: int, limit: int) -> Refusal:
    """DESIGN 10.6 `limit`: the file would be over its limit after the edit (M5a section 5)."""
    return Refusal(
        "refused:limit",
        f"{file} would be {size:,} of {limit:,} characters; use consolidate to move entries to notes",
    )


def note_length(size: int) -> Refusal:
    """DESIGN 10.6 `length`: a note is 1 to 1,000 characters."""
    return Refusal(
        "refused:length", f"refused (length): a note must be 1 to 1,000 characters; this one is {size:,}"
    )


def query_length(size: int) -> Refusal:
    """recall's `query` is 1 to 500 characters (M5a section 5)."""
    return Refusal(
        "refused:length",
        f"refused (length): a recall query must be 1 to 500 characters; this one is {size:,}",
    )


EMPTY = Refusal("refused:empty", "refused (empty): the entry is empty after trimming; nothing was written")


def duplicate(file: str) -> Refusal:
    """An entry identical to one already in the file."""
    return Refusal("refused:duplicate", f"{file} already holds this exact entry; nothing was written")


def not_found(file: str) -> Refusal:
    """`old` names no entry of the file as it is now."""
    return Refusal(
        "refused:not-found",
        f"no entry of {file} is exactly this old text; read the file as it is now and name the "
        "entry by its full text",
    )


def empty_old(file: str) -> Refusal:
    """`old` is empty: it never matches anything (letta PR #1616)."""
    return Refusal("refused:not-found", f"old is empty; name the entry of {file} to change by its full text")


def ambiguous(file: str, count: int) -> Refusal:
    """`old` matches more than one entry (only possible in a file edited by hand)."""
    return Refusal(
        "refused:ambiguous",
        f"old matches {count} entries of {file}; remove the duplicates with consolidate first",
    )


def tainted(file: str) -> Refusal:
    """An identity edit other than `add` from a session that has read untrusted content."""
    return Refusal(
        "refused:tainted",
        f"this session has read untrusted content; it can take notes but not change {file}",
    )


def consolidate_missing(file: str, count: int) -> Refusal:
    """consolidate left out entries of the file."""
    noun = "entry" if count == 1 else "entries"
    return Refusal(
        "refused:consolidate",
        f"consolidate must name every entry of {file} exactly once; {count} {noun} of the file "
        "as it is now are not named",
    )


def consolidate_twice(file: str) -> Refusal:
    """consolidate named an entry more often than the file holds it."""
    return Refusal(
        "refused:consolidate",
        f"consolidate names an entry of {file} more than once, or names one the file does not hold",
    )


CONSOLIDATE_SHAPE = Refusal(
    "refused:consolidate",
    "each consolidate item with old takes exactly one of keep, text, move or drop "
    "(keep, move and drop must be true); an item without old takes text only",
)


def arguments(why: str) -> Refusal:
    """The call's arguments do not have the tool's shape; `why` names the field."""
    return Refusal("refused:arguments", f"invalid arguments: {why}")


INDEX_NOT_READY = Refusal(
    "refused:unavailable",
    "recall is unavailable while memoryd builds its index after a start; try again in a minute",
)


def index_unreadable(why: str) -> Refusal:
    """The index file cannot be read (runbook memory-index-damaged)."""
    return Refusal(
        "refused:unavailable",
        f"recall cannot read memoryd's index ({why}); the owner can rebuild it with bxctl reindex "
        "(runbook: memory-index-damaged)",
    )


def updated(file: str, size: int, limit: int) -> str:
    """An identity edit was applied."""
    return f"{file} updated ({size:,} of {limit:,} characters); the change takes effect in the next session"


NOTED_TRUSTED = "noted"
NOTED_UNTRUSTED = "noted (untrusted)"
SAVED_AS_NOTE = "saved as a note (untrusted): this session has read untrusted content"


def staged(pending_id: str, file: str) -> str:
    """Review is on: the write waits for the owner."""
    return f"waiting for the owner's review as {pending_id}; {file} is unchanged until the owner accepts it"


def no_matches(query: str) -> str:
    """recall found nothing (M5a section 5)."""
    return f'(no matches for "{query}")'


# Erasure (seed 003 section 12.3; docs/runbook.md `erasure`) ----------------------------------------

ERASE_NO_SCOPE = Refusal(
    "refused:scope",
    "refused (scope): name at least one item (--item mem-…) or session (--session ID) to erase; "
    "nothing was changed",
)
ERASE_AUTHORITY = Refusal(
    "refused:authority",
    "refused (authority): the authority reference must be 1 to 80 characters of A-Z, a-z, 0-9 and "
    "'._:/-' (a ticket or request id, not a sentence); nothing was changed",
)


def erase_unknown_item(item: str) -> Refusal:
    """An `--item` that the item store does not hold."""
    return Refusal(
        "refused:not-found",
        f"refused (not-found): there is no item {item} (see bxctl memory items); nothing was changed",
    )


ERASE_ID_TAKEN = Refusal(
    "refused:erasure-id",
    "refused (erasure-id): the erasure id is not one memoryd handed out for this erasure; run "
    "bxctl memory erase again",
)
