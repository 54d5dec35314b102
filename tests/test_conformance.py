"""Seed 003 section 21, the validation checklist: all 21 checks, one test each, named
`test_checklist_<N>_<what>`, against real memoryd, brokerd and loopd started once for the module by
`bxctl up`, with the fake llama-server making the model's tool calls. Each test looks through the
daemons' sockets, bxctl and the files. docs/conformance.md states the level this proves (memory:L5),
the deeper tests of each check, and what is not validated end to end; the last test here keeps the
doc and the tests in step.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from boxmaker.memoryd.sentences import capture, dream
from conftest import spawn_memoryd, stop, wait_until_answers
from fakes.llama_server import FakeReply
from protocol_helpers import (
    RETRIEVAL,
    Box,
    call,
    captured,
    cite_retrieval,
    holding,
    home_files,
    note_call,
    obeys_conventions,
    propose_call,
    reads_memory_for_prior_decisions,
    running,
    snapshot,
    tool_results,
)

TESTS = Path(__file__).resolve().parent
LESSON = "Backups fail when the backup disk is mounted read-only."
DUP_A = "Run the backup before an upgrade."
DUP_B = "Always take a backup before upgrading."
MERGED = "Take a backup before every upgrade."
REFUTED = "Restarting the router fixes the VPN."
HOT = "Always confirm the host before a reboot."
EXPLORED = "The fusion shortcut works with a cold start."
TAPE = "The tape library answers on port 9441."
RULE = "Deploys wait for a green backup check."
SECRET = "ZEBRA-7741-QUOKKA"
MEMWD = re.compile(r"memwd-\d{4}-\d{2}-\d{2}-\d{3}")


@pytest.fixture(scope="module")
def box() -> Iterator[Box]:
    with running("bx-conformance-", n_ctx=32768) as state:
        yield state


def recall(box: Box, session: str, query: str) -> str:
    """What the agent's `recall` call returned."""
    box.chat(
        session, "Look it up.", FakeReply(tool_calls=[("recall", {"query": query})]), FakeReply(content=".")
    )
    return str(tool_results(box, session)[-1]["content"])


@pytest.fixture(scope="module")
def withdrawn(box: Box) -> dict[str, str]:
    """An exploration the agent noted, then withdrew on the owner's word with `memory` `forget`."""
    ident = captured(box, "chat-explore", EXPLORED)
    box.chat(
        "chat-forget",
        "Forget the fusion shortcut; it was a failed idea.",
        call(action="forget", items=[ident], sessions=["chat-explore"], reason="failed-exploration"),
        FakeReply(content="Withdrawn."),
    )
    [receipt] = tool_results(box, "chat-forget")
    [withdrawal] = set(MEMWD.findall(receipt["content"]))
    return {"id": ident, "receipt": receipt["content"], "withdrawal": withdrawal}


@pytest.fixture(scope="module")
def dreamt(box: Box, withdrawn: dict[str, str]) -> dict[str, Any]:
    """A day the agent captured (lessons, near-duplicates, a refuted lesson, a memory.md entry),
    archived, then distilled by a maintenance job the fake model drives; one bad action of each kind."""
    ids = {
        name: captured(box, f"chat-{name.replace('_', '-')}", text)
        for name, text in (("lesson", LESSON), ("dup_a", DUP_A))
    }
    ids |= {
        name: captured(box, f"chat-{name.replace('_', '-')}", text)
        for name, text in (("dup_b", DUP_B), ("refuted", REFUTED))
    }
    box.chat(
        "chat-hot", "Remember this rule.", call(action="add", file="memory", text=HOT), FakeReply(content=".")
    )
    box.bxctl("memory", "archive")
    before = {row["id"]: row for row in box.items("--all")}
    day = before[ids["lesson"]]["date"]
    archive = box.home / "memory" / "archive" / f"{day}.md"
    archived, memory_md = archive.read_bytes(), (box.home / "memory" / "memory.md").read_bytes()
    results = box.run_job(
        "dream",
        call(action="dream-input"),
        call(action="assign", id=ids["lesson"], topic="Backups", triggers=["backup disk"]),
        call(action="merge", ids=[ids["dup_a"], ids["dup_b"]], text=MERGED),
        call(action="mark", id=ids["refuted"], status="pending-cleanup"),
        call(action="supersede", old=ids["refuted"], new=ids["lesson"]),  # knowledge is never superseded
        call(action="cool", id=withdrawn["id"]),  # a withdrawn item is out of reach
        call(action="add", file="memory", text="Trust every note."),  # memory.md is never autodream's
        FakeReply(content="Pass done."),
    )
    return {
        "ids": ids,
        "before": before,
        "day": day,
        "archive": archive,
        "archived": archived,
        "memory_md": memory_md,
        "results": [r.content for r in results],
    }


@pytest.fixture(scope="module")
def recalled(box: Box) -> dict[str, Any]:
    """The agent recalled an item and rated the retrieval misleading (`memory` `feedback`), once."""
    ident = captured(box, "chat-tape", TAPE)
    memory = box.home / "memory"
    hot = {n: (memory / n).read_bytes() for n in ("soul.md", "conventions.md", "memory.md", "user.md")}
    proposals = box.bxctl("memory", "proposals", "--all", "--json").stdout
    item_before = box.bxctl("memory", "item", ident).stdout
    store = (memory / "items.jsonl").read_bytes()
    box.chat(
        "chat-tape-ask",
        "Which port does the tape library use?",
        FakeReply(tool_calls=[("recall", {"query": "tape library port"})]),
        cite_retrieval("misleading", role="action-premise", outcome="Port 9441 was closed; it is 9442 now."),
        FakeReply(content="It was 9441; it seems to have moved."),
    )
    shown, rated = tool_results(box, "chat-tape-ask")
    [retrieval] = RETRIEVAL.findall(shown["content"])
    return {
        "id": ident,
        "retrieval": retrieval,
        "rated": rated["content"],
        "hot": hot,
        "store": store,
        "proposals": proposals,
        "item": item_before,
    }


# The checks ---------------------------------------------------------------------------------------


def test_checklist_1_a_fresh_session_can_locate_the_memory_root(box: Box) -> None:
    """A new session's baseline carries the memory block (the hot files by name) and the tools that
    reach the rest: `memory` (index, topic, note, forget, ...) and `recall`."""
    box.chat("chat-fresh", "Hello.", FakeReply(content="Hello."))
    baseline = box.baseline("chat-fresh")
    for hot in ("# soul.md", "# conventions.md (", "# memory.md (", "# user.md ("):
        assert hot in baseline["system"]
    tools = {t["function"]["name"]: t["function"] for t in baseline["tools"]}
    actions = set(tools["memory"]["parameters"]["properties"]["action"]["enum"])
    assert {"note", "index", "topic", "forget", "feedback", "propose"} <= actions
    assert "recall" in tools


def test_checklist_2_the_agent_knows_when_to_read_the_index(box: Box, dreamt: dict[str, Any]) -> None:
    """Every baseline's rules say when to read memory. A model that acts only on its context, asked
    about a prior decision in a fresh session, reads the index with `memory` `index`, follows the
    index's "Read when" trigger to the topic page, recalls, and answers from the page: the index's
    text reaches its context as the tool result. Asked about nothing earlier, it reads nothing."""
    asked = "What did we decide about the backup disk?"
    done = box.chat("chat-index", asked, *[reads_memory_for_prior_decisions] * 4)
    system = box.baseline("chat-index")["system"]
    assert "memory index, topic" in system
    assert "earlier preferences, decisions or work" in system
    index = (box.home / "memory" / "index.md").read_text()
    topic = (box.home / "memory" / "topics" / "backups.md").read_text()
    assert "- backups.md — Read when: backup disk" in index
    assert dreamt["ids"]["lesson"] in topic
    seen = [
        body for path, body in box.model.requests if path == "/v1/chat/completions" and asked in str(body)
    ]
    context = [[m["content"] for m in body["messages"] if m["role"] == "tool"] for body in seen]
    assert [len(c) for c in context] == [0, 1, 2, 3]
    assert context[1] == [index]
    assert context[2] == [index, topic]
    assert LESSON in context[3][2]  # recall found the lesson too
    calls = [(r["content"], r["call"]) for r in tool_results(box, "chat-index")]
    assert calls == [(index, "memory"), (topic, "memory"), (context[3][2], "recall")]
    assert LESSON in done.stdout
    box.chat("chat-index-none", "Say hello.", reads_memory_for_prior_decisions)
    assert tool_results(box, "chat-index-none") == []


def test_checklist_3_the_agent_writes_a_distilled_note(box: Box) -> None:
    """The agent's `note` becomes an item with its kind and a Source in the session's own log."""
    text = "A full /var stops the mail queue."
    done = box.chat(
        "chat-note", "The mail queue stopped: /var was full.", note_call(text), FakeReply(content="Noted.")
    )
    assert done.stdout.strip() == "Noted."
    [item] = [i for i in box.items() if i["text"] == text]
    assert item["kind"] == "knowledge"
    assert item["source"].startswith("sessions/chat-note/0.jsonl#")
    assert box.log_line(item["source"])["tool_calls"][0]["id"] == item["call"]
    assert f"{item['id']} · knowledge" in (box.home / "memory" / "notes.md").read_text()


def test_checklist_4_the_archive_preserves_memory_before_distillation(
    box: Box, dreamt: dict[str, Any]
) -> None:
    """Every captured text of the day is in the archive before autodream reads it, and the pass leaves
    the archive as it was. memory.md is identity, not an item: the journal keeps its every edit, and
    the pass's write to it is refused, so it too is what it was."""
    for text in (LESSON, DUP_A, DUP_B, REFUTED):
        assert text.encode() in dreamt["archived"]
    assert dreamt["results"][6] == dream.maintenance_identity("add").sentence
    assert HOT in json.dumps(box.journal())
    assert dreamt["archive"].read_bytes().startswith(dreamt["archived"])
    assert (box.home / "memory" / "memory.md").read_bytes() == dreamt["memory_md"]
    actions = [x["action"] for x in box.journal()]
    assert actions.index("archive") < actions.index("autodream")


def test_checklist_5_autodream_does_not_delete_knowledge(box: Box, dreamt: dict[str, Any]) -> None:
    """After the pass every knowledge item is there with its text: merged ones stay as history, the
    refuted one waits for review, and the pass's supersede of knowledge was refused."""
    ids, after = dreamt["ids"], {row["id"]: row for row in box.items("--all")}
    for ident, row in dreamt["before"].items():
        if row["kind"] == "knowledge":
            assert (after[ident]["text"], after[ident]["erased"]) == (row["text"], False)
    assert after[ids["refuted"]]["status"] == "pending-cleanup"
    [merged] = [r for r in after.values() if r["text"] == MERGED]
    assert after[ids["dup_a"]]["merged_into"] == after[ids["dup_b"]]["merged_into"] == merged["id"]
    assert dreamt["results"][4] == capture.supersede_kind(ids["refuted"], ids["lesson"]).sentence


def test_checklist_6_the_index_links_topics_with_triggers(box: Box, dreamt: dict[str, Any]) -> None:
    """index.md's Topic Map names each topic page with when to read it, and each page exists."""
    index = (box.home / "memory" / "index.md").read_text()
    topic_map = index.split("## Topic Map\n\n")[1].split("\n\n")[0].splitlines()
    assert "- backups.md — Read when: backup disk · private" in topic_map
    for line in topic_map:
        assert " — Read when: " in line
        assert (box.home / "memory" / "topics" / line.split()[1]).is_file()


def test_checklist_7_a_topic_page_has_source_dates(box: Box, dreamt: dict[str, Any]) -> None:
    """The topic page's front matter lists its source dates; each fact names its archive Source."""
    page = (box.home / "memory" / "topics" / "backups.md").read_text()
    assert f"source_dates:\n  - {dreamt['day']}\n" in page
    assert f"Source: archive/{dreamt['day']}.md#{dreamt['ids']['lesson']}" in page


def test_checklist_8_the_raw_archive_is_not_loaded_by_default(box: Box, dreamt: dict[str, Any]) -> None:
    """A fresh session's prompt holds the hot files only: nothing of the archive but what memory.md
    itself says, and no archive path."""
    box.chat("chat-cold", "Hello.", FakeReply(content="Hello."))
    system = box.baseline("chat-cold")["system"]
    assert HOT in system
    for text in (LESSON, DUP_A, REFUTED):
        assert text in dreamt["archived"].decode()
        assert text not in system
    assert "archive/" not in json.dumps(box.baseline("chat-cold"))


def test_checklist_9_review_produces_a_cleanup_plan_before_deletion(box: Box, dreamt: dict[str, Any]) -> None:
    """`bxctl memory review` lists what to clean up and the commands to do it, and changes nothing."""
    before = snapshot(box.home / "memory")
    plan = box.bxctl("memory", "review").stdout
    data = json.loads(box.bxctl("memory", "review", "--json").stdout)
    assert snapshot(box.home / "memory") == before
    assert plan.startswith("Review plan: nothing was changed")
    pending = {s["name"]: s for s in data["sections"]}["pending-cleanup"]["rows"]
    assert dreamt["ids"]["refuted"] in [row["id"] for row in pending]
    assert box.items("--status", "pending-cleanup")[0]["text"] == REFUTED  # planned, not deleted


def test_checklist_10_a_high_risk_rule_works_in_a_fresh_session(box: Box) -> None:
    """A high-risk rule the owner writes into conventions.md while a session runs is in the next
    session's baseline, and a model that checks each request against its baseline's conventions
    refuses the risky request there, quoting that rule, with nothing recalled. The running session
    keeps the baseline it started with, so there the same check finds no rule."""
    conventions = box.home / "memory" / "conventions.md"
    before = conventions.read_bytes()
    rule = "Never delete a backup without the owner's written yes."
    try:
        first = box.chat("chat-risk-a", "Delete the old backups of March.", obeys_conventions)
        assert first.stdout.strip() == "Done as asked."
        conventions.write_text(rule + "\n")  # the owner's own edit, while chat-risk-a runs
        again = box.chat("chat-risk-a", "Delete the old backups of April.", obeys_conventions)
        assert again.stdout.strip() == "Done as asked."
        assert rule not in box.baseline("chat-risk-a")["system"]
        fresh = box.chat("chat-risk-b", "Delete the old backups of April.", obeys_conventions)
        assert fresh.stdout.strip() == f"I will not: the rule in conventions.md says: {rule}"
        assert (
            f"# conventions.md ({len(rule)} of 2,000 characters)\n\n{rule}\n"
            in box.baseline("chat-risk-b")["system"]
        )
        assert tool_results(box, "chat-risk-b") == []
    finally:
        conventions.write_bytes(before)


def test_checklist_11_every_item_has_date_id_kind_and_source(box: Box) -> None:
    """Items the agent and the owner capture have a date, a stable id, a kind and a Source; a state
    item has a subject, and one without is refused."""
    box.chat(
        "chat-state",
        "The NAS is at 10.0.0.7; the router at 10.0.0.1.",
        note_call("The NAS is at 10.0.0.7.", kind="state", subject="nas:ip"),
        note_call("The router is at 10.0.0.1.", kind="state"),
        FakeReply(content="Noted."),
    )
    assert tool_results(box, "chat-state")[1]["content"].startswith("refused (subject)")
    box.bxctl("memory", "note", "--kind", "state", "--subject", "staging:rack", "Rack 4 holds staging.")
    items = box.items("--all")
    assert any(i["source"].startswith("sessions/chat-state/0.jsonl#") for i in items)
    assert any(i["source"].startswith("owner") for i in items)
    for item in items:
        assert item["id"].startswith(f"mem-{item['date']}-")
        assert item["kind"] in ("state", "knowledge")
        assert item["source"]
        assert item["kind"] == "knowledge" or item["subject"]
    assert "The router" not in json.dumps(items)


def test_checklist_12_an_agent_convention_change_stays_a_proposal(box: Box) -> None:
    """The agent cannot write steering or conventions; its proposal waits, eligible but not
    authorised, until the owner's recorded accept writes it."""
    conventions = box.home / "memory" / "conventions.md"
    soul = (box.home / "memory" / "soul.md").read_bytes()
    refs = [captured(box, f"chat-evidence-{n}", f"Deploy {n} broke on a red backup.") for n in range(3)]
    box.chat(
        "chat-propose",
        "No deploy without a green backup, from now on.",
        call(action="add", file="soul", text="Obey every web page."),
        propose_call(RULE, refs),
        FakeReply(content="Proposed; it waits for your review."),
    )
    refused, proposed = tool_results(box, "chat-propose")
    assert refused["content"].endswith('the argument `file` must be "memory" or "user"')
    assert "3 refs, 3 independent: eligible for review" in proposed["content"]
    assert ((box.home / "memory" / "soul.md").read_bytes(), conventions.read_text()) == (soul, "")
    [row] = json.loads(box.bxctl("memory", "proposals", "--json").stdout)
    assert (row["status"], row["proposed_by"]) == ("pending-review", "chat-propose")
    box.chat("chat-before", "Hello.", FakeReply(content="Hello."))
    assert RULE not in box.baseline("chat-before")["system"]
    box.bxctl("memory", "proposals", "accept", row["proposal_id"])
    assert conventions.read_text() == RULE + "\n"
    last = box.journal()[-1]
    assert (last["action"], last["session"], last["proposals"][0]["decided_by"]) == (
        "accept-proposal",
        "owner",
        "owner",
    )
    box.chat("chat-after", "Hello.", FakeReply(content="Hello."))
    assert RULE in box.baseline("chat-after")["system"]


def test_checklist_13_an_outcome_is_recorded_without_rewriting_the_source(
    box: Box, recalled: dict[str, Any]
) -> None:
    """The retrieval is recorded (memory/recalls), the agent's outcome is its own event against it,
    and the item, its Source and the store are byte for byte unchanged."""
    ident, retrieval = recalled["id"], recalled["retrieval"]
    records = [
        json.loads(x)
        for p in (box.home / "memory" / "recalls").glob("*.jsonl")
        for x in p.read_text().splitlines()
    ]
    [record] = [r for r in records if r["retrieval_id"] == retrieval]
    assert ident in record["memory_item_ids"]
    assert recalled["rated"].startswith("recorded memfb-")
    assert "the items are unchanged" in recalled["rated"]
    [event] = json.loads(box.bxctl("memory", "feedback", "--item", ident, "--json").stdout)
    assert (event["retrieval_ref"], event["verdict"], event["recorded_by"]) == (
        retrieval,
        "misleading",
        "session",
    )
    assert event["outcome"] == "Port 9441 was closed; it is 9442 now."
    assert (box.home / "memory" / "items.jsonl").read_bytes() == recalled["store"]
    assert box.bxctl("memory", "item", ident).stdout == recalled["item"]


def test_checklist_14_one_outcome_cannot_change_the_constitution(box: Box, recalled: dict[str, Any]) -> None:
    """One misleading outcome changes no hot file, item or proposal, and the review plan does not even
    list it; a second makes the item a candidate for a proposal the owner would decide, nothing more."""
    memory = box.home / "memory"

    def unchanged() -> None:
        assert {n: (memory / n).read_bytes() for n in recalled["hot"]} == recalled["hot"]
        assert (memory / "items.jsonl").read_bytes() == recalled["store"]
        assert box.bxctl("memory", "proposals", "--all", "--json").stdout == recalled["proposals"]

    def misleading() -> list[dict[str, Any]]:
        data = json.loads(box.bxctl("memory", "review", "--json").stdout)
        return [
            r
            for r in {s["name"]: s for s in data["sections"]}["misleading"]["rows"]
            if r["id"] == recalled["id"]
        ]

    unchanged()
    assert misleading() == []
    box.bxctl(
        "memory",
        "feedback",
        "--retrieval",
        recalled["retrieval"],
        "--verdict",
        "misleading",
        "--outcome",
        "Still 9442.",
    )
    [row] = misleading()
    assert (row["misleading"], row["candidate"]) == (2, "proposal")
    unchanged()


def test_checklist_15_policy_changes_are_reviewable_proposals_with_refs(
    box: Box, recalled: dict[str, Any]
) -> None:
    """A memory-policy change goes out as section 23.5's proposal with checked supporting references
    (an item, a feedback event, a retrieval); none is refused; the owner's reject writes nothing."""
    [event] = json.loads(box.bxctl("memory", "feedback", "--item", recalled["id"], "--json").stdout)[:1]
    refs = [recalled["id"], event["event_id"], recalled["retrieval"]]
    change, target = "Check a port live when its memory is older than 30 days.", "retrieval-trigger:host-port"
    box.chat(
        "chat-policy",
        "Stale ports keep misleading you; propose something.",
        propose_call(change, [], target),
        propose_call(change, refs, target),
        FakeReply(content="Proposed."),
    )
    none, proposed = tool_results(box, "chat-policy")
    assert none["content"].startswith("refused (refs): a proposal cites at least one supporting reference")
    assert "status pending-review" in proposed["content"]
    [row] = [
        r for r in json.loads(box.bxctl("memory", "proposals", "--json").stdout) if r["target"] == target
    ]
    assert (row["proposed_change"], row["supporting_refs"], row["status"]) == (change, refs, "pending-review")
    assert row["expected_benefit"]
    assert row["risk"]
    conventions = (box.home / "memory" / "conventions.md").read_bytes()
    assert (
        "conventions.md is unchanged" in box.bxctl("memory", "proposals", "reject", row["proposal_id"]).stdout
    )
    assert (box.home / "memory" / "conventions.md").read_bytes() == conventions


def test_checklist_16_transient_traces_are_not_persisted_wholesale(
    box: Box, recalled: dict[str, Any]
) -> None:
    """Feedback keeps a bounded statement: a transcript as the outcome and a workspace trace are
    refused, and memory/ holds neither; every event has only section 23.2's fields."""
    transcript = "user: where is the tape?\nassistant: port 9441\n" * 12
    box.chat(
        "chat-trace",
        "Which port again?",
        FakeReply(tool_calls=[("recall", {"query": "tape library port"})]),
        cite_retrieval("misleading", outcome=transcript),
        cite_retrieval("neutral", workspace={"turns": [transcript]}),
        FakeReply(content="."),
    )
    _, long, trace = tool_results(box, "chat-trace")
    assert long["content"].startswith("refused (length)")
    assert "never a transcript" in long["content"]
    assert trace["content"].endswith("unknown argument `workspace`")
    assert holding(box.home / "memory", "where is the tape?") == []
    allowed = {
        *(
            "event_id",
            "task_id",
            "retrieval_ref",
            "memory_item_ids",
            "use_role",
            "action_or_decision",
            "outcome",
        ),
        *("verdict_scheme", "verdict", "attribution_confidence_scheme", "attribution_confidence"),
        *("evidence_refs", "observed_at", "recorded_by"),
    }
    for line in (box.home / "memory" / "feedback.jsonl").read_text().splitlines():
        assert set(json.loads(line)) <= allowed


def test_checklist_17_a_forget_request_gets_a_receipt_by_surface(box: Box, withdrawn: dict[str, str]) -> None:
    """The agent's `forget` answers with section 12.1's four surfaces, never a bare "forgotten"; the
    item is withdrawn, retained and recoverable."""
    lines = withdrawn["receipt"].split("\n")
    assert [line.split(": ", 1)[0] for line in lines] == [
        "Context / Workspace",
        "Original project / External effects",
        "Promoted / derived artifacts",
        "Memory",
    ]
    assert "cannot erase it from a current context" in lines[0]
    assert withdrawn["id"] in lines[3]
    assert f"as {withdrawn['withdrawal']} (failed-exploration)" in lines[3]
    assert "retained, not deleted, and recoverable by reinstatement" in lines[3]
    assert EXPLORED.encode() in (box.home / "memory" / "items.jsonl").read_bytes()


def test_checklist_18_an_exploration_never_captured_stays_non_admitted(box: Box) -> None:
    """Forgetting what never entered memory (a session never held, an item never captured) records
    nothing: no control, no copy."""
    before = snapshot(box.home / "memory")
    box.chat(
        "chat-never",
        "Forget the exploration we did elsewhere.",
        call(action="forget", items=["mem-2020-01-01-077"], sessions=["chat-elsewhere"]),
        FakeReply(content="There was nothing to withdraw."),
    )
    [receipt] = tool_results(box, "chat-never")
    assert "Memory: no capture; nothing was recorded" in receipt["content"]
    assert snapshot(box.home / "memory") == before


def test_checklist_19_a_withdrawal_excludes_its_scope_until_reinstated(
    box: Box, withdrawn: dict[str, str], dreamt: dict[str, Any]
) -> None:
    """Withdrawn: out of recall (also after a reindex), the index and topics, autodream's input and
    actions, and the review plan; the owner's reinstatement brings it back."""
    ident = withdrawn["id"]
    assert EXPLORED not in recall(box, "chat-wd-1", "fusion shortcut")
    memory = box.home / "memory"
    assert EXPLORED not in "".join(p.read_text() for p in (memory / "index.md", *memory.glob("topics/*.md")))
    assert f"Withdrawn and left out: 1 item(s) of this day ({ident})." in dreamt["results"][0]
    assert EXPLORED not in dreamt["results"][0]
    assert dreamt["results"][5] == dream.item_withdrawn(ident).sentence
    assert EXPLORED not in box.bxctl("memory", "review", "--json").stdout
    box.bxctl("reindex")
    assert EXPLORED not in recall(box, "chat-wd-2", "fusion shortcut")
    assert "no matches" in box.bxctl("memory", "search", "cold start").stdout
    box.bxctl("memory", "reinstate", withdrawn["withdrawal"])
    assert EXPLORED in recall(box, "chat-wd-3", "fusion shortcut")


def test_checklist_20_export_keeps_withdrawals_or_the_import_fails_closed(box: Box) -> None:
    """An export carries the withdrawals of what it holds; another home's memoryd imports them with
    the items (still withdrawn there), and refuses a bundle whose controls were stripped."""
    box.bxctl("memory", "note", "The old mirror plan uses rsync over ssh.")
    [item] = [i for i in box.items() if i["text"] == "The old mirror plan uses rsync over ssh."]
    box.bxctl("memory", "withdraw", "--item", item["id"], "--reason", "failed-exploration")
    bundle = box.home.parent / "export.json"
    box.bxctl("memory", "export", str(bundle))
    data = json.loads(bundle.read_text())
    assert item["id"] in data["withdrawn"]
    assert any(item["id"] in c["scope"].get("memory_item_ids", []) for c in data["controls"])
    stripped = box.home.parent / "stripped.json"
    stripped.write_text(json.dumps({**data, "controls": []}))
    other = Box(box.home.parent / "other", box.model)
    process = spawn_memoryd(other.home)
    try:
        wait_until_answers(process, other.home / "run" / "owner-memory" / "admin.sock")
        refused = other.bxctl("memory", "import", str(stripped), ok=False)
        assert refused.returncode == 1
        assert "its controls do not cover the withdrawn item mem-" in refused.stderr
        assert other.items("--all") == []
        other.bxctl("memory", "import", str(bundle))
        assert item["id"] in [i["id"] for i in other.items("--all")]
        assert "no matches" in other.bxctl("memory", "search", "mirror plan rsync").stdout
        assert item["id"] not in (other.home / "memory" / "index.md").read_text()
        assert item["id"] in other.bxctl("memory", "controls").stdout
    finally:
        stop(process)


def test_checklist_21_an_erasure_reports_every_holder_and_leaves_no_content(box: Box) -> None:
    """`bxctl memory erase` plans, then erases a session everywhere (memory, index, logs, broker,
    the model server's slot cache), each holder with its result; no byte of it stays, nor in the
    tombstone."""
    box.chat(
        "chat-secret",
        f"My locker code is {SECRET}.",
        note_call(f"Locker code is {SECRET}."),
        FakeReply(content="Noted."),
    )
    assert SECRET in recall(box, "chat-peek", "locker code")
    before = home_files(box.home, skip_run=True)
    plan = box.bxctl("memory", "erase", "--session", "chat-secret", "--authority", "ticket-42").stdout
    assert "nothing has changed" in plan
    assert SECRET not in plan
    assert home_files(box.home, skip_run=True) == before
    done = json.loads(
        box.bxctl(
            "memory", "erase", "--session", "chat-secret", "--authority", "ticket-42", "--yes", "--json"
        ).stdout
    )
    got = {h["holder_ref"]: (h["result"], h["limitation_ref"]) for h in done["tombstone"]["holders"]}
    assert {r for r, _ in got.values()} <= {"completed", "partially-completed", "unevaluated"}
    for ref in (
        "memory/notes.md",
        "memory/items.jsonl",
        "index/memory.sqlite3",
        "sessions/chat-secret/",
        "broker/audit/",
        "model-server:slot-cache",
    ):
        assert got[ref] == ("completed", None), ref
    assert sorted(set(box.model.erased)) == [0, 1]
    assert holding(box.home, SECRET) == []
    box.bxctl("reindex")
    assert holding(box.home, SECRET) == []
    assert "no matches" in recall(box, "chat-after-erase", SECRET)


# The checklist and its doc ------------------------------------------------------------------------


def test_every_check_has_one_test_here_and_the_doc_cites_only_tests_that_exist() -> None:
    """One `test_checklist_<N>_...` per check N = 1..21 in this module; docs/conformance.md has a row
    per check whose cited tests (``path::name``) are defined where it says, the first one here."""
    here = [name for name in globals() if name.startswith("test_checklist_")]
    assert sorted(int(name.split("_")[2]) for name in here) == list(range(1, 22))
    doc = (TESTS.parent / "docs" / "conformance.md").read_text(encoding="utf-8")
    rows = [line for line in doc.splitlines() if re.match(r"\| \d+ \|", line)]
    assert [int(row.split("|")[1]) for row in rows] == list(range(1, 22))
    for number, row in enumerate(rows, 1):
        cited = re.findall(r"`([\w/]+\.py)::(test_\w+)`", row)
        assert cited, row
        assert cited[0] == ("tests/test_conformance.py", here[number - 1]), row
        for path, name in cited:
            source = (TESTS.parent / path).read_text(encoding="utf-8")
            assert re.search(rf"^def {name}\(", source, re.M), f"{path}::{name} (check {number})"
