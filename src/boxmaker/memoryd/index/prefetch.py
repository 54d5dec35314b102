"""Producing a bulk catch-up's next batches on a second thread while this one writes (`db.IndexDB`)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from queue import Empty, Queue
from typing import Any, TypeVar

T = TypeVar("T")


def prefetch(items: Iterator[T], depth: int = 2) -> Iterator[T]:
    """Yield `items`, produced on a background thread up to `depth` ahead; a producer's error is
    raised here. Stopping early (an error in the consumer) stops the producer."""
    queue: Queue[tuple[bool, Any]] = Queue(maxsize=depth)
    stop = threading.Event()

    def produce() -> None:
        try:
            for item in items:
                if stop.is_set():
                    return
                queue.put((True, item))
        except BaseException as exc:
            queue.put((False, exc))
            return
        queue.put((False, None))

    thread = threading.Thread(target=produce, name="index-prefetch", daemon=True)
    thread.start()
    try:
        while True:
            more, value = queue.get()
            if not more:
                if isinstance(value, BaseException):
                    raise value
                return
            yield value
    finally:
        stop.set()
        while thread.is_alive():
            with contextlib.suppress(Empty):
                queue.get(timeout=0.05)
