"""The journal's hash chain: what `bxctl memory verify` and the start-up check say of a line or a file
that disagrees (issue 19, a tamper-evident journal; `files.chain`, `startcheck.verify`).

Each clause names the place first (``edits/2026-09.jsonl line 4 (edit 2026-09-24-0004)``), then what
is wrong with it; the start-up check wraps it in a `proto.startcheck.Finding`.
"""

from __future__ import annotations

#: What the owner does when the journal's chain is broken (nothing else records the journal).
RESTORE_CHAIN = (
    "run `bxctl memory verify` to see every line it checks, and restore the journal from a backup "
    "if you did not change it"
)


def changed(place: str) -> str:
    """A line whose content no longer gives its commitment (its salt is still there)."""
    return f"{place} does not match its commitment: the line was changed after it was written"


def unlinked(place: str) -> str:
    """A line whose chain value does not follow the line before it."""
    return (
        f"{place} does not follow the line before it: a line before it was removed, inserted or moved, "
        "or this one was"
    )


def malformed(place: str, field: str) -> str:
    """A chained line whose chain field `field` is not a 64-digit hex value."""
    return f"{place} has a {field} that is not a SHA-256 value"


def unsalted(place: str) -> str:
    """A chained line without its salt that no erasure marks."""
    return f"{place} has lost its salt and no erasure marks it erased"


def unchained_after(place: str) -> str:
    """A line without chain fields after a chained line (only a prefix may be unchained)."""
    return f"{place} has no chain fields, but lines before it are chained"


def erased_by_unknown(place: str, erasure_id: str) -> str:
    """A line marked erased by an erasure no later journal line records."""
    return f"{place} is marked erased by {erasure_id}, but no later erasure line of the journal records it"


def head_not_found(head: str) -> str:
    """``verify --head``: the head the owner recorded is not the chain value of any line."""
    return (
        f"the recorded head {head} is not the chain value of any line of the journal: "
        "the history up to it was rewritten, or it was recorded from another home"
    )


def head_before_problem(head: str, place: str) -> str:
    """``verify --head``: the recorded head is a line's chain value, but a line up to it disagrees."""
    return (
        f"the recorded head {head} is the chain value of {place}, but a line up to it disagrees: "
        "the history before the head was changed"
    )


def file_disagrees(file: str, how: str) -> str:
    """A file that is not what the journal's replay gives (`how`: where it first differs)."""
    return f"{file} is not what the journal's replay gives ({how})"


def line_place(file: str, number: int, edit: str) -> str:
    """Where a journal line is: its file, its line number (from 1) and its edit id."""
    return f"{file} line {number:,} (edit {edit})"


def byte_place(file: str, at: int, edit: str) -> str:
    """Where a journal line is, as the start-up check reads it: its file and the byte it starts at."""
    return f"{file} at byte {at:,} (edit {edit})"


def checked(lines: int, since: bool, head: str, problem: str) -> str:
    """What the start-up check did with the chain: how many lines it checked from where, and the head
    (or the first problem)."""
    where = "since the last checkpoint" if since else "from the start of the journal"
    lines_text = f"{lines:,} journal line{'s' if lines != 1 else ''}"
    if problem:
        return f"journal chain BROKEN: checked {lines_text} {where}; {problem}"
    return f"journal chain checked at start: {lines_text} {where}, intact; head {head}"
