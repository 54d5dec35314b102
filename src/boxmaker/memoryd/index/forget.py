"""Taking sessions out of the index (issue 17): an import archive replaced by a different one is read
again from its start, so its old rows and progress go first."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from boxmaker.memoryd.index.schema import transaction


def forget(conn: sqlite3.Connection, sessions: Sequence[str]) -> int:
    """Take the rows and progress of `sessions` out of an index, in one transaction. Returns the rows
    taken out.

    The search table is contentless, so the removed rows' terms stay in it until the next rebuild;
    a hit whose source row is gone is never returned (`search.hits`), so nothing is found twice.
    """
    if not sessions:
        return 0
    marks = ",".join("?" * len(sessions))
    with transaction(conn):
        gone = conn.execute(
            f"DELETE FROM sources WHERE kind != 'note' AND data ->> 3 IN ({marks})", list(sessions)
        ).rowcount
        for session in sessions:
            conn.execute("DELETE FROM progress WHERE log >= ? AND log < ?", (f"{session}/", f"{session}0"))
    return int(gone)
