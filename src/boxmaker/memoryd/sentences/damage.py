"""A full disk, damage found at start, and `bxctl memory repair` (docs/runbook.md ``disk-full`` and
``memory-damaged``; `startcheck`).

The damage sentences are clauses naming the file (`proto.startcheck.Finding` adds the repair and the
runbook entry): the start-up check logs the first one, ``bxctl status`` shows it, and ``bxctl memory
repair`` lists them all with what it would restore.
"""

from __future__ import annotations

from boxmaker.memoryd.sentences import Code, Refusal

#: A write found the file system full (or the owner's quota reached): every file is as it was (the
#: journal undid the commit); the owner frees space (runbook ``disk-full``).
DISK_FULL = Refusal(
    Code.DISK_FULL,
    "refused (disk-full): the disk that holds memory is full; nothing was written. "
    "The same call can be made again once the owner has freed space",
)

#: The runbook entry of every damage finding.
RUNBOOK = "memory-damaged"
#: What the owner runs for a file the journal can restore.
REPAIR = "`bxctl memory repair` shows what the journal restores"
#: What the owner does for the journal itself, which nothing else records.
RESTORE_JOURNAL = "restore it from a backup (the journal is what the other files are restored from)"
#: What the owner does for soul.md, which the journal does not hold.
RESTORE_SOUL = "restore it from a backup, or move it away to get the starter at the next start"
#: What the owner does after an interrupted erasure.
ERASE_AGAIN = "run the same `bxctl memory erase` again to finish it"


def cut(file: str, size: int, edit: str, at: int, end: int) -> str:
    """`file` ends before or inside what journal edit `edit` appended at bytes `at`..`end`."""
    where = "inside" if size > at else "before"
    return (
        f"{file} ends at byte {size:,}, {where} what edit {edit} appended (bytes {at:,} to {end:,}): "
        "it was cut"
    )


def altered(file: str, edit: str, at: int) -> str:
    """`file` no longer holds, at byte `at`, the bytes journal edit `edit` appended there."""
    return (
        f"{file} does not hold what edit {edit} appended at byte {at:,}: it was changed after it was written"
    )


def trailing(file: str, extra: int, end: int) -> str:
    """`file` (written only by memoryd) has bytes after the last append the journal records."""
    return f"{file} has {extra:,} bytes after byte {end:,}, where the journal's last append to it ends"


def gap(file: str, extra: int, at: int, edit: str) -> str:
    """`file` (written only by memoryd) holds bytes between two appends the journal records, or between
    the checkpoint's mark and the first append since, that no journal line wrote."""
    return (
        f"{file} has {extra:,} bytes at byte {at:,} that no journal line wrote, before what edit {edit} "
        "appended"
    )


def since_check(file: str, how: str) -> str:
    """`file` differs from the checkpoint's mark (`how`: ``is N bytes, shorter than …``)."""
    return f"{file} {how}"


def not_a_journal_line(file: str, at: int) -> str:
    """A complete line of the journal since the checkpoint is not a journal line."""
    return f"the line at byte {at:,} of {file} is not a journal line"


def identity_damaged(file: str, why: str) -> str:
    """An identity or steering file cannot be read, is not UTF-8, or holds NUL bytes (`why`)."""
    return f"{file} {why}"


def erasure_interrupted(erasure_id: str) -> str:
    """A crash stopped erasure `erasure_id` before its tombstone was written."""
    return (
        f"erasure {erasure_id} was interrupted before its tombstone was written: some files may be "
        "scrubbed and others not"
    )


def repair_plan(file: str, sizes: tuple[int, int], added: int, dropped: int, unit: str) -> str:
    """One line of `bxctl memory repair`'s plan: `file` from `sizes` (now, restored) in bytes, with
    the `unit`s (note, line, entry) the journal's copy puts back, and the ones it removes because the
    journal does not hold them as they are (a cut note, a line of garbage, text typed by hand)."""
    return (
        f"{file}: restore it from the journal ({sizes[0]:,} -> {sizes[1]:,} bytes: "
        f"{_count(added, unit)} put back, {_count(dropped, unit)} the journal does not hold as "
        f"{'it is' if dropped == 1 else 'they are'} removed)"
    )


def _count(n: int, unit: str) -> str:
    if n == 1:
        return f"1 {unit}"
    return f"{n:,} {unit[:-1] + 'ies' if unit.endswith('y') else unit + 's'}"


def not_repairable(file: str, why: str) -> str:
    """A finding `bxctl memory repair` does not restore, and what the owner does instead."""
    return f"{file}: not restored by repair; {why}"


NOTHING_TO_REPAIR = "nothing to repair: every file memoryd checks agrees with the journal"
