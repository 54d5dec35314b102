"""Unicode 16 confusables with ASCII prototypes (UTS #39 section 4), for the write check's ``phrase``,
``role`` and ``mixed-script`` rules (``check.confusables``): the loader of the generated data.

The rows live in ``confusables.tsv`` beside this module (package data, written by
``scripts/make_confusables_table.py``; where the source came from: that script's docstring). ``TABLE``
maps each non-ASCII code point of confusables.txt whose prototype is all ASCII to that prototype
(1,827 entries); ``TABLE_SHA256`` is the digest of the rows as the file holds them, which the file's
header records. A file whose rows do not match its recorded digest (a hand edit, a damaged install)
raises ``RuntimeError`` when this module is imported: the write check never runs on a table it cannot
vouch for.
"""

from __future__ import annotations

import hashlib
from importlib import resources
from typing import Final

_DIGEST_PREFIX: Final = "# rows-sha256: "


def _load() -> tuple[str, dict[int, str]]:
    text = resources.files("boxmaker.memoryd.check").joinpath("confusables.tsv").read_text(encoding="utf-8")
    recorded = ""
    rows: list[str] = []
    for line in text.splitlines():
        if line.startswith(_DIGEST_PREFIX):
            recorded = line.removeprefix(_DIGEST_PREFIX)
        elif line and not line.startswith("#"):
            rows.append(line)
    if hashlib.sha256("\n".join(rows).encode("utf-8")).hexdigest() != recorded:
        raise RuntimeError("memoryd/check/confusables.tsv does not match its recorded digest: reinstall")
    table: dict[int, str] = {}
    for row in rows:
        source, _, target = row.partition("\t")
        table[int(source, 16)] = "".join(chr(int(h, 16)) for h in target.split(" "))
    return recorded, table


TABLE_SHA256, TABLE = _load()
