"""A long owner command's progress (issue 16): the request's answer or failure comes back unchanged,
with a spinner on stderr only when stderr is a terminal."""

from __future__ import annotations

import io
import time

import pytest

from boxmaker.bxctl import progress


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def slow() -> str:
    time.sleep(progress.QUIET_FOR + 0.5)
    return "reindexed"


def test_the_answer_comes_back_and_a_terminal_sees_the_spinner(monkeypatch: pytest.MonkeyPatch) -> None:
    terminal = Terminal()
    monkeypatch.setattr(progress.sys, "stderr", terminal)
    assert progress.with_progress("reindexing", slow) == "reindexed"
    assert "reindexing…" in terminal.getvalue()


def test_nothing_is_printed_when_stderr_is_not_a_terminal(capsys: pytest.CaptureFixture[str]) -> None:
    assert progress.with_progress("reindexing", slow) == "reindexed"
    assert capsys.readouterr().err == ""


def test_a_failure_is_raised_in_the_callers_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(progress.sys, "stderr", Terminal())

    def fails() -> str:
        time.sleep(progress.QUIET_FOR + 0.3)
        raise OSError("memoryd went away")

    with pytest.raises(OSError, match="went away"):
        progress.with_progress("exporting", fails)


def test_a_bar_counts_the_items_of_a_long_import(monkeypatch: pytest.MonkeyPatch) -> None:
    terminal = Terminal()
    monkeypatch.setattr(progress.sys, "stderr", terminal)
    with progress.progress_bar("importing from chatgpt", 20) as advance:
        for _ in range(4):
            advance(5)
    assert "importing from chatgpt" in terminal.getvalue()


def test_no_bar_for_a_few_items_or_off_a_terminal(capsys: pytest.CaptureFixture[str]) -> None:
    with progress.progress_bar("importing from hermes", 500) as advance:
        advance(500)
    assert capsys.readouterr().err == ""
