"""``bxctl status``: whether each role runs, and whether the agent is really ready (issue 18).

Beyond each role's own line it checks, now: the model server answers at the URL loopd uses (and its
chat template takes tools), a new session can start (memoryd serves the memory block), the job files
are valid, memoryd's index has caught up (and took every note written), the owner's grants are valid
(brokerd refuses every tool call while they are not), no role's start-up check found damage that still
stands, and memoryd's start-up check found the journal's hash chain intact since its last checkpoint
(issue 19). Exit 0 when everything is ready; 1 when a role is down or a new session cannot start; 2
when degraded (the model not reachable, a job file invalid, a template without tools, the index catching
up or behind, invalid grants, damage found at start, the journal's chain broken). ``--json`` gives each
role and each check.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

import click

from boxmaker.bxctl import roles
from boxmaker.bxctl.client import for_owner
from boxmaker.bxctl.model import NO_TOOLS_FIX
from boxmaker.bxctl.state import State, pass_state
from boxmaker.proto import wire
from boxmaker.proto.errors import PeerError
from boxmaker.proto.messages import (
    MemoryAdmin,
    MemoryAdminReply,
    MemoryBlock,
    MemoryBlockReply,
    Status,
    StatusReply,
)

#: Exit statuses.
READY, DOWN, DEGRADED = 0, 1, 2


@dataclass(frozen=True, slots=True)
class Check:
    """One check: its name, whether it passed, what was found, and how bad a failure is (``down`` or
    ``degraded``)."""

    name: str
    ok: bool
    detail: str
    severity: str = "degraded"


def _ask(path: Any, body: Any, timeout: float = 10.0) -> Any:
    try:
        return wire.call(path, body, timeout=timeout)
    except PeerError as exc:
        return exc


def model_check(loopd: Any) -> Check:
    """The model server loopd uses answers now, with a template that takes tools."""
    data = loopd.data if isinstance(loopd, StatusReply) and isinstance(loopd.data, dict) else {}
    url = data.get("model_url")
    if not isinstance(url, str):
        return Check("model", False, "unknown: loopd does not answer")
    if data.get("model_problem"):  # it answers, but contradicts loopd.toml: every chat fails
        return Check("model", False, f"{data['model_problem']} (runbook: loopd-start-failed)")
    probe = roles.model_probe(url, timeout=3.0)
    if probe.not_model:
        return Check("model", False, probe.detail)
    if not probe.answered:
        return Check("model", False, f"not reachable at {url}; chat works once it runs")
    if probe.supports_tools is False:
        return Check("model", False, f"{probe.detail}: {NO_TOOLS_FIX}")
    return Check("model", True, f"{probe.detail} answers")


def block_check(state: State) -> Check:
    """memoryd serves the memory block, so a new session can start."""
    reply = _ask(state.layout.memory_loop_socket, MemoryBlock())
    if isinstance(reply, MemoryBlockReply):
        return Check("new sessions", True, f"can start (the memory block is {len(reply.text):,} characters)")
    why = reply.message if isinstance(reply, PeerError) else "memoryd gave an unexpected reply"
    # memoryd's sentence may say "with consolidate", a tool action the owner does not have
    why = for_owner(why).replace("\n", " ")
    return Check("new sessions", False, f"cannot start: {why} (runbook: memory-unavailable)", "down")


def jobs_check(loopd: Any) -> Check:
    """The job files are valid (loopd would not start again with a broken one)."""
    data = loopd.data if isinstance(loopd, StatusReply) and isinstance(loopd.data, dict) else {}
    problem = data.get("jobs_problem")
    if problem:
        return Check("jobs", False, f"{problem} (runbook: jobs-invalid)")
    return Check(
        "jobs",
        "jobs_problem" in data,
        "valid" if "jobs_problem" in data else "unknown: loopd does not answer",
    )


def index_check(memoryd: Any) -> Check:
    """memoryd's index has read every session log."""
    data = memoryd.data if isinstance(memoryd, MemoryAdminReply) and isinstance(memoryd.data, dict) else {}
    if "index_ready" not in data:
        return Check("index", False, "unknown: memoryd does not answer")
    if data.get("index") is None:
        return Check("index", False, "cannot be read (bxctl reindex; runbook: memory-index-damaged)")
    rebuild = data.get("index_rebuild")
    if isinstance(rebuild, dict):
        why = f"; {rebuild.get('reason')}" if rebuild.get("reason") else ""  # a first build has none
        return Check("index", False, f"building: {rebuild.get('rows', 0):,} rows so far{why}")
    if not data["index_ready"]:
        return Check("index", False, "catching up with the session logs")
    if data.get("index_behind"):
        return Check(
            "index", False, f"behind: notes were written that it could not take ({data['index_behind']})"
        )
    return Check("index", True, f"caught up ({data['index'].get('records', 0):,} records)")


def journal_check(memoryd: Any) -> Check:
    """memoryd's start-up check found the journal's hash chain intact since its last checkpoint."""
    data = memoryd.data if isinstance(memoryd, MemoryAdminReply) and isinstance(memoryd.data, dict) else {}
    chained = data.get("chain")
    if not isinstance(chained, dict):
        return Check("journal", False, "unknown: memoryd does not answer")
    return Check("journal", chained.get("ok") is True, str(chained.get("text", "")))


def grants_check(brokerd: Any) -> Check:
    """The owner's grants are valid: with a problem in grants/ brokerd refuses every tool call, recall
    and memory included (it fails closed), so the agent runs without its tools."""
    data = brokerd.data if isinstance(brokerd, StatusReply) and isinstance(brokerd.data, dict) else {}
    if "grants_valid" not in data:
        return Check("grants", False, "unknown: brokerd does not answer")
    if data["grants_valid"] is False:
        return Check(
            "grants",
            False,
            f"{brokerd.detail}; every tool call is refused, recall and memory included, until it is "
            "fixed (runbook: grants-invalid)",
        )
    return Check("grants", True, "valid")


def damage_check(replies: dict[str, Any]) -> Check:
    """No role's start-up check found damage that still stands (each role's ``status`` data
    ``damage``: memoryd's files against its journal, brokerd's labels and audit, loopd's session logs).
    A role that does not answer is said by its own line, not here."""
    found = []
    for name, reply in replies.items():
        data = reply.data if isinstance(reply, (StatusReply, MemoryAdminReply)) else None
        damage = data.get("damage") if isinstance(data, dict) else None
        if isinstance(damage, list) and damage:
            first = damage[0].get("text", "") if isinstance(damage[0], dict) else str(damage[0])
            more = f" (and {len(damage) - 1} more)" if len(damage) > 1 else ""
            found.append(f"{name}: {first}{more}")
    if found:
        return Check("damage", False, "; ".join(found))
    return Check("damage", True, "none found at start")


def verdict(rows: list[roles.RoleStatus], checks: list[Check]) -> tuple[int, str]:
    """The exit status and the closing line."""
    down = [r.name for r in rows if not r.running] + [
        c.name for c in checks if not c.ok and c.severity == "down"
    ]
    if down:
        return DOWN, f"not ready: {', '.join(down)}"
    degraded = [c.name for c in checks if not c.ok]
    if degraded:
        return DEGRADED, f"degraded: {', '.join(degraded)}"
    return READY, "ready"


@click.command(name="status")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
@pass_state
def status(state: State, as_json: bool) -> None:
    """Say which roles run and whether the agent is ready; exit 0 ready, 1 down, 2 degraded.

    \b
    Example:
        bxctl status --json
    """
    if not state.layout.home.is_dir():
        raise click.ClickException(
            f"the home {state.layout.home} does not exist; check --home or $BOXMAKER_HOME"
        )
    rows = [roles.status(state.layout, role) for role in roles.ROLES]
    memoryd = _ask(roles.MEMORYD.socket(state.layout), MemoryAdmin(command="status"))
    loopd = _ask(roles.LOOPD.socket(state.layout), Status())
    brokerd = _ask(roles.BROKERD.socket(state.layout), Status())
    checks = [
        model_check(loopd),
        block_check(state),
        jobs_check(loopd),
        index_check(memoryd),
        journal_check(memoryd),
        grants_check(brokerd),
        damage_check({"memoryd": memoryd, "brokerd": brokerd, "loopd": loopd}),
    ]
    code, line = verdict(rows, checks)
    if as_json:
        data = {
            "home": str(state.layout.home),
            "state": {READY: "ready", DOWN: "down", DEGRADED: "degraded"}[code],
            "roles": [{"name": r.name, "running": r.running, "pid": r.pid, "detail": r.detail} for r in rows],
            "checks": [asdict(c) for c in checks],
        }
        click.echo(json.dumps(data, indent=2))
    else:
        for row in rows:
            click.echo(f"{row.name}: {'running' if row.running else 'down'} - {row.detail}")
        for check in checks:
            click.echo(f"{check.name}: {'ok' if check.ok else 'PROBLEM'} - {check.detail}")
        click.echo(line)
    if code != READY:
        raise SystemExit(code)
