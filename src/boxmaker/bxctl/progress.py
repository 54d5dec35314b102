"""A long owner command's progress on the terminal (issue 16: ``bxctl reindex`` and ``bxctl memory
export`` in a home of 100,000 items take seconds): while the request runs, a spinner on stderr says
what is being done and for how long; a command that sends many requests (``bxctl import`` of a large
export, issue 17) shows a bar of how many of its items are done. Nothing is printed when stderr is
not a terminal (scripts, tests, ``--json`` pipelines read stdout only)."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

T = TypeVar("T")

#: The spinner appears only for a request still running after this long, in seconds.
QUIET_FOR = 0.5


def with_progress(doing: str, call: Callable[[], T]) -> T:
    """Run `call` (a request to a role), showing ``<doing>… N s`` on stderr while it runs."""
    if not sys.stderr.isatty():
        return call()
    done = threading.Event()
    result: list[T] = []
    failure: list[BaseException] = []

    def run() -> None:
        try:
            result.append(call())
        except BaseException as exc:  # handed to the caller's thread below
            failure.append(exc)
        finally:
            done.set()

    worker = threading.Thread(target=run, name="bxctl-request", daemon=True)
    started = time.monotonic()
    worker.start()
    if not done.wait(QUIET_FOR):
        console = Console(stderr=True, highlight=False)
        with console.status(f"{doing}…") as status:
            while not done.wait(0.2):
                status.update(f"{doing}… {time.monotonic() - started:,.0f} s")
    worker.join()
    if failure:
        raise failure[0]
    return result[0]


#: A bar appears only for at least this many items.
BAR_FROM = 10


@contextmanager
def progress_bar(doing: str, total: int) -> Iterator[Callable[[int], None]]:
    """A bar on stderr counting `total` items (``importing from chatgpt ━━━━ 120/800 0:00:04``); the
    yielded function advances it by the items just done. Nothing is shown when stderr is not a
    terminal or there are fewer than `BAR_FROM` items."""
    if not sys.stderr.isatty() or total < BAR_FROM:
        yield _nothing
        return
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=Console(stderr=True, highlight=False), transient=True) as bar:
        task = bar.add_task(doing, total=total)
        yield lambda done: bar.advance(task, done)


def _nothing(done: int) -> None:
    del done
