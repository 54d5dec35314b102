"""M5a section 14's offline test list, item by item, and the public bug classes the issue names.

Each item names the tests that cover it; this module fails when one of them no longer exists, so the
list stays true. Also: every runbook entry a role points to is written in docs/runbook.md.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

ITEMS: dict[str, list[str]] = {
    # memoryd
    "entries parsing and rendering": [
        "memoryd/test_entries.py::test_parse_render_parse_round_trip",
        "memoryd/test_entries.py::test_parse_splits_on_separator_lines_and_trims",
        "memoryd/test_entries.py::test_render_and_count",
    ],
    "the source tag of every kind of hit (moved, dropped, noted clean and tainted)": [
        "memoryd/test_index.py::test_source_tag_of_every_kind_of_note",
    ],
    "the source tag of session records before and after the session read untrusted content": [
        "memoryd/test_index.py::test_session_records_before_and_after_untrusted_content",
    ],
    "each edit's rules: a stale old": ["memoryd/test_edits.py::test_replace_stale_old_refused"],
    "each edit's rules: a duplicate": ["memoryd/test_edits.py::test_add_duplicate_refused_and_first_kept"],
    "each edit's rules: the limit sentence": ["memoryd/test_edits.py::test_limit_sentence_is_fixed"],
    "each edit's rules: consolidate missing an entry": [
        "memoryd/test_edits.py::test_consolidate_missing_an_entry"
    ],
    "each edit's rules: consolidate naming one twice": [
        "memoryd/test_edits.py::test_consolidate_naming_one_twice"
    ],
    "every rule of the check, on write": [
        "memoryd/test_check.py::test_bad_inputs_case",
        "memoryd/test_check.py::test_each_snippet_fails_its_own_rule",
        "memoryd/test_bad_inputs.py::test_write_case",
    ],
    "every rule of the check, on building the block": [
        "memoryd/test_block.py::test_the_check_reruns_on_building_the_block"
    ],
    "routing: an untrusted add becoming a note": [
        "memoryd/test_writer.py::test_tainted_add_becomes_untrusted_note"
    ],
    "routing: the other identity actions refused": [
        "memoryd/test_writer.py::test_tainted_identity_edits_refused"
    ],
    "routing: note in both kinds of session": ["memoryd/test_writer.py::test_note_in_both_kinds_of_session"],
    "the notes.md headers and labels": [
        "memoryd/test_notes.py::test_noted_header_trusted_and_untrusted",
        "memoryd/test_notes.py::test_moved_and_dropped_headers",
        "memoryd/test_writer.py::test_remove_and_consolidate_write_notes_headers",
    ],
    "the journal lines": ["memoryd/test_writer.py::test_clean_add_applies_and_is_journalled"],
    "undo of the latest edit": ["memoryd/test_writer.py::test_undo_latest_edit"],
    "undo refused when the file changed": [
        "memoryd/test_writer.py::test_undo_refused_when_not_latest_or_file_changed"
    ],
    "review on and off": [
        "memoryd/test_writer.py::test_review_stages_then_accept_applies_with_checks",
        "memoryd/test_writer.py::test_review_reject_is_journalled",
        "memoryd/test_writer.py::test_clean_add_applies_and_is_journalled",
    ],
    "the block": [
        "memoryd/test_block.py::test_the_block_exactly",
        "memoryd/test_block.py::test_over_the_limit_refuses_the_block",
    ],
    "the quoted-terms query builder against FTS5 operators (NEAR, *, ^, quotes, column filters)": [
        "memoryd/test_index.py::test_fts5_operators_are_only_text",
        "memoryd/test_query.py::test_the_builder_never_raises_and_never_passes_an_operator",
    ],
    "labels walked from a log": ["memoryd/test_index.py::test_labels_walked_from_a_log_and_max_class"],
    "max_class": [
        "memoryd/test_index.py::test_labels_walked_from_a_log_and_max_class",
        "memoryd/test_index.py::test_max_class_secret_indexes_secret_records",
    ],
    "catching up from progress": [
        "memoryd/test_index.py::test_catch_up_from_progress_reads_only_new_records"
    ],
    "a reindex equal to the incremental index": [
        "memoryd/test_index.py::test_reindex_equals_incremental_index"
    ],
    "the recall log": ["memoryd/test_index.py::test_recall_log"],
    # bxctl
    "bxctl: reindex against a fake socket": ["bxctl/test_bxctl.py::test_reindex_prints_the_counts"],
    "bxctl: each memory command against a fake socket": [
        "bxctl/test_bxctl.py::test_each_memory_command_sends_its_request"
    ],
    # public bug classes (issue 2)
    "hermes #54403: an entry holding a § line stored as two": [
        "memoryd/test_entries.py::test_entry_holding_a_separator_line_is_not_stored_as_two"
    ],
    "mem0 #1674: a second identical add deleting the first": [
        "memoryd/test_edits.py::test_add_duplicate_refused_and_first_kept"
    ],
    "hermes #11511: CJK queries finding nothing": ["memoryd/test_index.py::test_cjk_text_is_found"],
    "hermes #7824: hyphens and operators in a query raising": [
        "memoryd/test_query.py::test_hyphens_and_operators_never_raise"
    ],
    "letta PR #1616: an edit that fails but still writes, or an empty old matching everything": [
        "memoryd/test_writer.py::test_a_refused_edit_changes_no_file",
        "memoryd/test_edits.py::test_empty_old_matches_nothing",
    ],
    "letta #3241: a limit skipped on a second write path such as accept or undo": [
        "memoryd/test_writer.py::test_undo_checks_the_limit",
        "memoryd/test_writer.py::test_review_stages_then_accept_applies_with_checks",
    ],
    "hermes #26045: an edit from a stale view clobbering a newer entry": [
        "memoryd/test_edits.py::test_replace_stale_old_refused"
    ],
}


def _functions(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)}


@pytest.mark.parametrize("item", sorted(ITEMS))
def test_every_item_has_its_tests(item: str) -> None:
    for node in ITEMS[item]:
        file, _, name = node.partition("::")
        path = ROOT / "tests" / file
        assert path.is_file(), f"{item}: {file} is missing"
        assert name in _functions(path), f"{item}: {node} is missing"


def test_every_runbook_pointer_has_an_entry() -> None:
    runbook = (ROOT / "docs" / "runbook.md").read_text(encoding="utf-8")
    entries = set(re.findall(r"^## ([a-z0-9-]+)$", runbook, re.M))
    pointers: set[str] = set()
    for path in (ROOT / "src").rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        pointers |= set(re.findall(r'runbook[ =:]+"?([a-z]+(?:-[a-z]+)+)', text))
        pointers |= set(re.findall(r"\(runbook: ([a-z-]+)\)", text))
    assert pointers, "no runbook pointers found"
    assert pointers <= entries, f"pointers without an entry: {sorted(pointers - entries)}"
    assert {
        "memoryd-start-failed",
        "memory-unavailable",
        "memoryd-unreachable",
        "memory-index-damaged",
    } <= entries
