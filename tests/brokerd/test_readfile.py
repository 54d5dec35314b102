"""read_file opens first and checks what it opened (issue 15 item 3): a folder component swapped for a
link while reads run never yields a file outside the grant, and the race never raises."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from boxmaker.brokerd.grants import Grant, Mode
from boxmaker.brokerd.local import read_file
from boxmaker.brokerd.readfile import open_walked
from boxmaker.proto.labels import DataClass


def grant(folder: Path) -> Grant:
    return Grant(
        id="docs",
        tool="read_file",
        mode=Mode.AUTO,
        max_taint=DataClass.SECRET,
        result_class=DataClass.PRIVATE,
        untrusted=False,
        sha256="0" * 64,
        paths=(str(folder),),
    )


@pytest.fixture
def tree(tmp_path: Path) -> tuple[Path, Path]:
    docs = tmp_path / "docs"
    (docs / "sub").mkdir(parents=True)
    (docs / "sub" / "plan.txt").write_text("inside")
    (docs / "elsewhere.txt").write_text("also inside")
    out = tmp_path / "out"
    (out / "sub").mkdir(parents=True)
    (out / "sub" / "plan.txt").write_text("OUTSIDE SECRET")
    return docs, out


@pytest.mark.parametrize(
    ("swap", "rounds"),
    [("folder", 3000), ("file", 3000), ("parent", 2000)],
)
def test_swapping_a_component_for_a_link_never_reads_outside(
    tree: tuple[Path, Path], swap: str, rounds: int
) -> None:
    docs, out = tree
    stop = threading.Event()
    errors: list[BaseException] = []
    # What the attacker swaps: the folder on the way, the file itself, or a link two levels up.
    real, link_to = {
        "folder": (docs / "sub", out / "sub"),
        "file": (docs / "sub" / "plan.txt", out / "sub" / "plan.txt"),
        "parent": (docs / "sub", out),
    }[swap]
    target = docs / "sub" / "plan.txt" if swap != "parent" else docs / "sub" / "sub" / "plan.txt"
    if swap == "parent":
        (docs / "sub" / "sub").mkdir()
        (docs / "sub" / "sub" / "plan.txt").write_text("inside")
    aside = real.with_name(real.name + ".aside")

    def swapper() -> None:
        try:
            while not stop.is_set():
                os.rename(real, aside)
                os.symlink(link_to, real)
                os.unlink(real)
                os.rename(aside, real)
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=swapper, daemon=True)
    thread.start()
    seen: dict[str, int] = {}
    try:
        for _ in range(rounds):
            output = read_file(str(target), grant(docs), 1_000)
            key = "ok:" + output.text if output.code == "ok" else output.code
            seen[key] = seen.get(key, 0) + 1
            assert "OUTSIDE" not in output.text
    finally:
        stop.set()
        thread.join(10)
    assert not errors, errors
    assert set(seen) <= {"ok:inside", "refused:not-found", "refused:denied", "refused:unavailable"}, seen
    assert read_file(str(target), grant(docs), 1_000).text == "inside"


def test_links_inside_the_grant_still_read(tree: tuple[Path, Path]) -> None:
    docs, _ = tree
    os.symlink(docs / "elsewhere.txt", docs / "alias.txt")
    os.symlink("sub", docs / "same")
    assert read_file(str(docs / "alias.txt"), grant(docs), 100).text == "also inside"
    assert read_file(str(docs / "same" / "plan.txt"), grant(docs), 100).text == "inside"
    assert read_file(str(docs / "sub" / ".." / "sub" / "plan.txt"), grant(docs), 100).text == "inside"


def test_a_link_out_of_the_grant_is_refused(tree: tuple[Path, Path]) -> None:
    docs, out = tree
    os.symlink(out / "sub", docs / "door")
    output = read_file(str(docs / "door" / "plan.txt"), grant(docs), 100)
    assert output.code == "refused:denied"
    assert "OUTSIDE" not in output.text


def test_a_loop_of_links_and_odd_paths_are_sentences(tree: tuple[Path, Path]) -> None:
    docs, _ = tree
    os.symlink(docs / "b", docs / "a")
    os.symlink(docs / "a", docs / "b")
    assert read_file(str(docs / "a"), grant(docs), 100).code == "refused:unavailable"
    assert read_file(str(docs / "sub"), grant(docs), 100).code == "refused:not-a-file"
    assert read_file(str(docs / "sub" / "plan.txt" / "x"), grant(docs), 100).code == "refused:unavailable"
    os.mkfifo(docs / "pipe")
    started = time.monotonic()
    assert read_file(str(docs / "pipe"), grant(docs), 100).code == "refused:not-a-file"
    assert time.monotonic() - started < 5


def test_the_walk_returns_the_real_path(tree: tuple[Path, Path]) -> None:
    docs, _ = tree
    os.symlink("sub", docs / "same")
    fd, real = open_walked(f"{docs}/same/./plan.txt")
    os.close(fd)
    assert real == str(docs / "sub" / "plan.txt")
