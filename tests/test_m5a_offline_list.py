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
    "bxctl: chat against a fake socket": [
        "bxctl/test_chat_up.py::test_one_message_prints_the_reply_escaped_and_notices_on_stderr",
        "bxctl/test_chat_up.py::test_a_failed_turn_exits_1_with_the_runbook_pointer",
    ],
    # brokerd
    "brokerd: parsing both tools": [
        "brokerd/test_arguments.py::test_good_arguments_pass",
        "brokerd/test_arguments.py::test_bad_arguments_are_named",
    ],
    "brokerd: the built-in grants present with an empty grants/": [
        "brokerd/test_grants.py::test_the_builtins_are_present_with_an_empty_or_missing_folder",
        "brokerd/test_grants.py::test_the_memory_builtins_are_the_seed_text_and_hash",
    ],
    "brokerd: a grant file naming either tool refused at load": [
        "brokerd/test_grants.py::test_a_grant_for_recall_or_memory_is_a_problem_and_every_call_is_refused"
    ],
    "brokerd: the session's state carried in memory_call": [
        "brokerd/test_service.py::test_the_session_state_travels_in_memory_call"
    ],
    "brokerd: the composite runtime": [
        "brokerd/test_service.py::test_the_session_state_travels_in_memory_call",
        "brokerd/test_service.py::test_memoryd_down_is_a_fixed_sentence",
        "brokerd/test_local.py::test_http_fetch_an_allowed_host_is_untrusted",
    ],
    "brokerd: the stricter label, with a runtime that returns a stricter and a laxer one": [
        "brokerd/test_service.py::test_labels_only_get_stricter"
    ],
    # loopd
    "loopd: the baseline with a fake memoryd": [
        "loopd/test_loop.py::test_baseline_is_system_md_a_blank_line_and_the_block_from_memory",
        "loopd/test_loop.py::test_the_baseline_is_frozen_for_the_session",
    ],
    "loopd: the refusal and its pointer": [
        "loopd/test_loop.py::test_memory_unavailable_fails_a_new_session_only",
        "loopd/test_loopd_daemon.py::test_loopd_serves_chat_without_memoryd_running_sessions_only_fail_new",
    ],
    "loopd: session_updated sent after a finished turn": [
        "loopd/test_loop.py::test_session_updated_after_a_finished_turn"
    ],
    "loopd: session_updated not sent after a turn ending in tool calls": [
        # issue 18: a failed turn is closed (it no longer ends in its tool calls); memoryd then hears of it
        "loopd/test_loop.py::test_session_updated_after_a_turn_closed_in_the_middle_of_its_tool_calls"
    ],
    # device checks (M5a section 14), end to end with real processes and the fake model server
    "device: a fact told in one session and recalled in another": [
        "test_device_checks.py::test_a_fact_told_in_one_session_is_recalled_in_another"
    ],
    "device: an add listed by bxctl memory log, in a new session and not in the one that wrote it": [
        "test_device_checks.py::test_an_add_shows_in_a_new_session_not_in_the_one_that_wrote_it"
    ],
    "device: a consolidate that moves an entry, which recall then finds": [
        "test_device_checks.py::test_a_consolidate_moves_an_entry_that_recall_then_finds"
    ],
    "device: a write after a fetched page becomes an untrusted note": [
        "test_device_checks.py::test_poisoning_by_a_fetched_page_lands_as_an_untrusted_note"
    ],
    "device: bxctl memory undo of the latest edit": ["test_device_checks.py::test_undo_of_the_latest_edit"],
    "hermes #42405: a tool-call loop that never ends the turn": [
        "loopd/test_loop.py::test_the_tool_call_cap_ends_the_turn_with_a_reply"
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
