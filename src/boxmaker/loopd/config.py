"""loopd's configuration, ``loopd.toml`` (M5a section 9; DESIGN 7 and 10.1).

::

    [paths]
    home = "/var/lib/boxmaker"       # default: DESIGN 10.1's order

    [model]
    url = "http://127.0.0.1:8080"    # llama-server, or any OpenAI-compatible server
    name = ""                        # the "model" field of requests; empty: not sent
    api_key_env = ""                 # an environment variable holding a bearer token; empty: none
    timeout_s = 600                  # seconds one model request may take

    [expect]
    n_ctx = 4096                     # the server's PER-SLOT context; checked against /props at start

    [slots]
    main = 0                         # live sessions
    background = 1                   # background work (compaction summaries, the scheduler)

    [memory]
    socket = "..."                   # memoryd's loop socket; default run/loop-memory/memory.sock

    [broker]
    socket = "..."                   # brokerd's loop socket; default run/loop-broker/broker.sock
    timeout_s = 900                  # a tool call may wait this long (an `ask` grant waits for the owner)

    [sockets]
    owner = "..."                    # loopd's socket for bxctl; default run/owner-loop/chat.sock

    [prompt]
    system = "system.md"             # next to the config file; the packaged starter when absent

    [limits]
    tool_calls_per_turn = 16         # a turn that reaches it ends with a reply saying so
    max_tokens = 2048                # the longest reply, in tokens
    connections = 64                 # the owner socket's connections at once; one more is `busy`
    idle_s = 10                      # seconds a connection may take to send its request

    [compact]                        # M5d section 5
    threshold = 0.85                 # compact after a turn that leaves the slot this full (of n_ctx)
    summary_chars = 4000             # the longest carried summary, in characters
    prompt = "compact.md"            # next to the config file; the packaged starter when absent
    summarise = ["http_fetch"]       # tools whose outputs get a summary for recall (M5d 4.3)
    summarise_prompt = "summarise.md"
    flush = true                     # one turn to save memory before compaction (issue 19)
    flush_margin = 0.05              # ...when the slot reaches threshold - flush_margin of n_ctx
    flush_timeout_s = 60             # seconds that turn may take; then compaction goes on without it
    flush_prompt = "flush.md"        # next to the config file; the packaged starter when absent

    [heartbeat]                      # M5d section 4.1
    every_s = 0                      # seconds between heartbeat turns; 0 (the default) disables it
    prompt = "heartbeat.md"          # read at each beat; unreadable: the beat is skipped and logged once

Unknown keys are an error naming the key. Relative paths resolve against the config file's folder.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated

import msgspec

from boxmaker.loopd.summaries import SUMMARISABLE
from boxmaker.proto.errors import ConfigError
from boxmaker.proto.home import Layout
from boxmaker.proto.settings import SocketLimits, load_role_config, model_url
from boxmaker.proto.wire import Limits

DEFAULT_MODEL_URL = "http://127.0.0.1:8080"

Positive = Annotated[int, msgspec.Meta(ge=1)]
Slot = Annotated[int, msgspec.Meta(ge=0, le=1023)]


class _Paths(msgspec.Struct, forbid_unknown_fields=True):
    home: str | None = None


class _Model(msgspec.Struct, forbid_unknown_fields=True):
    url: str = DEFAULT_MODEL_URL
    name: str = ""
    api_key_env: str = ""
    timeout_s: Annotated[float, msgspec.Meta(gt=0)] = 600.0


class _Expect(msgspec.Struct, forbid_unknown_fields=True):
    n_ctx: Positive | None = None


class _Slots(msgspec.Struct, forbid_unknown_fields=True):
    main: Slot = 0
    background: Slot = 1


class _Memory(msgspec.Struct, forbid_unknown_fields=True):
    socket: str | None = None


class _Broker(msgspec.Struct, forbid_unknown_fields=True):
    socket: str | None = None
    timeout_s: Annotated[float, msgspec.Meta(gt=0)] = 900.0


class _Sockets(msgspec.Struct, forbid_unknown_fields=True):
    owner: str | None = None


class _Prompt(msgspec.Struct, forbid_unknown_fields=True):
    system: str | None = None


class _Limits(SocketLimits, forbid_unknown_fields=True):
    tool_calls_per_turn: Annotated[int, msgspec.Meta(ge=1, le=1000)] = 16
    max_tokens: Annotated[int, msgspec.Meta(ge=1, le=1_000_000)] = 2048


class _Compact(msgspec.Struct, forbid_unknown_fields=True):
    threshold: Annotated[float, msgspec.Meta(gt=0, le=1)] = 0.85
    summary_chars: Annotated[int, msgspec.Meta(ge=200, le=100_000)] = 4000
    prompt: str | None = None
    summarise: list[str] = msgspec.field(default_factory=lambda: ["http_fetch"])
    summarise_prompt: str | None = None
    flush: bool = True
    flush_margin: Annotated[float, msgspec.Meta(ge=0, lt=1)] = 0.05
    flush_timeout_s: Annotated[float, msgspec.Meta(gt=0, le=3600)] = 60.0
    flush_prompt: str | None = None


class _Heartbeat(msgspec.Struct, forbid_unknown_fields=True):
    every_s: Annotated[int, msgspec.Meta(ge=0, le=7 * 86_400)] = 0
    prompt: str | None = None


class _File(msgspec.Struct, forbid_unknown_fields=True):
    paths: _Paths = msgspec.field(default_factory=_Paths)
    model: _Model = msgspec.field(default_factory=_Model)
    expect: _Expect = msgspec.field(default_factory=_Expect)
    slots: _Slots = msgspec.field(default_factory=_Slots)
    memory: _Memory = msgspec.field(default_factory=_Memory)
    broker: _Broker = msgspec.field(default_factory=_Broker)
    sockets: _Sockets = msgspec.field(default_factory=_Sockets)
    prompt: _Prompt = msgspec.field(default_factory=_Prompt)
    limits: _Limits = msgspec.field(default_factory=_Limits)
    compact: _Compact = msgspec.field(default_factory=_Compact)
    heartbeat: _Heartbeat = msgspec.field(default_factory=_Heartbeat)


@dataclass(frozen=True, slots=True)
class Config:
    """loopd's settings, resolved: every path absolute."""

    home: Path
    model_url: str
    model_name: str | None
    api_key_env: str | None
    model_timeout: float
    expect_n_ctx: int | None
    main_slot: int
    background_slot: int
    memory_socket: Path
    broker_socket: Path
    broker_timeout: float
    owner_socket: Path
    system_prompt: Path
    tool_calls_per_turn: int
    max_tokens: int
    threshold: float
    summary_chars: int
    compact_prompt: Path
    summarise: frozenset[str]
    summarise_prompt: Path
    flush: bool
    flush_margin: float
    flush_timeout_s: float
    flush_prompt: Path
    heartbeat_every_s: int
    heartbeat_prompt: Path
    limits: Limits = field(default_factory=Limits)

    @property
    def layout(self) -> Layout:
        """The home's layout."""
        return Layout(self.home)


def _check_url(url: str, path: str) -> str:
    try:
        return model_url(url)
    except ValueError as exc:
        raise ConfigError(path, f"[model] url: {exc}") from None


def load(config_path: Path | None = None, cli_home: str | None = None) -> Config:
    """Read loopd's config (defaults when `config_path` is None) and resolve it.

    Raises:
        ConfigError: unreadable file, bad TOML, unknown key, bad value, a URL that is not http(s),
            or a configured system prompt that does not exist.
    """
    read = load_role_config("loopd", _File, config_path, cli_home)
    raw, layout = read.tables, read.layout
    system = read.starter(raw.prompt.system, "system.md", "[prompt] system")
    compact_prompt = read.starter(raw.compact.prompt, "compact.md", "[compact] prompt")
    summarise_prompt = read.starter(
        raw.compact.summarise_prompt, "summarise.md", "[compact] summarise_prompt"
    )
    heartbeat_prompt = read.starter(raw.heartbeat.prompt, "heartbeat.md", "[heartbeat] prompt")
    flush_prompt = read.starter(raw.compact.flush_prompt, "flush.md", "[compact] flush_prompt")
    if raw.compact.flush and raw.compact.flush_margin >= raw.compact.threshold:
        raise ConfigError(
            read.where,
            f"[compact] flush_margin = {raw.compact.flush_margin:g} must be below threshold = "
            f"{raw.compact.threshold:g} (the flush runs at threshold - flush_margin of the context)",
        )
    unknown = sorted(set(raw.compact.summarise) - SUMMARISABLE)
    if unknown:
        raise ConfigError(
            read.where,
            f"[compact] summarise: {unknown[0]!r} is not a tool whose output can be summarised "
            f"(known: {', '.join(sorted(SUMMARISABLE))})",
        )
    return Config(
        home=read.home,
        model_url=_check_url(raw.model.url, read.where),
        model_name=raw.model.name or None,
        api_key_env=raw.model.api_key_env or None,
        model_timeout=raw.model.timeout_s,
        expect_n_ctx=raw.expect.n_ctx,
        main_slot=raw.slots.main,
        background_slot=raw.slots.background,
        memory_socket=read.resolve(raw.memory.socket) or layout.memory_loop_socket,
        broker_socket=read.resolve(raw.broker.socket) or layout.broker_loop_socket,
        broker_timeout=raw.broker.timeout_s,
        owner_socket=read.resolve(raw.sockets.owner) or layout.loop_owner_socket,
        system_prompt=system,
        tool_calls_per_turn=raw.limits.tool_calls_per_turn,
        max_tokens=raw.limits.max_tokens,
        threshold=raw.compact.threshold,
        summary_chars=raw.compact.summary_chars,
        compact_prompt=compact_prompt,
        summarise=frozenset(raw.compact.summarise),
        summarise_prompt=summarise_prompt,
        flush=raw.compact.flush,
        flush_margin=raw.compact.flush_margin,
        flush_timeout_s=raw.compact.flush_timeout_s,
        flush_prompt=flush_prompt,
        heartbeat_every_s=raw.heartbeat.every_s,
        heartbeat_prompt=heartbeat_prompt,
        limits=raw.limits.sockets,
    )
