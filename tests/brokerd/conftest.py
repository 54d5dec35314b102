"""Fixtures for brokerd's tests: a broker on the throwaway home, a fake memoryd, grant files."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from boxmaker.brokerd.config import Config, defaults
from boxmaker.brokerd.server import Server
from boxmaker.brokerd.service import Brokerd
from brokerd.brokerd_helpers import FakeMemoryd


@pytest.fixture
def config(home: Path) -> Config:
    """brokerd's defaults on the throwaway home, with short timeouts."""
    return dataclasses.replace(defaults(home), approval_timeout_s=5.0, memoryd_timeout_s=2.0)


@pytest.fixture
def broker(config: Config) -> Brokerd:
    """A broker service (no sockets)."""
    service = Brokerd(config)
    service.open()
    return service


@pytest.fixture
def memoryd(config: Config) -> Iterator[FakeMemoryd]:
    """A fake memoryd on the broker's memory socket."""
    fake = FakeMemoryd(config.memory_socket)
    fake.server.start()
    yield fake
    fake.server.stop()


@pytest.fixture
def serving(config: Config) -> Iterator[Callable[..., Server]]:
    """Start an in-process brokerd (lock and both sockets) on a config; stopped afterwards."""
    started: list[Server] = []

    def start(**changes: Any) -> Server:
        server = Server(dataclasses.replace(config, **changes))
        server.start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()
