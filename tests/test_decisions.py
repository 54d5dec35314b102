"""The docs say what the code does where the seeds fixed it (issue 13, item 5; DESIGN 11: every
deliberate change to a seed is recorded in docs/decisions.md).

- M5a's fixed sentences: each is either produced word for word or listed in docs/decisions.md with the
  sentence the code says instead.
- The dated files under memory/ that the docs name (``edits/YYYY-MM.jsonl``, ``recalls/…``) are named
  as memoryd writes them, checked against the files a real edit and a real recall leave.
- Checklist 4's reading is a decision, and the conformance page points to it.
"""

from __future__ import annotations

import re
from pathlib import Path

from boxmaker.brokerd.sentences import MEMORY_GRANT
from boxmaker.memoryd.sentences import identity
from boxmaker.memoryd.service import Memoryd
from boxmaker.proto.labels import DataClass
from boxmaker.proto.messages import MemoryCall, ToolRequest, ToolResponse

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
ITEM = "mem-2026-09-24-001"

#: M5a's fixed sentences (seed 000, sections 5 and 8) beside the code's sentence for the same case.
SEED_SENTENCES = [
    ("noted", identity.noted(ITEM, untrusted=False)),
    ("noted (untrusted)", identity.noted(ITEM, untrusted=True)),
    ("saved as a note (untrusted): this session has read untrusted content", identity.saved_as_note(ITEM)),
    (
        "this session has read untrusted content; it can take notes but not change memory.md",
        identity.tainted("memory.md").sentence,
    ),
    (
        "memory.md would be 2,350 of 2,200 characters; use consolidate to move entries to notes",
        identity.limit("memory.md", 2350, 2200).sentence,
    ),
    ('(no matches for "…")', identity.no_matches("…")),
    ("the policy of recall and memory is built in; remove this grant", MEMORY_GRANT),
]


def test_every_m5a_sentence_is_kept_or_its_change_is_a_decision() -> None:
    decisions = (DOCS / "decisions.md").read_text(encoding="utf-8")
    changed = []
    for seed, ours in SEED_SENTENCES:
        if ours == seed:
            continue
        changed.append(seed)
        shown = ours.replace(ITEM, "mem-…")
        row = f"| `{seed}` | `{shown}` |"
        assert row in decisions, f"docs/decisions.md does not record {seed!r} becoming {shown!r}"
    assert changed == [s for s, _ in SEED_SENTENCES[:3]]  # the item id joined these three only


def test_the_docs_name_dated_memory_files_as_memoryd_writes_them(service: Memoryd, home: Path) -> None:
    service.handle(
        "memory_call",
        MemoryCall(
            ToolRequest("chat-docs", "c1", "memory", {"action": "add", "file": "user", "text": "Likes tea."}),
            DataClass.PRIVATE,
            untrusted=False,
        ),
    )
    reply = service.handle(
        "memory_call",
        MemoryCall(
            ToolRequest("chat-docs", "c2", "recall", {"query": "tea"}), DataClass.PRIVATE, untrusted=False
        ),
    )
    assert isinstance(reply, ToolResponse)
    written = {
        folder: [p.name for p in (home / "memory" / folder).iterdir()] for folder in ("edits", "recalls")
    }
    assert written == {"edits": ["2026-09.jsonl"], "recalls": ["2026-09.jsonl"]}  # the service's clock
    named = {
        match
        for doc in [*DOCS.glob("*.md"), ROOT / "README.md"]
        for match in re.findall(r"\b(?:edits|recalls)/YYYY[-A-Z]*\.jsonl", doc.read_text(encoding="utf-8"))
    }
    assert named == {"edits/YYYY-MM.jsonl", "recalls/YYYY-MM.jsonl"}, named


def test_checklist_4s_reading_is_a_decision_the_conformance_page_cites() -> None:
    decisions = (DOCS / "decisions.md").read_text(encoding="utf-8")
    assert re.search(r"^## Checklist 4: .*\(seed 003 section 21\)$", decisions, re.M)
    row = next(
        line
        for line in (DOCS / "conformance.md").read_text(encoding="utf-8").splitlines()
        if line.startswith("| 4 |")
    )
    assert 'docs/decisions.md, "Checklist 4"' in row
