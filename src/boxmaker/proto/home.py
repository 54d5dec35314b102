"""The home folder and its layout (DESIGN 2 and 10.1).

Resolution order, the same for every role and bxctl: ``--home`` on the command line, else ``[paths]
home`` in the role's config, else ``$BOXMAKER_HOME``, else ``/var/lib/boxmaker`` when running as root
or when that folder exists and is writable, else ``${XDG_DATA_HOME:-~/.local/share}/boxmaker``.
A missing home is created 0700.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from boxmaker.proto.errors import HomeError
from boxmaker.proto.fsio import ensure_dir

SYSTEM_HOME = Path("/var/lib/boxmaker")


def resolve_home(
    cli_home: str | os.PathLike[str] | None = None,
    config_home: str | os.PathLike[str] | None = None,
    environ: Mapping[str, str] | None = None,
) -> Path:
    """The home folder by DESIGN 10.1's order (not created; see `ensure_home`).

    Args:
        cli_home: ``--home`` from a command line, or None.
        config_home: ``[paths] home`` from a config (already resolved against the config's folder).
        environ: the environment (default `os.environ`).
    """
    env = os.environ if environ is None else environ
    for candidate in (cli_home, config_home, env.get("BOXMAKER_HOME") or None):
        if candidate:
            return Path(candidate).expanduser().absolute()
    if _is_root() or (SYSTEM_HOME.is_dir() and os.access(SYSTEM_HOME, os.W_OK | os.X_OK)):
        return SYSTEM_HOME
    data_home = env.get("XDG_DATA_HOME") or str(Path(env.get("HOME", "~")) / ".local" / "share")
    return Path(data_home).expanduser().absolute() / "boxmaker"


def _is_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


def ensure_home(home: Path, *, tighten: bool = True) -> Path:
    """Create `home` with mode 0700 if missing; an existing home is set to 0700, or with
    ``tighten=False`` left as it is (`fsio.ensure_dir`).

    Raises:
        HomeError: when it cannot be created or is not a folder.
    """
    try:
        ensure_dir(home, tighten=tighten)
    except OSError as exc:
        raise HomeError(f"cannot create the home folder {home}: {exc.strerror or exc}") from None
    return home


@dataclass(frozen=True, slots=True)
class Layout:
    """Where each role keeps its files under one home (DESIGN section 2)."""

    home: Path

    @property
    def memory(self) -> Path:
        """memoryd's files: soul.md, memory.md, user.md, notes.md, edits/, recalls/, pending.jsonl."""
        return self.home / "memory"

    @property
    def memory_lock(self) -> Path:
        """The lock memoryd holds for its whole life (one writer per home); it holds memoryd's pid."""
        return self.memory / ".lock"

    @property
    def index(self) -> Path:
        """memoryd's disposable index folder."""
        return self.home / "index"

    @property
    def sessions(self) -> Path:
        """loopd's session logs: sessions/<id>/N.jsonl and N.baseline.json."""
        return self.home / "sessions"

    @property
    def imports(self) -> Path:
        """memoryd's archives of imported conversations: imports/<source>/<id>.jsonl (issue 17)."""
        return self.home / "imports"

    @property
    def run(self) -> Path:
        """Sockets, pid files and role logs."""
        return self.home / "run"

    @property
    def config(self) -> Path:
        """Configs written by ``bxctl up`` (never overwritten)."""
        return self.home / "config"

    def socket(self, peer: str, role: str, name: str) -> Path:
        """A socket path: ``run/<peer>-<role>/<name>``, e.g. run/loop-memory/memory.sock."""
        return self.run / f"{peer}-{role}" / name

    @property
    def memory_loop_socket(self) -> Path:
        """memoryd's socket for loopd (M5a section 7)."""
        return self.socket("loop", "memory", "memory.sock")

    @property
    def memory_broker_socket(self) -> Path:
        """memoryd's socket for brokerd (M5a section 7)."""
        return self.socket("broker", "memory", "memory.sock")

    @property
    def memory_admin_socket(self) -> Path:
        """memoryd's socket for the owner's bxctl (M5a section 7)."""
        return self.socket("owner", "memory", "admin.sock")

    @property
    def memory_mcp_socket(self) -> Path:
        """memoryd's socket for the MCP servers (``boxmaker-mcp``; issue 17): run/mcp-memory/mcp.sock."""
        return self.socket("mcp", "memory", "mcp.sock")

    @property
    def broker(self) -> Path:
        """brokerd's files: sessions/<id>.json (each session's label) and audit/ (the audit log)."""
        return self.home / "broker"

    @property
    def broker_lock(self) -> Path:
        """The lock brokerd holds for its whole life (one broker per home); it holds brokerd's pid."""
        return self.broker / ".lock"

    @property
    def grants(self) -> Path:
        """The owner's grants: one TOML file per grant."""
        return self.home / "grants"

    @property
    def jobs(self) -> Path:
        """The owner's cron jobs and loopd's runs.jsonl (M5d 4.2)."""
        return self.home / "jobs"

    @property
    def loop_lock(self) -> Path:
        """The lock loopd holds for its whole life (one loop per home); it holds loopd's pid."""
        return self.sessions / ".lock"

    @property
    def broker_loop_socket(self) -> Path:
        """brokerd's socket for loopd's tool calls."""
        return self.socket("loop", "broker", "broker.sock")

    @property
    def broker_admin_socket(self) -> Path:
        """brokerd's socket for the owner's bxctl (approvals, grants, status)."""
        return self.socket("owner", "broker", "admin.sock")

    @property
    def loop_owner_socket(self) -> Path:
        """loopd's socket for the owner's bxctl (chat, status)."""
        return self.socket("owner", "loop", "chat.sock")
