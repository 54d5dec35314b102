"""memoryd's requests, answered without sockets (M5a sections 4-7).

`Memoryd` owns the files (`store`, `journal`, `writer`) and the index (`index`, `recall`), and answers
every message kind its three sockets take:

| kind | from | answer |
|---|---|---|
| memory_block | loopd | memory_block_reply, or `error` memory-unavailable |
| session_updated | loopd | ok, once the new records are indexed |
| memory_call | brokerd | tool_response (a rule's refusal is a tool_response, never an error) |
| reindex | bxctl | reindexed |
| memory_admin | bxctl | memory_admin_reply (`admin` module) |

Withdrawal (seed 003 section 12.2): `controls` gives the `Exclusion` every exposure applies (recall,
the owner's search, the block, the indexer, tiers); `withdrawals` appends control events (the owner's
``withdraw``/``reinstate``, a clean session's `memory` action ``forget``) and answers with receipts.
Seed 003 (issue 6) adds here: the item store (`items.ItemStore`), the generated projections
(index.md and topics/, rewritten after every journal commit that carried item events or controls, and
at start), autodream's maintenance actions and staging (`dream.Dream`), the archive timer
(`archive.ArchiveTimer`, `[archive] enabled`), the agent's read path
(`memory` actions `index` and `topic`), export/import (`bundle`) and replay (`replay`). Withdrawal
reaches all of them through one predicate, `Memoryd.exclusion_for` (the controls' exclusion of a
memory folder).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from boxmaker.memoryd import admin, sentences
from boxmaker.memoryd.bundle import format as bundle
from boxmaker.memoryd.config import Config
from boxmaker.memoryd.dream import dream
from boxmaker.memoryd.files import block, notes
from boxmaker.memoryd.files.entries import IDENTITY_FILES
from boxmaker.memoryd.files.journal import Change, Journal
from boxmaker.memoryd.files.store import FileOverLimit, FileUnreadable, Store, steering_problem
from boxmaker.memoryd.index import retrievals
from boxmaker.memoryd.index.index import Index
from boxmaker.memoryd.index.recall import Recaller
from boxmaker.memoryd.items import archive, projections, replay
from boxmaker.memoryd.items.store import ItemStore
from boxmaker.memoryd.review import feedback as metamemory
from boxmaker.memoryd.review import proposals, tiers
from boxmaker.memoryd.sentences import Refusal, identity, review, withdrawal
from boxmaker.memoryd.sentences import files as files_sentences
from boxmaker.memoryd.withdrawal.controls import Controls
from boxmaker.memoryd.withdrawal.exclusion import withdrawn_entries
from boxmaker.memoryd.withdrawal.receipts import Receipt, Withdrawals
from boxmaker.memoryd.withdrawal.records import Scope
from boxmaker.memoryd.write import actions as arguments
from boxmaker.memoryd.write.writer import Answer, Caller, Writer
from boxmaker.proto import fsio
from boxmaker.proto.errors import InvalidBody, ProtocolError
from boxmaker.proto.ids import OWNER_SESSION
from boxmaker.proto.labels import DataClass, Label
from boxmaker.proto.messages import (
    Body,
    MemoryAdmin,
    MemoryBlock,
    MemoryBlockReply,
    MemoryCall,
    Ok,
    Reindex,
    Reindexed,
    SessionUpdated,
    ToolResponse,
)

log = logging.getLogger("boxmaker.memoryd")

#: Message kinds each socket takes (M5a section 7).
LOOP_KINDS = frozenset({"memory_block", "session_updated"})
BROKER_KINDS = frozenset({"memory_call"})
ADMIN_KINDS = frozenset({"reindex", "memory_admin"})


class MemoryUnavailable(ProtocolError):
    """Raised when the block cannot be served: a file is unreadable or over its limit (M5a section 4)."""

    code = "memory-unavailable"
    runbook = "memory-unavailable"


def _not_the_owner(kind: str, session: str) -> None:
    """The session id "owner" names the owner's own writes in journals and notes; no session of an
    agent may carry it (DESIGN 10.4).

    Raises:
        InvalidBody: when `session` is "owner".
    """
    if session == OWNER_SESSION:
        raise InvalidBody(kind, f"the session id {OWNER_SESSION!r} is reserved for the owner's own commands")


def utc_now() -> dt.datetime:
    """The current time, aware, in UTC."""
    return dt.datetime.now(dt.UTC)


class Memoryd:
    """The daemon's state and request handling, independent of sockets.

    Args:
        config: the resolved configuration.
        now: the clock (aware UTC datetimes), a parameter so tests can set the time.
    """

    def __init__(
        self, config: Config, now: Callable[[], dt.datetime] = utc_now, archive_poll: float = 300.0
    ) -> None:
        layout = config.layout
        self.config = config
        self.now = now
        self.store = Store(layout.memory, config.soul_starter)
        self.journal = Journal(layout.memory, now)
        self.controls = Controls(layout.memory)
        self.index = Index(
            layout.index / "memory.sqlite3",
            layout.sessions,
            self.store.notes_path,
            config.max_class,
            self.controls.exclusion,
        )
        self.writer = Writer(
            self.store, self.journal, now, config.review, self.index.add_notes, sessions=layout.sessions
        )
        self.items = ItemStore(layout.memory)
        self.recaller = Recaller(
            self.index,
            layout.memory / "recalls",
            now,
            exclusion=self.controls.exclusion,
            items=self.items.items,
            turns=retrievals.Turns(layout.sessions),
        )
        self.withdrawals = Withdrawals(
            self.controls,
            store=self.store,
            journal=self.journal,
            lock=self.writer.lock,
            now=now,
            sessions=layout.sessions,
            on_change=self.index.rebuild_in_background,
        )
        #: Which items are withdrawn, for a memory folder (seed 003 section 12.2): applied before the
        #: projections, the read path and export show anything. The withdrawal module plugs in here.
        self.exclusion_for: Callable[[Path], projections.Excluded] = _withdrawn_items
        self.archive_timer = (
            archive.ArchiveTimer(self._archive_by_timer, now, self._last_archive_day, archive_poll)
            if config.archive
            else None
        )
        #: Autodream's maintenance actions and staging (seed 003 section 14; `dream`).
        self.dream = dream.Dream(self)
        #: Erasure ids handed out by `erase_plan` for an erasure about to run (seed 003 section 12.3).
        self.reserved_erasures: set[str] = set()

    def open(self) -> list[str]:
        """Create missing files, complete an interrupted edit, open the index and start bringing it
        up to date in the background (`Index.warm_up`).

        Returns:
            The names of the files created.

        Raises:
            OSError, FileUnreadable, IndexUnusable: the start-up failures (memoryd-start-failed).
        """
        created = self.store.ensure()
        self.writer.open()
        self.journal.listeners.append(self._after_commit)
        self.refresh_projections()
        self.index.open()
        self.index.warm_up()
        if self.archive_timer is not None:
            self.archive_timer.start()
        return created

    def close(self) -> None:
        """Stop the archive timer (a run in progress finishes) and close the index."""
        if self.archive_timer is not None:
            self.archive_timer.stop()
        self.index.close()

    def handle(self, kind: str, body: Body) -> Body:
        """Answer one validated request.

        Raises:
            MemoryUnavailable: for `memory_block` when the block cannot be served.
        """
        if isinstance(body, MemoryBlock):
            return MemoryBlockReply(self.block().text)
        if isinstance(body, SessionUpdated):
            _not_the_owner(kind, body.session)
            self.index.catch_up(body.session)
            return Ok()
        if isinstance(body, MemoryCall):
            _not_the_owner(kind, body.request.session)
            return self.call(body)
        if isinstance(body, Reindex):
            counts = self.index.rebuild()
            return Reindexed(logs=counts.logs, records=counts.records, notes=counts.notes)
        if isinstance(body, MemoryAdmin):
            return admin.handle(self, body)
        raise ProtocolError(f"memoryd does not answer {kind}")

    def block(self) -> block.Block:
        """The memory block as a new session would get it.

        Raises:
            MemoryUnavailable: a file is unreadable or over its limit.
        """
        try:
            soul = self.store.read_soul()
            conventions = self.store.read_conventions()
            files = [self.store.read_identity(spec) for spec in IDENTITY_FILES.values()]
            withdrawn = self.withdrawn_entries({f.spec.name: f.entries for f in files})
        except (FileUnreadable, FileOverLimit, OSError) as exc:
            log.error("memory-unavailable: %s", exc)
            raise MemoryUnavailable(f"the memory block is unavailable: {exc}") from None
        steering = steering_problem(soul, conventions)
        if steering is not None:
            log.error("memory-unavailable: %s", steering)
            raise MemoryUnavailable(f"the memory block is unavailable: {steering}")
        files.insert(0, conventions)
        for file in files:
            if file.size > file.spec.limit:
                why = FileOverLimit(file.spec.name, file.size, file.spec.limit)
                log.error("memory-unavailable: %s", why)
                raise MemoryUnavailable(f"the memory block is unavailable: {why}")
        rendered = block.render(soul, files, withdrawn)
        for item in rendered.left_out:
            if item.rule == block.WITHDRAWN:
                log.info("left out of the block: a withdrawn entry of %s", item.file)
                continue
            log.warning("left out of the block: an entry of %s refused by rule %s", item.file, item.rule)
        return rendered

    def withdrawn_entries(
        self, files: dict[str, tuple[str, ...]] | None = None
    ) -> frozenset[tuple[str, str]]:
        """The identity entries (file, text) withdrawn now (`controls.withdrawn_entries`); `files`
        are the identity files' entries by name (read when not given).

        Raises:
            OSError, FileUnreadable: a file cannot be read.
        """
        excluded = self.controls.exclusion()
        if not excluded:
            return frozenset()
        if files is None:
            files = {s.name: self.store.read_identity(s).entries for s in IDENTITY_FILES.values()}
        journal = self.journal.entries_newest_first()
        return frozenset(withdrawn_entries(excluded, dict(files), journal))

    def call(self, call: MemoryCall) -> ToolResponse:
        """Run a decided `recall` or `memory` call with the session's state (M5a sections 5 and 8)."""
        request = call.request
        label = Label(max(call.taint, DataClass.PRIVATE), call.untrusted)
        if request.tool == "recall":
            return self._recall(call)
        if request.tool != "memory":
            refusal = identity.arguments(f"memoryd runs recall and memory, not {request.tool}")
            return ToolResponse(request.call_id, refusal.sentence, refusal.code, None)
        decided = self.dream.call(
            call
        )  # autodream: maintenance actions and what a maintenance run is refused
        if decided is not None:
            return decided
        if request.arguments.get("action") == "tiers":
            return self._tiers(call)
        if request.arguments.get("action") == "forget":
            return self._forget(call)
        if request.arguments.get("action") in ("index", "topic"):
            return self._read(call)
        if request.arguments.get("action") == "propose":
            return self._propose(call, label)
        if request.arguments.get("action") == "feedback":
            return self._feedback(call)
        parsed = arguments.parse_memory(request.arguments)
        if isinstance(parsed, Refusal):
            answer = Answer.refused(parsed)
        else:
            answer = self.write(
                lambda: self.writer.memory(Caller(request.session, request.call_id, label), parsed)
            )
        return ToolResponse(request.call_id, answer.output, answer.code, None)

    def _propose(self, call: MemoryCall, label: Label) -> ToolResponse:
        """The `memory` tool's `propose` action (seed 003 sections 17 and 23.5): a proposal waiting
        for the owner, labelled by the session (a tainted session's is untrusted); `proposals`."""
        request = call.request
        parsed = arguments.parse_propose(request.arguments)
        if isinstance(parsed, Refusal):
            return ToolResponse(request.call_id, parsed.sentence, parsed.code, None)
        caller = Caller(request.session, request.call_id, label)
        answer = proposals.propose(self, caller, parsed)
        return ToolResponse(request.call_id, answer.output, answer.code, None)

    def write(self, apply: Callable[[], Answer]) -> Answer:
        """Run a write, turning an unreadable file into a refusal the model can read."""
        try:
            return apply()
        except FileUnreadable as exc:
            log.error("memory-unavailable: %s", exc)
            return Answer(f"{exc}; nothing was written", "refused:unavailable")

    def tiers_listing(self, untrusted: bool) -> tiers.Listing | Refusal:
        """The tiering listing (M5d 4.4): identity entries and notes with their recall counts; the
        text of untrusted notes only when `untrusted`.

        Returns ``refused:unavailable`` when a memory file or the recall log cannot be read.
        """
        try:
            read = {s.name: self.store.read_identity(s).entries for s in IDENTITY_FILES.values()}
            found = notes.parse(self.store.read_notes())
            tallied = tiers.tally(retrievals.read_log(self.recaller.recalls))
            excluded = self.controls.exclusion()
            hidden = self.withdrawn_entries(read)
        except (FileUnreadable, OSError) as exc:
            return Refusal("refused:unavailable", f"{exc}; nothing to list")
        files = [(name, [e for e in entries if (name, e) not in hidden]) for name, entries in read.items()]
        shown = [n for n in found if not excluded.note(n)]
        return tiers.listing(files, shown, tallied, untrusted=untrusted)

    def _forget(self, call: MemoryCall) -> ToolResponse:
        """The `memory` tool's `forget` action (seed 003 sections 12.1-12.2): a session that has not
        read untrusted content withdraws captured items and sessions on the owner's request; the
        answer is the surface receipt. A tainted session is refused (``refused:tainted``)."""
        request = call.request
        if call.untrusted:
            refusal = withdrawal.FORGET_TAINTED
            return ToolResponse(request.call_id, refusal.sentence, refusal.code, None)
        parsed = arguments.parse_forget(request.arguments)
        if isinstance(parsed, Refusal):
            return ToolResponse(request.call_id, parsed.sentence, parsed.code, None)
        scope = Scope(tuple(parsed.items), (), tuple(parsed.sessions))
        result = self.forget(scope, parsed.reason, session=request.session, call=request.call_id)
        if isinstance(result, Refusal):
            return ToolResponse(request.call_id, result.sentence, result.code, None)
        return ToolResponse(request.call_id, result.text, "ok", None)

    def forget(
        self,
        scope: Scope,
        reason: str,
        *,
        session: str = "owner",
        call: str = "",
        supersedes: str | None = None,
    ) -> Receipt | Refusal:
        """Withdraw `scope` (`withdrawal.Withdrawals.withdraw`), a file that cannot be read
        becoming ``refused:unavailable`` (nothing recorded)."""
        try:
            return self.withdrawals.withdraw(scope, reason, session=session, call=call, supersedes=supersedes)
        except (FileUnreadable, OSError) as exc:
            log.error("withdrawal refused: %s", exc)
            return Refusal("refused:unavailable", f"{exc}; nothing was recorded")

    def _feedback(self, call: MemoryCall) -> ToolResponse:
        """The `memory` tool's ``feedback`` action (seed 003 section 23.2): a session's verdict on how
        the items of one of its own retrievals served, recorded as is with ``recorded_by: session``
        (a self-rating: weak evidence for review). Any session may record; a tainted one's journal
        line says untrusted."""
        request = call.request
        answer = self.record_feedback(
            request.arguments, session=request.session, call=request.call_id, untrusted=call.untrusted
        )
        return ToolResponse(request.call_id, answer.output, answer.code, None)

    def record_feedback(
        self,
        arguments: dict[str, Any],
        *,
        session: str = OWNER_SESSION,
        call: str = "",
        untrusted: bool = False,
    ) -> Answer:
        """Check and record one feedback event (`metamemory`): one journal commit (action
        ``feedback``) appending it to feedback.jsonl. Never touches items.jsonl."""
        parsed = metamemory.parse_args(arguments)
        if isinstance(parsed, Refusal):
            return Answer.refused(parsed)
        recalls = self.recaller.recalls
        turn = self.recaller.turns.turn_of(session) if self.recaller.turns and session != OWNER_SESSION else 0
        try:
            retrieval = retrievals.find_retrieval(recalls, parsed.retrieval)
            with self.writer.lock:
                memory_dir = self.config.layout.memory
                moment = self.now()
                ident = metamemory.next_feedback_id(metamemory.read_feedback(memory_dir), moment.date())
                event = metamemory.build_event(
                    parsed, retrieval, session=session, turn=turn, ident=ident, moment=moment
                )
                if isinstance(event, Refusal):
                    return Answer.refused(event)
                line = self.journal.commit(metamemory.change(event, session, call, untrusted))
        except OSError as exc:
            log.error("feedback not recorded: %s", exc)
            return Answer(f"{exc}; nothing was recorded", "refused:unavailable")
        text = review.feedback_recorded(ident, event["memory_item_ids"], event["verdict"])
        return Answer(text, sentences.OK, str(line["id"]))

    def _tiers(self, call: MemoryCall) -> ToolResponse:
        """The `memory` tool's `tiers` action: the listing as a tool result, labelled with the strictest
        label of what it shows (DESIGN 11), so reading untrusted notes taints the session."""
        request = call.request
        parsed = arguments.parse_tiers(request.arguments)
        if isinstance(parsed, Refusal):
            return ToolResponse(request.call_id, parsed.sentence, parsed.code, None)
        result = self.tiers_listing(parsed.untrusted)
        if isinstance(result, Refusal):
            return ToolResponse(request.call_id, result.sentence, result.code, None)
        shown = result.data["label"]
        label = Label(DataClass(shown["class"]), bool(shown["untrusted"]))
        return ToolResponse(request.call_id, result.text, "ok", label)

    def _recall(self, call: MemoryCall) -> ToolResponse:
        request = call.request
        parsed = arguments.parse_recall(request.arguments)
        if isinstance(parsed, Refusal):
            return ToolResponse(request.call_id, parsed.sentence, parsed.code, None)
        result = self.recaller.recall(parsed.query, parsed.k, session=request.session)
        if isinstance(result, Refusal):
            return ToolResponse(request.call_id, result.sentence, result.code, None)
        return ToolResponse(request.call_id, result.text, "ok", result.label)

    # Seed 003: projections, archive, export/import, replay -------------------------------------

    def excluded(self) -> projections.Excluded:
        """The withdrawal predicate for this home's items, as the controls stand now."""
        return self.exclusion_for(self.config.layout.memory)

    def render_projections(self) -> projections.Rendered:
        """index.md and the topic pages as the item store and the controls stand now.

        Raises:
            OSError: when items.jsonl cannot be read.
        """
        return projections.render(self.items.items().values(), self.excluded())

    def refresh_projections(self) -> None:
        """Rewrite index.md and the topics where they changed; a failure is logged (the files are
        generated again after the next item change and at every start)."""
        try:
            changed = projections.write(self.config.layout.memory, self.render_projections())
        except OSError as exc:
            log.error("cannot write memory/index.md or memory/topics/: %s", exc)
            return
        if changed:
            log.debug("projections written: %s", ", ".join(changed))

    def _after_commit(self, line: dict[str, Any]) -> None:
        if line.get("events") or line.get("controls"):
            self.refresh_projections()

    def archive_now(self, by: str) -> archive.Run:
        """Run the archive now (seed 003 section 13), under the write lock; `by` is "owner" or the
        timer's name.

        Raises:
            OSError: when a write fails (the journal's intent completes it at the next start).
        """
        with self.writer.lock:
            return archive.run(self.config.layout.memory, self.items.items(), self.journal, self.now(), by)

    def _archive_by_timer(self) -> None:
        done = self.archive_now(archive.TIMER)
        log.info("archive timer: %s", done.sentence())

    def _last_archive_day(self) -> dt.date | None:
        with self.writer.lock:
            return archive.last_run_day(self.journal)

    def read_page(self, topic: str | None) -> projections.Page | Refusal:
        """index.md (`topic` None) or a topic page, rendered now with withdrawn items left out; an
        unknown topic is ``refused:not-found`` naming the known ones."""
        try:
            rendered = self.render_projections()
        except OSError as exc:
            return Refusal("refused:unavailable", f"items.jsonl cannot be read ({exc}); nothing to show")
        if topic is None:
            return rendered.index
        name = topic.removeprefix("topics/").removesuffix(".md")
        page = rendered.topics.get(name)
        if page is None:
            return files_sentences.unknown_topic(topic, sorted(rendered.topics))
        return page

    def _read(self, call: MemoryCall) -> ToolResponse:
        """The `memory` tool's `index` and `topic` actions (seed 003 checklist 2): the page's text,
        labelled with the strictest label of the items it shows (DESIGN 11), so reading untrusted items
        taints the session."""
        request = call.request
        parsed = arguments.parse_read(request.arguments)
        if isinstance(parsed, Refusal):
            return ToolResponse(request.call_id, parsed.sentence, parsed.code, None)
        page = self.read_page(parsed.topic if isinstance(parsed, arguments.TopicArgs) else None)
        if isinstance(page, Refusal):
            return ToolResponse(request.call_id, page.sentence, page.code, None)
        return ToolResponse(request.call_id, page.text, "ok", page.label)

    def export(self, path: Path, omit_withdrawn: bool) -> bundle.Export | Refusal:
        """Write a bundle of the item store to `path` (a new file) and journal it (action export).

        Returns ``refused:exists`` when `path` exists, ``refused:unavailable`` when it cannot be
        written (the journal line then still records the attempt, erring towards a known copy).
        """
        if path.exists() or path.is_symlink():
            return files_sentences.export_exists(str(path))
        if not path.parent.is_dir():
            return files_sentences.unwritable(str(path), "its folder does not exist")
        with self.writer.lock:
            try:
                events = self.items.events()
                controls = bundle.read_controls(self.config.layout.memory)
            except OSError as exc:
                return files_sentences.unwritable(str(path), f"the item store cannot be read: {exc}")
            made = bundle.build_export(events, controls, self.excluded(), omit_withdrawn, self.now())
            entry = {
                "session": OWNER_SESSION,
                "call": "",
                "action": "export",
                "file": str(path),
                "where": "export",
                "before": [],
                "after": [],
                "untrusted": False,
                "ids": made.ids,
                "exported_controls": made.controls,
            }
            self.journal.commit(Change(entry))
        data = json.dumps(made.bundle, ensure_ascii=True, indent=1).encode("ascii") + b"\n"
        try:
            bundle.write_new(path, data)
        except FileExistsError:
            return files_sentences.export_exists(str(path))
        except OSError as exc:
            return files_sentences.unwritable(str(path), exc.strerror or str(exc))
        return made

    def import_bundle(self, path: Path, trusted: bool = False) -> tuple[bundle.ImportPlan, str] | Refusal:
        """Validate and import a bundle (see `bundle`): one journal commit (action import); its items
        untrusted unless `trusted`. With controls, the index is rebuilt in the background, as after a
        withdrawal.

        Returns the plan and the edit id, or the refusal (nothing written).
        """
        loaded = bundle.read_bundle(path)
        if isinstance(loaded, Refusal):
            return loaded
        with self.writer.lock:
            try:
                events = self.items.events()
                present = self.items.items()
                controls = bundle.read_controls(self.config.layout.memory)
                position = len(notes.parse(self.store.read_notes()))
            except (OSError, FileUnreadable) as exc:
                return Refusal("refused:unavailable", f"{exc}; nothing was imported")
            plan = bundle.plan_import(loaded, present, controls, trusted)
            if isinstance(plan, Refusal):
                return plan
            fields, appends, added = bundle.import_appends(
                self.config.layout.memory,
                plan=plan,
                events=events,
                first_position=position,
                notes_need_newline=not fsio.ends_with_newline(self.store.notes_path),
                bundle_name=path.name,
                moment=self.now(),
            )
            entry = {
                "session": OWNER_SESSION,
                "call": "",
                "action": "import",
                "file": path.name,
                "where": "items.jsonl",
                "before": [],
                "after": [],
                "untrusted": False,
                **fields,
            }
            line = self.journal.commit(Change(entry, appends))
            if added:
                data = next(a.data for a in appends if a.path == "notes.md")
                self.writer.on_notes(added, data)
        if plan.controls:
            self.withdrawals.on_change()
        return plan, str(line["id"])

    def replay_into(self, folder: Path) -> list[str] | Refusal:
        """Replay the journal into `folder` (new or empty); returns the files written there."""
        if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
            return files_sentences.replay_not_empty(str(folder))
        lines = list(self.journal.entries_newest_first())
        lines.reverse()
        try:
            replay.replay(lines, folder, self.exclusion_for)
        except OSError as exc:
            return files_sentences.unwritable(str(folder), exc.strerror or str(exc))
        return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


def _withdrawn_items(folder: Path) -> projections.Excluded:
    """Which items of a memory folder are withdrawn (seed 003 section 12.2): its controls' exclusion."""
    return Controls(folder).exclusion().item
