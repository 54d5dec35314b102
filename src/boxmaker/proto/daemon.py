"""Starting a role from its command line and running it in the foreground until SIGTERM or SIGINT
(DESIGN 10.1; STYLE 11), the same way for every role.

Each role's ``cli.py`` keeps only its click shell (proto imports no click): it parses ``serve
[--config PATH] [--home PATH] [-v]``, calls `serve` with its `Role`, and turns `EmptyHome` into a
usage error on ``--home`` and `CannotStart` into a ``click.ClickException`` (exit 1).

The SIGTERM and SIGINT handlers are installed first, before the role takes its lock or binds a
socket: a stop that arrives while the role starts (its sockets may already answer) lets the start
finish and then stops it cleanly (sockets removed, lock released, exit 0), never kills it half-way.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Generic, TypeVar

from boxmaker.proto.errors import CannotStart, ConfigError, EmptyHome

log = logging.getLogger("boxmaker")

C = TypeVar("C")


@dataclass(frozen=True, slots=True)
class Role(Generic[C]):
    """How one daemon starts from its command line.

    Attributes:
        name: the role's name: the second word of its log lines, and its runbook entry
            ``<name>-start-failed``.
        load: reads the role's config (the file, or None for defaults) with ``--home``.
        run: starts the role and serves until the event it is given is set (by SIGTERM or SIGINT).
        start_failed: what `run` raises when the role cannot start (its sentence is shown as it is).
        config_prefix: said before a config error (brokerd says ``brokerd cannot start: ``).
        quiet: loggers held at WARNING (loopd: ``httpx``, which logs every request at INFO).
    """

    name: str
    load: Callable[[Path | None, str | None], C]
    run: Callable[[C, threading.Event], None]
    start_failed: type[Exception]
    config_prefix: str = ""
    quiet: tuple[str, ...] = ()


def serve(role: Role[C], config_path: Path | None, home: str | None, verbose: bool) -> None:
    """What ``<role> serve`` does: log to stderr, install the stop signals, read the config, then run
    the role until a signal.

    Raises:
        EmptyHome: `home` is given but empty.
        CannotStart: the config is unusable (``<prefix><file>: <why> (runbook: <name>-start-failed)``),
            or `role.run` raised `role.start_failed` (its sentence).
    """
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format=f"%(asctime)s {role.name} %(levelname)s %(message)s",
        stream=sys.stderr,
    )
    for name in role.quiet:
        logging.getLogger(name).setLevel(logging.WARNING)
    stopping = stop_on_signals()
    if home is not None and not home.strip():
        raise EmptyHome()
    try:
        config = role.load(config_path, home)
    except ConfigError as exc:
        raise CannotStart(f"{role.config_prefix}{exc} (runbook: {role.name}-start-failed)") from None
    try:
        role.run(config, stopping)
    except role.start_failed as exc:
        raise CannotStart(str(exc)) from None


def stop_on_signals() -> threading.Event:
    """Install SIGTERM and SIGINT handlers that set the returned event (and log the signal once).

    Must be called from the main thread (signal handlers can only be set there).
    """
    stopping = threading.Event()

    def handler(signum: int, frame: FrameType | None) -> None:
        del frame
        if not stopping.is_set():
            log.info("stopping on signal %d", signum)
        stopping.set()

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)
    return stopping


def serve_until_signal(
    stop: Callable[[], None],
    done: threading.Event,
    tick: Callable[[], None] | None = None,
    every: float = 1.0,
) -> None:
    """Block until `done` is set (`stop_on_signals` sets it on SIGTERM or SIGINT, also while the role
    was starting), calling `tick` every `every` seconds; then call `stop` (which removes the role's
    sockets and releases its lock).
    """
    try:
        while not done.wait(every):
            if tick is not None:
                tick()
    finally:
        stop()
