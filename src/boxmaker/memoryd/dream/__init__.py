"""Autodream: the maintenance actions of the `memory` tool, memoryd's checks, and staging (seed 003
section 14, checklist 4 and 5; DESIGN 8 and 11).

A daily job (``{home}/jobs/dream.toml`` with ``maintenance = true``; the starter is the package's
``config/jobs/dream.toml.example`` and ``config/dream.md``) runs a session that distils the day's
archive into the item store through these actions::

    {"action": "dream-input", "date"?: "YYYY-MM-DD", "untrusted"?: bool}
    {"action": "supersede", "old": item id, "new": item id}
    {"action": "mark", "id": item id, "status": "pending-cleanup"}
    {"action": "cool", "id": item id}
    {"action": "merge", "ids": [2..20 item ids], "text": the consolidated lesson}
    {"action": "assign", "id": item id, "topic": name, "triggers"?: [at most 8 strings]}

New items of a pass are ordinary ``note`` captures.

Who may call them (`actions.maintenance_job`): the session id is ``job-<name>-t<unix seconds>``, the
owner-written ``{home}/jobs/<name>.toml`` says ``maintenance = true``, and loopd's ledger
``{home}/jobs/runs.jsonl`` holds that session as a run of that job that has started and not ended.
Anything else is ``refused:maintenance`` (`sentences.dream.maintenance_only`); loopd never lets a chat take a
``job-…`` or ``heartbeat`` id, so a live session cannot claim one, and it lists these actions only in
such a run's tools. A maintenance run is also refused the identity actions (``add``, ``replace``,
``remove``, ``consolidate``) and ``forget`` (``refused:maintenance``, `sentences.dream.maintenance_identity`):
it never writes memory.md, user.md or conventions (seed 14.1).

``dream-input`` answers, as a tool result labelled with the strictest label of what it shows
(`store.label_of`; never as user text), with: a page of its scope (by default every archived item,
not withdrawn, that no ``autodream`` journal line's ``ids`` names yet, oldest archive day first:
`undistilled`, which review's archive section counts too; with ``date``, every such item of
``archive/<date>.md``, shown before or not), at most `INPUT_ITEMS` items and `INPUT_CHARS` characters,
saying how many more remain (``K more: call dream-input again after acting on these``); only the
shown ones count as distilled, so repeated calls page through; every withdrawn item left out (a
line gives how many, by id only), the state subjects
with their active items, and index.md. Untrusted items are listed without text or subject unless the
call says ``"untrusted": true`` (then the answer is untrusted, and so the session: a tainted pass), and
index.md is then rendered from the trusted items only. The call is journalled ``autodream`` (with the
date, the ids shown and the ids left out), or, with nothing eligible, ``autodream-skip`` and an answer
saying so.

Every other action goes through `itemops` with the run's `Caller` and the withdrawal predicate
(withdrawn: ``refused:withdrawn``; a tainted run never changes a trusted item: ``refused:tainted``;
supersede only between active ``state`` items of one exact subject; ``mark`` sets ``pending-cleanup``
only, ``stale`` being the owner's: ``refused:denied``; ``cool``/``merge`` knowledge only:
``refused:kind``). Nothing is deleted, no knowledge text is overwritten.

Staging (``[dream] stage = true`` in memoryd.toml, off by default): the five changing actions are
first run with every check against the store as it is (`actions.dry_run`, nothing written): an
invalid one is refused at once with its code; a valid one is recorded to
``memory/dream/<session>.jsonl`` (``{"event": "staged", "time", "session", "call", "taint",
"untrusted", "arguments"}``) and answered ``staged``; the owner's ``bxctl memory dream show [SESSION]``,
``apply SESSION`` (each action with the same checks, against the store as it is then; an ``applied``
line with the results; journal action ``dream-apply``) and ``discard SESSION`` (a ``discarded`` line;
``dream-discard``).
"""
