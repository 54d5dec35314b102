"""A long owner command's progress on the terminal (issue 16: ``bxctl reindex`` and ``bxctl memory
export`` in a home of 100,000 items take seconds): while the request runs, a spinner on stderr says
what is being done and for how long. Nothing is printed when stderr is not a terminal (scripts, tests,
``--json`` pipelines read stdout only)."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import TypeVar

from rich.console import Console

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
