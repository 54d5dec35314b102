"""M5d section 7's tests, by name, and the issues' own: each names the tests that cover it, and this
module fails when one of them no longer exists."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

ITEMS: dict[str, list[str]] = {
    # M5d-1
    "Open / resume: epochs 0 and 1 load epoch 1 and the carry from 0's EpochEnd": [
        "loopd/test_epochs.py::test_open_resume_loads_the_highest_epoch_and_its_carry"
    ],
    "Open / resume: a missing carry on epoch 1 is an error": [
        "loopd/test_epochs.py::test_open_resume_without_a_carry_is_an_error"
    ],
    "Turns: two User records in epoch 0 and one in epoch 1 make turns() == 3": [
        "loopd/test_epochs.py::test_turns_count_every_epoch"
    ],
    "Trust: an untrusted ToolResult in epoch 0 keeps untrusted() true": [
        "loopd/test_epochs.py::test_trust_an_untrusted_result_in_epoch_0_keeps_the_session_untrusted"
    ],
    "Prefix: property test per epoch; epoch 1's first request is the new baseline plus carry": [
        "loopd/test_epochs.py::test_prefix_property_per_epoch",
        "loopd/test_epochs.py::test_after_compaction_the_first_request_is_the_new_baseline_plus_carry",
    ],
    "Trigger: 84% leaves the epoch, 85% compacts before the next turn; an idle gap does nothing": [
        "loopd/test_epochs.py::test_trigger_at_84_percent_the_epoch_stays",
        "loopd/test_epochs.py::test_trigger_at_85_percent_the_next_turn_waits_on_compaction",
        "loopd/test_epochs.py::test_an_idle_gap_with_no_turn_does_nothing",
    ],
    "SessionFull: a context-full error compacts and retries once": [
        "loopd/test_epochs.py::test_session_full_compacts_and_retries_once_with_the_message_logged_once",
        "loopd/test_epochs.py::test_session_full_twice_is_session_full",
    ],
    "Slot: the summary on the background slot, live turns on main": [
        "loopd/test_epochs.py::test_slot_the_summary_runs_on_the_background_slot_and_leaves_the_main_cache"
    ],
    "issue 4: a memory edit in epoch 1 is in epoch 2's baseline and not epoch 1's": [
        "loopd/test_epochs.py::test_a_memory_edit_in_epoch_1_is_in_epoch_2s_baseline_not_epoch_1s",
        "test_epochs_e2e.py::test_a_long_session_goes_on_in_a_new_epoch_with_its_memory",
    ],
    "issue 4: recall of a phrase from epoch 0 still hits after compaction": [
        "test_epochs_e2e.py::test_a_long_session_goes_on_in_a_new_epoch_with_its_memory"
    ],
    "issue 4: untrusted stays true across the epoch change after a tainted recall": [
        "loopd/test_epochs.py::test_untrusted_stays_true_across_the_epoch_change_after_a_tainted_recall",
        "test_epochs_e2e.py::test_untrusted_stays_true_across_the_epoch_change",
    ],
    "issue 4: a crash at each step of section 3.5 opens on the old or the new epoch": [
        "loopd/test_epochs.py::test_a_crash_at_each_step_opens_on_the_old_or_the_new_epoch"
    ],
    # M5d-2
    "Slot: a heartbeat turn carries id_slot = background and leaves the main session's cache": [
        "loopd/test_scheduler.py::test_heartbeat_every_s_1_fires_on_the_background_slot",
        "loopd/test_scheduler.py::test_slot_a_heartbeat_between_two_main_turns_leaves_the_main_cache",
    ],
    "Heartbeat / cron: every_s = 1 fires": [
        "loopd/test_scheduler.py::test_heartbeat_every_s_1_fires_on_the_background_slot"
    ],
    "Heartbeat / cron: * * * * * fires": [
        "loopd/test_scheduler.py::test_a_job_every_minute_fires_once_in_its_minute"
    ],
    "Heartbeat / cron: a still-busy run of the same name is skipped": [
        "loopd/test_scheduler.py::test_a_still_busy_run_of_the_same_name_is_skipped"
    ],
    "Heartbeat / cron: a leftover started after a restart is failed": [
        "loopd/test_scheduler.py::test_a_leftover_started_after_a_restart_is_failed"
    ],
    "Heartbeat / cron: unknown keys in a job file refuse start": [
        "loopd/test_scheduler.py::test_unknown_keys_in_a_job_file_refuse_start"
    ],
    "ToolSummary: an http_fetch result gets a summary with its labels; messages() unchanged": [
        "loopd/test_summaries.py::test_an_opted_in_result_gets_a_summary_with_its_labels"
    ],
    "ToolSummary: recall finds the summary text and taints when untrusted": [
        "test_device_checks.py::test_a_fetched_pages_summary_is_found_by_recall_and_tagged_tainted"
    ],
    "Tiers: a trusted note with hits listed, an untrusted note listed and marked, an untrusted "
    "tiering session cannot add to memory.md": [
        "test_scheduler_e2e.py::test_a_dropped_job_runs_on_time_and_the_tiering_job_promotes_only_trusted_notes",
        "test_scheduler_e2e.py::test_a_tiering_run_that_reads_untrusted_notes_cannot_promote",
    ],
    "issue 5: each due minute fires once across restarts; missed minutes skipped after a stall": [
        "loopd/test_scheduler.py::test_each_due_minute_fires_exactly_once_across_a_restart",
        "loopd/test_scheduler.py::test_after_a_stall_missed_minutes_are_skipped_not_replayed",
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
