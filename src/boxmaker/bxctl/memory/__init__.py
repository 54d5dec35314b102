"""``bxctl memory …``: the owner's view of memoryd (M5a section 10; DESIGN 10.5).

Each command talks to memoryd's admin socket (``--memory-socket``, default
``{home}/run/owner-memory/admin.sock``). Entries are printed escaped; listings take ``--json``.

The commands live by family: `edits` (log, undo, pending, accept, reject, add, note), `views` (files,
show, search; and the root ``bxctl reindex``), `items` (items, item, supersede, status, reconcile),
`review` (review, tiers, feedback), `withdrawal` (withdraw, reinstate, controls), `bundle` (archive,
export, import, replay, repair, verify), `dream` (warm, dream), `erase` (erase, erasures) and `proposals`.
Their shared options are in `boxmaker.bxctl.options`.
"""

from __future__ import annotations

import click

from boxmaker.bxctl.memory import (
    bundle,
    dream,
    edits,
    erase,
    identity,
    items,
    proposals,
    review,
    views,
    withdrawal,
)


@click.group(name="memory")
def memory() -> None:
    """Look at and steer the agent's memory.

    \b
    Example:
        bxctl memory files
        bxctl memory search "launch window"
    """


for _command in (
    edits.memory_log,
    edits.memory_undo,
    edits.memory_pending,
    edits.memory_accept,
    edits.memory_reject,
    edits.memory_add,
    identity.memory_remove,
    identity.memory_replace,
    identity.memory_edit,
    edits.memory_note,
    views.memory_files,
    views.memory_show,
    views.memory_search,
    items.memory_items,
    items.memory_item,
    items.memory_supersede,
    items.memory_status,
    items.memory_reconcile,
    review.memory_review,
    review.memory_tiers,
    review.memory_feedback,
    withdrawal.memory_withdraw,
    withdrawal.memory_reinstate,
    withdrawal.memory_controls,
    bundle.memory_archive,
    bundle.memory_export,
    bundle.memory_import,
    bundle.memory_replay,
    bundle.memory_repair,
    bundle.memory_verify,
    dream.memory_warm,
    dream.memory_dream,
    erase.memory_erase,
    erase.memory_erasures,
    proposals.memory_proposals,
):
    memory.add_command(_command)
