"""index.md and topics/ written one change at a time equal a full render (issue 16; seed 003 sections
10-11): after every kind of item change and withdrawal, with large topics written in the background,
and after a crash between a commit and its pages (in-process at the exact point, and real memoryd
processes killed with SIGKILL while notes are written)."""

from __future__ import annotations

import json
import random
import signal
import threading
from pathlib import Path

import pytest
from item_helpers import archive, capture, set_status, supersede, withdraw

from boxmaker.memoryd.config import Config, load
from boxmaker.memoryd.files.names import PAGES_MARK
from boxmaker.memoryd.items import pagefiles, projections
from boxmaker.memoryd.items import pages as pages_module
from boxmaker.memoryd.items.live import ItemStore
from boxmaker.memoryd.memory import excluded
from boxmaker.memoryd.service import Memoryd
from boxmaker.memoryd.write import itemops
from boxmaker.memoryd.write.answer import OWNER
from boxmaker.proto import wire
from boxmaker.proto.errors import PeerError
from boxmaker.proto.labels import DataClass
from boxmaker.proto.messages import MemoryCall, ToolRequest, ToolResponse
from conftest import Clock, spawn_memoryd, stop, wait_until_answers


def on_disk(memory_dir: Path) -> dict[str, str]:
    found = {"index.md": (memory_dir / "index.md").read_text()}
    for path in sorted((memory_dir / "topics").glob("*.md")):
        found[f"topics/{path.name}"] = path.read_text()
    return found


def full_render(memory_dir: Path, service: Memoryd | None = None) -> dict[str, str]:
    if service is not None:
        every, hidden = service.memory.items.items().values(), excluded(service.memory)
    else:
        from boxmaker.memoryd.service import withdrawn_items

        every, hidden = ItemStore(memory_dir).items().values(), withdrawn_items(memory_dir)
    rendered = projections.render(every, hidden)
    found = {"index.md": rendered.index.text}
    found.update({f"topics/{name}.md": page.text for name, page in rendered.topics.items()})
    return found


def settled(service: Memoryd) -> dict[str, str]:
    service.memory.pages.settle()
    return on_disk(service.config.layout.memory)


@pytest.mark.parametrize("sync_items", [2000, 2])
def test_every_change_leaves_pages_equal_to_a_full_render(
    service: Memoryd, clock: Clock, monkeypatch: pytest.MonkeyPatch, sync_items: int
) -> None:
    monkeypatch.setattr(pages_module, "SYNC_ITEMS", sync_items)  # 2: most topics in the background
    memory_dir = service.config.layout.memory
    writer = service.memory.writer
    steps = []

    def check(what: str) -> None:
        steps.append(what)
        got, want = settled(service), full_render(memory_dir, service)
        if got != want:
            import difflib

            for key in sorted(set(got) | set(want)):
                print(
                    key,
                    "\n".join(
                        difflib.unified_diff(
                            want.get(key, "").splitlines(), got.get(key, "").splitlines(), lineterm=""
                        )
                    ),
                )
        assert got == want, steps

    old = capture(service, "Staging is 10.0.0.7.", kind="state", subject="host:staging-ip")
    check("capture state")
    for n in range(5):
        capture(service, f"Lesson {n}: small commits review faster.", untrusted=n == 3)
    check("captures")
    clock.advance(days=1)
    new = capture(service, "Staging is 10.0.0.9.", kind="state", subject="host:staging-ip")
    third = capture(service, "Staging is 10.0.0.11.", kind="state", subject="host:staging-ip", scope="Infra")
    check("conflict")
    supersede(service, old, new)
    check("supersede")
    pitfall = capture(service, "kubectl times out behind the VPN.", scope="Operational Pitfalls")
    set_status(service, pitfall, "pending-cleanup")
    check("pending-cleanup")
    knowledge = [capture(service, f"Knowledge {n}") for n in range(3)]
    assert itemops.cool(writer, knowledge[0], OWNER).code == "ok"
    check("cool")
    assert itemops.warm(writer, knowledge[0], OWNER).code == "ok"
    assert itemops.assign(writer, knowledge[1], "Deploys", ["release day"], OWNER).code == "ok"
    check("assign")
    assert itemops.assign(writer, knowledge[1], "lessons", [], OWNER).code == "ok"
    check("assign back")
    assert itemops.merge(writer, knowledge, "Knowledge, merged.", OWNER).code == "ok"
    check("merge")
    withdraw(service, new)
    check("withdraw the item a superseded one points at")
    withdraw(service, third, number=2)
    check("withdraw another")
    clock.advance(days=2)
    archive(service)
    check("archive")
    for n in range(4):
        capture(service, f"After the archive {n}", scope="Infra")
    check("more captures")
    mark = json.loads((memory_dir / PAGES_MARK).read_text())
    assert mark["items"][2] == (memory_dir / "items.jsonl").stat().st_size


def test_a_crash_between_the_commit_and_its_pages_is_rendered_at_start(home: Path, clock: Clock) -> None:
    config = load(None, str(home))
    first = Memoryd(config, now=clock.now)
    first.open()
    capture(first, "Staging is 10.0.0.7.", kind="state", subject="host:staging-ip")
    written = on_disk(config.layout.memory)
    first.memory.journal.listeners.remove(first._after_commit)  # the crash: no page after this commit
    for n in range(3):
        capture(first, f"Written, then the process died {n}", scope=f"topic {n % 2}")
    assert on_disk(config.layout.memory) == written  # the pages do not show them yet
    first.memory.index.close()  # no close(): nothing else is written, as after kill -9
    second = Memoryd(config, now=clock.now)
    second.open()
    try:
        assert settled(second) == full_render(config.layout.memory, second)
        assert on_disk(config.layout.memory) != written
    finally:
        second.close()
        first.memory.pages.close()


def stopped_with_topics(home: Path, clock: Clock, topics: int) -> tuple[Config, Path]:
    """A home where memoryd noted one note in each of `topics` topics and stopped cleanly."""
    config = load(None, str(home))
    service = Memoryd(config, now=clock.now)
    service.open()
    for n in range(topics):
        capture(service, f"Note {n}", scope=f"topic {n}")
    service.close()
    return config, config.layout.memory


def test_a_missing_or_foreign_mark_renders_every_page(home: Path, clock: Clock) -> None:
    config, memory_dir = stopped_with_topics(home, clock, 3)
    (memory_dir / "topics" / "topic-1.md").write_text("changed by hand\n")
    (memory_dir / "index.md").unlink()
    (memory_dir / PAGES_MARK).write_text("not json")
    again = Memoryd(config, now=clock.now)
    again.open()
    try:
        assert settled(again) == full_render(memory_dir, again)
    finally:
        again.close()


def test_a_clean_restart_writes_no_topic_page_but_one_deleted_meanwhile(home: Path, clock: Clock) -> None:
    config, memory_dir = stopped_with_topics(home, clock, 4)
    (memory_dir / "topics" / "topic-2.md").unlink()
    before = {path.name: path.stat().st_mtime_ns for path in (memory_dir / "topics").glob("*.md")}
    written: list[Path] = []
    real_put = pages_module.Pages._put

    def put(self: pages_module.Pages, path: Path, text: str) -> None:
        written.append(path)
        real_put(self, path, text)

    again = Memoryd(config, now=clock.now)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(pages_module.Pages, "_put", put)
        again.open()
        try:
            assert settled(again) == full_render(memory_dir, again)
        finally:
            again.close()
    # the mark said the pages show the log: only the deleted page is made again (not every page)
    assert [p.name for p in written if p.parent.name == "topics"] == ["topic-2.md"]
    after = {path.name: path.stat().st_mtime_ns for path in (memory_dir / "topics").glob("*.md")}
    assert {name: after[name] for name in before} == before


def broker_note(home: Path, n: int) -> ToolResponse | None:
    request = ToolRequest(
        session="chat-pages",
        call_id=f"c{n}",
        tool="memory",
        arguments={"action": "note", "text": f"note {n}", "scope": f"scope {n % 3}"},
    )
    try:
        reply = wire.call(
            home / "run" / "broker-memory" / "memory.sock",
            MemoryCall(request=request, taint=DataClass.PRIVATE, untrusted=False),
            timeout=10,
        )
    except (OSError, PeerError):
        return None
    assert isinstance(reply, ToolResponse)
    return reply


def test_kill_9_while_noting_then_restart_leaves_pages_equal_to_a_full_render(home: Path) -> None:
    rng = random.Random(16)
    admin = home / "run" / "owner-memory" / "admin.sock"
    counter = 0
    for _round in range(3):
        process = spawn_memoryd(home)
        wait_until_answers(process, admin)
        done = threading.Event()

        def writer(done: threading.Event = done) -> None:
            nonlocal counter
            while not done.is_set():
                counter += 1
                if broker_note(home, counter) is None:
                    return

        thread = threading.Thread(target=writer)
        thread.start()
        threading.Event().wait(rng.uniform(0.2, 0.6))
        stop(process, signal.SIGKILL)
        done.set()
        thread.join(timeout=30)
        process = spawn_memoryd(home)
        try:
            wait_until_answers(process, admin)
            memory_dir = home / "memory"
            assert on_disk(memory_dir) == full_render(memory_dir)
        finally:
            stop(process)
    assert counter > 10


def test_a_large_page_is_written_in_a_gap_between_requests(
    service: Memoryd, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pages_module, "SYNC_ITEMS", 2)  # the lessons page goes to the background writer
    monkeypatch.setattr(pages_module, "DEBOUNCE", 0.01)
    monkeypatch.setattr(pagefiles, "LONGEST_WAIT", 30.0)
    memory_dir = service.config.layout.memory
    pages = service.memory.pages
    for n in range(3):
        capture(service, f"Lesson {n}: small commits review faster.")
    pages.settle()
    with pages.requests.serving():  # a request being answered: the background writer waits
        capture(service, "Lesson 3: written only once the request is answered.")
        threading.Event().wait(0.3)
        assert "Lesson 3" not in (memory_dir / "topics" / "lessons.md").read_text()
    assert settled(service) == full_render(memory_dir, service)
    assert "Lesson 3" in (memory_dir / "topics" / "lessons.md").read_text()


def test_requests_wait_for_a_gap_and_gives_up_after_the_longest_wait() -> None:
    requests = pagefiles.Requests()
    assert requests.wait(0.0)  # nothing answered yet: a gap
    with requests.serving():
        assert not requests.wait(0.05)
    assert requests.wait(1.0)  # the gap comes GRACE after the last answer


def held_back_lessons(service: Memoryd, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A home whose lessons page is written in the background and held back: a request is being
    answered (LONGEST_WAIT 30 s: the writer waits for its gap). Returns the memory folder."""
    monkeypatch.setattr(pages_module, "SYNC_ITEMS", 2)
    monkeypatch.setattr(pages_module, "DEBOUNCE", 0.01)
    monkeypatch.setattr(pagefiles, "LONGEST_WAIT", 30.0)
    for n in range(3):
        capture(service, f"Lesson {n}: small commits review faster.")
    service.memory.pages.settle()
    return service.config.layout.memory


def test_a_stop_writes_a_held_back_page_without_waiting_for_a_gap(
    home: Path, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    service = Memoryd(load(None, str(home)), now=clock.now)
    service.open()
    memory_dir = held_back_lessons(service, monkeypatch)
    closing = threading.Thread(target=service.close)
    with service.memory.pages.requests.serving():  # a request that never ends before the stop
        capture(service, "Lesson 3: written at the stop.")
        threading.Event().wait(0.1)
        closing.start()
        closing.join(timeout=60)
        assert not closing.is_alive()  # it did not wait for the request's gap (30 s per piece)
    assert "Lesson 3" in (memory_dir / "topics" / "lessons.md").read_text()
    assert on_disk(memory_dir) == full_render(memory_dir)


def test_a_page_the_stop_gives_up_on_is_written_at_the_next_start(
    home: Path, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = load(None, str(home))
    service = Memoryd(config, now=clock.now)
    service.open()
    memory_dir = held_back_lessons(service, monkeypatch)
    before = (memory_dir / "topics" / "lessons.md").read_text()
    monkeypatch.setattr(pagefiles, "STOP_BUDGET", 0.0)  # no time for it at the stop
    with service.memory.pages.requests.serving():
        capture(service, "Lesson 3: left for the next start.")
        service.close()
    assert (memory_dir / "topics" / "lessons.md").read_text() == before  # the old page, whole
    assert not list((memory_dir / "topics").glob(".*.tmp-*"))
    again = Memoryd(config, now=clock.now)
    again.open()
    try:
        assert settled(again) == full_render(memory_dir, again)
        assert "Lesson 3" in (memory_dir / "topics" / "lessons.md").read_text()
    finally:
        again.close()


def test_a_stop_does_not_wait_out_the_background_writers_pause(
    home: Path, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # after writing large pages for S seconds the writer pauses 4 S (BACKGROUND_SHARE): a stop during
    # that pause (14 s on a seeded 100,000-item home's first start) must not wait for it to end
    monkeypatch.setattr(pages_module, "SYNC_ITEMS", 2)
    monkeypatch.setattr(pages_module, "DEBOUNCE", 120.0)  # the pause the change lands in
    service = Memoryd(load(None, str(home)), now=clock.now)
    service.open()
    memory_dir = service.config.layout.memory
    for n in range(3):
        capture(service, f"Lesson {n}: written at the stop, not after the pause.")
    closing = threading.Thread(target=service.close)
    closing.start()
    closing.join(timeout=30)
    assert not closing.is_alive()
    assert "Lesson 2" in (memory_dir / "topics" / "lessons.md").read_text()
    assert on_disk(memory_dir) == full_render(memory_dir)
