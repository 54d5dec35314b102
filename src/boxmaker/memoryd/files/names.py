"""Every file and folder name under ``{home}/memory/`` (DESIGN 2 and 8), in one place.

The modules that own a file read its name from here, and so do the ones that only walk the folder
(replay, erasure, the start-up check), so no module has to import another's to learn a name.
"""

from __future__ import annotations

# M5a: the owner's steering, identity, notes and review.
SOUL_FILE = "soul.md"
NOTES_FILE = "notes.md"
PENDING_FILE = "pending.jsonl"
EDITS_DIR = "edits"
RECALLS_DIR = "recalls"
#: The journal's intent file: written before a commit's steps, removed after (`journal`).
INTENT = ".intent.json"
LOCK_FILE = ".lock"
#: The last good state the start-up check verified (`checkpoint`), and an erasure in progress.
CHECKPOINT = ".checkpoint.json"
ERASING = ".erasing.json"
#: Where `bxctl memory repair` replays the journal before it restores a file (removed after).
REPAIR_DIR = ".repair"
#: Where `bxctl memory verify` replays the journal to compare the files with it (removed after).
VERIFY_DIR = ".verify"
#: The home's key for signing bundles (`bundle.signing`).
BUNDLE_KEY = ".bundle.key"

# The memory protocol (seed 003): items, controls, erasures, feedback, proposals and projections.
ITEMS_FILE = "items.jsonl"
CONTROLS_FILE = "controls.jsonl"
ERASURES_FILE = "erasures.jsonl"
FEEDBACK_FILE = "feedback.jsonl"
PROPOSALS_FILE = "proposals.jsonl"
ARCHIVE_DIR = "archive"
DREAM_DIR = "dream"
INDEX_FILE = "index.md"
TOPICS_DIR = "topics"
#: Where the projections' mark says through which offset of items.jsonl the pages show it (`pages`).
PAGES_MARK = ".projections.json"
