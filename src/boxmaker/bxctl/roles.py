"""``bxctl up``, ``down`` and ``status``: the roles for one home, as background processes (DESIGN 1, 10.5).

`up` writes each role's config only where none exists (``{home}/config/<role>.toml``; never the
owner's), starts each role that does not answer yet as ``python -m boxmaker.<role> serve --config``,
logging to ``{home}/run/<role>.log`` with its pid in ``{home}/run/<role>.pid``, and returns once every
role answers; it is a no-op for a role already running. `down` sends SIGTERM and waits. `status` asks
each role over its owner socket.

The roles, in the order `up` starts them: memoryd, brokerd, loopd. loopd's config carries the model
server's URL and per-slot context, which `up` reads from the server (`model_probe`).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path

import httpx

from boxmaker.proto import wire
from boxmaker.proto.errors import PeerError
from boxmaker.proto.fsio import ensure_dir, lock_holder
from boxmaker.proto.home import Layout
from boxmaker.proto.messages import Body, MemoryAdmin, MemoryAdminReply, Status, StatusReply

MEMORYD_CONFIG = """\
# memoryd's configuration, written once by `bxctl up`; yours to edit, never overwritten.
# Every key: docs/configuration.md. Unknown keys are an error. `bxctl up` starts memoryd with
# --home set to this home, so the folder can be moved as a whole.

[memory]
review = false          # true: writes to memory.md and user.md wait for `bxctl memory accept`
# soul_starter = "soul.md"   # copied to memory/soul.md once, when that is missing

[index]
max_class = "private"   # records above this class are not indexed
"""


BROKERD_CONFIG = """\
# brokerd's configuration, written once by `bxctl up`; yours to edit, never overwritten.
# Every key: docs/configuration.md and docs/brokerd.md. Unknown keys are an error.
# Grants live in {home}/grants/, one TOML file per grant (examples: docs/brokerd.md).

[approvals]
timeout_s = 600         # a call under an `ask` grant waits this long for `bxctl approve`

[http_fetch]
max_bytes = 2000000     # the most of a page http_fetch returns
timeout_s = 20
"""

LOOPD_CONFIG = """\
# loopd's configuration, written once by `bxctl up`; yours to edit, never overwritten.
# Every key: docs/configuration.md. Unknown keys are an error.

[model]
url = "{url}"
{name_line}
{key_line}

[expect]
{n_ctx_line}

[slots]
main = 0                # live sessions
background = {background}          # compaction summaries and the scheduler

[limits]
tool_calls_per_turn = 16
max_tokens = 2048

[compact]
threshold = 0.85        # a turn that leaves the slot this full (of n_ctx) starts a new epoch
summary_chars = 4000    # the summary carried into it, at most
summarise = ["http_fetch"]   # tools whose outputs get a summary that recall can find
flush = true            # a turn to save memory first, at threshold - flush_margin (0.05)

[heartbeat]
every_s = 0             # seconds between heartbeat turns (the `heartbeat` session); 0: off
# Cron jobs: one file per job in {{home}}/jobs/ (docs/configuration.md); bxctl jobs lists them.
"""


@dataclass(frozen=True, slots=True)
class Role:
    """A role bxctl can start: its name, config template, the socket that answers `status` and the
    lock file its process holds."""

    name: str
    config_template: str
    socket_key: str

    def socket(self, layout: Layout) -> Path:
        """The owner socket `status` is asked on: ``[sockets] <key>`` in the role's config when set
        there, else the default under the home."""
        default = {
            "memoryd": layout.memory_admin_socket,
            "brokerd": layout.broker_admin_socket,
            "loopd": layout.loop_owner_socket,
        }[self.name]
        return configured_socket(self.config(layout), self.socket_key) or default

    def lock(self, layout: Layout) -> Path:
        """The lock the running role holds (its pid is written in it)."""
        return {"memoryd": layout.memory_lock, "brokerd": layout.broker_lock, "loopd": layout.loop_lock}[
            self.name
        ]

    def status_request(self) -> Body:
        """What `status` sends: memoryd answers `memory_admin status`, the others `status`."""
        return MemoryAdmin(command="status") if self.name == "memoryd" else Status()

    def config(self, layout: Layout) -> Path:
        """Where `up` keeps the role's config."""
        return layout.config / f"{self.name}.toml"

    def pid_file(self, layout: Layout) -> Path:
        """The pid of the process `up` started."""
        return layout.run / f"{self.name}.pid"

    def log_file(self, layout: Layout) -> Path:
        """Where the started process logs."""
        return layout.run / f"{self.name}.log"


MEMORYD = Role("memoryd", MEMORYD_CONFIG, "admin")
BROKERD = Role("brokerd", BROKERD_CONFIG, "admin")
LOOPD = Role("loopd", LOOPD_CONFIG, "owner")
ROLES = (MEMORYD, BROKERD, LOOPD)


DEFAULT_MODEL_URL = "http://127.0.0.1:8080"


@dataclass(frozen=True, slots=True)
class ModelProbe:
    """What a model server says about itself: whether it answered, whether it is llama-server
    (``/props`` or ``/slots``), its per-slot context and its slot count (None when not reported)."""

    answered: bool
    llama: bool
    n_ctx: int | None
    slots: int | None
    detail: str
    supports_tools: bool | None = None
    models: tuple[str, ...] = ()
    #: Something answers HTTP at the URL, but no model server's endpoint (a web server on that port).
    not_model: bool = False


def model_probe(url: str, timeout: float = 5.0) -> ModelProbe:
    """Ask the server at `url` for ``/props`` and ``/slots`` (llama-server), else ``/v1/models``.

    Never raises: a server that does not answer is ``answered=False`` with the reason in `detail`.
    """
    base = url.rstrip("/").removesuffix("/v1")
    n_ctx: int | None = None
    slots: int | None = None
    tools: bool | None = None
    llama = False
    try:
        with httpx.Client(timeout=timeout) as http:
            props = _json(http.get(f"{base}/props"))
            if isinstance(props, dict) and ("default_generation_settings" in props or "total_slots" in props):
                llama = True
                settings = props.get("default_generation_settings")
                if isinstance(settings, dict) and _positive(settings.get("n_ctx")):
                    n_ctx = settings["n_ctx"]
                if _positive(props.get("total_slots")):
                    slots = props["total_slots"]
                caps = props.get("chat_template_caps")
                if isinstance(caps, dict) and isinstance(caps.get("supports_tools"), bool):
                    tools = caps["supports_tools"]
            listed = _json(http.get(f"{base}/slots"))
            if isinstance(listed, list) and listed:
                llama = True
                slots = len(listed)
                first = listed[0]
                if n_ctx is None and isinstance(first, dict) and _positive(first.get("n_ctx")):
                    n_ctx = first["n_ctx"]
            listing = http.get(f"{base}/v1/models")
            models = _model_names(_json(listing))
            kind = "llama-server" if llama else _kind(http, base)
    except (httpx.HTTPError, httpx.InvalidURL) as exc:
        return ModelProbe(False, False, None, None, f"no model server answers at {base} ({exc})")
    if not llama and not kind.startswith("Ollama") and not _lists_models(listing):
        detail = (
            f"something answers HTTP at {base}, but not as a model server (GET /v1/models: HTTP "
            f"{listing.status_code}); check the URL (bxctl up --model-url URL)"
        )
        return ModelProbe(False, False, None, None, detail, not_model=True)
    if not llama and listing.status_code in (401, 403):
        kind += " (it asks for an API key: --api-key-env VAR)"
    return ModelProbe(True, llama, n_ctx, slots, f"{kind} at {base}", tools, models)


def _lists_models(listing: httpx.Response) -> bool:
    """``GET /v1/models`` answered as an OpenAI-compatible server does: a JSON object with a ``data``
    list, or 401/403 (a server that wants an API key)."""
    if listing.status_code in (401, 403):
        return True
    data = _json(listing)
    return isinstance(data, dict) and isinstance(data.get("data"), list)


def _kind(http: httpx.Client, base: str) -> str:
    """Which OpenAI-compatible server answers: Ollama says so at ``/api/version``; others are named by
    their kind only."""
    version = _json(http.get(f"{base}/api/version"))
    if isinstance(version, dict) and isinstance(version.get("version"), str):
        return f"Ollama {version['version']} (it needs --model NAME)"
    return "an OpenAI-compatible server"


def _model_names(listed: object) -> tuple[str, ...]:
    """The model ids ``/v1/models`` lists."""
    data = listed.get("data") if isinstance(listed, dict) else None
    if not isinstance(data, list):
        return ()
    return tuple(str(m["id"])[:80] for m in data if isinstance(m, dict) and isinstance(m.get("id"), str))


def configured_model_url(config: Path) -> str | None:
    """``[model] url`` of loopd.toml; None when absent or unreadable."""
    try:
        data = tomllib.loads(config.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None
    table = data.get("model")
    url = table.get("url") if isinstance(table, dict) else None
    return url if isinstance(url, str) else None


def _json(response: httpx.Response) -> object:
    if response.status_code != 200:
        return None
    try:
        return response.json()
    except ValueError:
        return None


def _positive(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


@dataclass(frozen=True, slots=True)
class RoleStatus:
    """Whether a role answers, and what it says."""

    name: str
    running: bool
    pid: int | None
    detail: str


def configured_socket(config: Path, name: str) -> Path | None:
    """``[sockets] <name>`` of a role's config, resolved against the config's folder; None when the
    config or the key is absent or unreadable (the role itself reports a broken config)."""
    try:
        data = tomllib.loads(config.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None
    sockets = data.get("sockets")
    value = sockets.get(name) if isinstance(sockets, dict) else None
    return (config.parent / Path(value).expanduser()).absolute() if isinstance(value, str) and value else None


def status(layout: Layout, role: Role) -> RoleStatus:
    """Ask a role over its owner socket whether it runs. A role that does not answer while a process
    still holds its lock (one starting, stopping, or stuck) is named with that pid."""
    try:
        reply = wire.call(role.socket(layout), role.status_request(), timeout=10.0)
    except PeerError as exc:
        holder = lock_holder(role.lock(layout))
        if holder is None:
            return RoleStatus(role.name, False, None, exc.message)
        detail = f"{exc.message}; pid {holder} still holds {role.lock(layout)} (starting, stopping or stuck)"
        return RoleStatus(role.name, False, holder, detail)
    if isinstance(reply, StatusReply):
        return RoleStatus(role.name, True, reply.pid, reply.detail)
    if not isinstance(reply, MemoryAdminReply) or not isinstance(reply.data, dict):
        return RoleStatus(role.name, False, None, "unexpected reply to status")
    pid = reply.data.get("pid")
    return RoleStatus(role.name, True, pid if isinstance(pid, int) else None, reply.text)


class StartError(Exception):
    """Raised when a role does not come up; the sentence quotes the end of its log."""


class AlreadyRunning(Exception):
    """Raised by `start` when the role started meanwhile by someone else answers for the home."""

    def __init__(self, current: RoleStatus) -> None:
        super().__init__(f"{current.name} already running (pid {current.pid})")
        self.current = current


def write_config(layout: Layout, role: Role, text: str | None = None) -> tuple[Path, bool]:
    """Write the role's config (`text`, else its template) if none exists. Returns its path and
    whether it was written."""
    path = role.config(layout)
    ensure_dir(path.parent)  # config/ is in no role's start-up check: kept 0700 here
    if path.exists():
        return path, False
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(role.config_template if text is None else text)
    return path, True


def loopd_config_text(
    url: str,
    n_ctx: int | None,
    slots: int | None,
    source: str = "as the server reported it",
    *,
    name: str | None = None,
    key_env: str | None = None,
) -> str:
    """loopd.toml for a model server at `url` with `n_ctx` tokens per slot (`source` says where the
    number came from; None: learnt when the server first answers) and `slots` slots (one slot: live and
    background work share slot 0), the model `name` to send and the environment variable `key_env`
    holding an API key (never the key)."""
    if n_ctx:
        n_ctx_line = f"n_ctx = {n_ctx}          # per slot, {source}"
    else:
        n_ctx_line = "# n_ctx = 4096          # per slot; without it loopd uses what the server reports"
    name_line = (
        f"name = {json.dumps(name)}"
        if name
        else '# name = ""             # the "model" field, for servers that need one'
    )
    key_line = (
        f"api_key_env = {json.dumps(key_env)}   # the API key is read from this variable, never written here"
        if key_env
        else '# api_key_env = ""      # an environment variable holding an API key (the key is never written)'
    )
    background = 0 if slots == 1 else 1
    return LOOPD_CONFIG.format(
        url=url.replace('"', ""),
        n_ctx_line=n_ctx_line,
        background=background,
        name_line=name_line,
        key_line=key_line,
    )


def start(layout: Layout, role: Role, timeout: float = 120.0) -> RoleStatus:
    """Start `role` in the background and wait until it answers.

    Raises:
        StartError: the process exited or did not answer within `timeout` seconds.
    """
    config = role.config(layout)
    if not config.exists():
        write_config(
            layout, role, loopd_config_text(DEFAULT_MODEL_URL, None, None) if role is LOOPD else None
        )
    ensure_dir(layout.run, tighten=False)  # run/ is the roles' start-up check's to judge
    log_path = role.log_file(layout)
    command = [
        sys.executable,
        "-m",
        f"boxmaker.{role.name}",
        "serve",
        "--config",
        str(config),
        "--home",
        str(layout.home),
    ]
    with log_path.open("ab") as log:
        os.chmod(log_path, 0o600)
        offset = log.tell()  # what this start writes begins here: earlier starts' lines are not news
        process = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True
        )
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        current = status(layout, role)
        if current.running and current.pid == process.pid:
            _write_pid(role.pid_file(layout), process.pid)
            return current
        if process.poll() is not None:
            if current.running:  # another one already serves this home
                raise AlreadyRunning(current)
            said = "\n".join(line.removeprefix("Error: ") for line in _tail(log_path, offset).split("\n"))
            raise StartError(f"{role.name} exited with status {process.returncode}; its log says:\n{said}")
        time.sleep(0.1)
    raise StartError(f"{role.name} did not answer within {timeout:g} s; see {log_path}")


def _write_pid(path: Path, pid: int) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="ascii") as handle:
        handle.write(f"{pid}\n")


def _tail(path: Path, offset: int = 0, lines: int = 12) -> str:
    """The last `lines` lines written to `path` after byte `offset`."""
    try:
        with path.open("rb") as handle:
            handle.seek(offset)
            text = handle.read().decode("utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join(text.rstrip("\n").split("\n")[-lines:])


def stop(layout: Layout, role: Role, timeout: float = 15.0) -> str:
    """Stop the role serving this home (SIGTERM, then wait). Returns what happened, in a sentence.

    The process is the one that answers on the home's socket, or else the one holding the home's
    lock (its pid is in the lock file): never a pid taken on trust from a file.
    """
    pid_file = role.pid_file(layout)
    current = status(layout, role)
    pid = current.pid if current.running else lock_holder(role.lock(layout))
    if pid is None or not _alive(pid):
        pid_file.unlink(missing_ok=True)
        return f"{role.name} is not running"
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and _alive(pid):
        time.sleep(0.05)
    if _alive(pid):
        return f"{role.name} (pid {pid}) did not stop within {timeout:g} s; it is still running"
    pid_file.unlink(missing_ok=True)
    return f"stopped {role.name} (pid {pid})"


def _alive(pid: int) -> bool:
    try:
        waited, _ = os.waitpid(pid, os.WNOHANG)
        if waited == pid:
            return False
    except ChildProcessError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
