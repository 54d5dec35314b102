"""Taking sessions out of the index (issue 17): an import archive replaced by a different one is read
again from its start, so its old rows and progress go first."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from boxmaker.memoryd.index.schema import transaction


def forget(conn: sqlite3.Connection, sessions: Sequence[str]) -> int:
    """Take the rows and progress of `sessions` out of an index, in one transaction. Returns the rows
    taken out.

    A session's logs are the `logs` rows named ``S/N.jsonl``; their `origins` rows go, and so does
    their progress, so the next catch-up reads them from the start. The search table is contentless,
    so the removed rows' terms stay in it until the next rebuild; a hit whose origin row is gone is
    never returned (`rowtext.hits` joins on it), so nothing is found twice.
    """
    if not sessions:
        return 0
    gone = 0
    with transaction(conn):
        for session in sessions:
            ids = [
                int(row[0])
                for row in conn.execute(
                    "SELECT id FROM logs WHERE name >= ? AND name < ?", (f"{session}/", f"{session}0")
                )
            ]
            if not ids:
                continue
            marks = ",".join("?" * len(ids))
            gone += conn.execute(f"DELETE FROM origins WHERE log IN ({marks})", ids).rowcount
            conn.execute(f"DELETE FROM logs WHERE id IN ({marks})", ids)
    return gone
