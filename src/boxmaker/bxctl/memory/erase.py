"""``bxctl memory erase`` and ``bxctl memory erasures``: authorised erasure (seed 003 section 12.3,
checklist 21; docs/runbook.md `erasure`).

Without ``--yes`` bxctl only plans: it asks loopd (``loop_admin erase-plan``) for the texts of the
sessions named, memoryd (``memory_admin erase-plan``) for the items and texts of the scope and what
its files hold, then loopd again and brokerd (``broker_admin erase-plan``) what theirs hold, and
prints every holder. Nothing changes.

With ``--yes`` each role erases in its own files, in this order: loopd (the sessions' folders, the
other sessions' logs and baselines, the model server's slots), brokerd (label files, audit log), then
memoryd (every file under memory/, the index) which writes the tombstone with every holder's result.
The erased texts pass from role to role through bxctl's memory only; bxctl never prints them.

A role that holds content (memoryd, loopd, brokerd) and does not answer: the plan shows its holders
``unevaluated`` (limitation ``role-down``) and exits 1; ``--yes`` then REFUSES to run (nothing is
changed anywhere, exit 1, `role_down_sentence`: start them with ``bxctl up`` first), because the
texts are not kept after an erasure, so a later run could not find what the down role still holds.
``--allow-unevaluated`` erases anyway in the roles that answer: the receipt marks the down role's
holders ``unevaluated`` and says a later run cannot find the texts (`NOT_KEPT`). memoryd is never
optional: without it there is no tombstone and no item text, so ``--yes`` always refuses.

Before memoryd plans, brokerd says which sessions named it holds (a label file or an audit line), and
bxctl passes them to memoryd (``held``): a session nothing holds is refused, with no tombstone
("nothing of chat-x is held; nothing was erased"). memoryd also refuses an item an earlier erasure
erased (its text is no longer known, so its copies cannot be searched for), naming that erasure's
holders that were not completed.

The plan labels each holder's result as expected ("would be completed"), not as done.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

from boxmaker.bxctl import client, roles
from boxmaker.bxctl.options import broker_socket_option, json_option, loop_socket_option, memory_socket_option
from boxmaker.bxctl.state import State, pass_state
from boxmaker.proto import erasure
from boxmaker.proto.erasure import UNEVALUATED
from boxmaker.proto.escape import escape_line
from boxmaker.proto.ids import is_session_id
from boxmaker.proto.messages import BrokerAdmin, LoopAdmin, MemoryAdmin

_ITEM_ID = r"^mem-[0-9]{4}-[0-9]{2}-[0-9]{2}-[0-9]{3,}\Z"


class _Down(Exception):
    """A role did not answer (or answered with an error frame)."""


def _ask(role: str, path: Path, body: Any, timeout: float = 600.0) -> dict[str, Any]:
    """One request; a refused reply (``data.code`` refused:…) exits 1 at once: nothing ran yet, or
    the role refused the whole erasure.

    Raises:
        _Down: the role did not answer.
    """
    try:
        reply = client.request(role, path, body, timeout=timeout)
    except client.RoleUnreachable as exc:
        raise _Down(exc.message) from None
    except client.RoleRefused as exc:
        raise _Down(f"{role} answered with an error: {exc.message}") from None
    data: Any = getattr(reply, "data", None)
    if not isinstance(data, dict):
        raise _Down(f"{role} answered {type(reply).__name__}")
    code = str(data.get("code", ""))
    if code.startswith("refused:"):
        raise client.RoleRefused(getattr(reply, "text", code))
    found: dict[str, Any] = data
    return found


def _down_holders(refs: list[str]) -> list[dict[str, Any]]:
    return [erasure.holder(ref, UNEVALUATED, "role-down") for ref in refs]


def _check_ids(items: tuple[str, ...], sessions: tuple[str, ...], authority: str) -> None:
    for item in items:
        if not re.match(_ITEM_ID, item):
            raise click.BadParameter(f"{item!r} is not an item id mem-YYYY-MM-DD-NNN", param_hint="--item")
    for session in sessions:
        if not is_session_id(session) or session == "owner":
            raise click.BadParameter(f"{session!r} is not a session id", param_hint="--session")
    if not items and not sessions:
        raise click.UsageError("name at least one --item or --session to erase")
    if not erasure.is_authority(authority):
        raise click.BadParameter(
            "1 to 80 characters of A-Z, a-z, 0-9 and '._:/-' (a ticket or request id, not a sentence: "
            "the tombstone keeps it)",
            param_hint="--authority",
        )


#: Said on the receipt when a role was down and ``--allow-unevaluated`` let the erasure run.
NOT_KEPT = (
    "a later bxctl memory erase cannot find the texts erased now in those holders: the texts are not "
    "kept (not by bxctl, not by memoryd); check and delete them there by hand"
)


def role_down_sentence(down: Sequence[str]) -> str:
    """The refusal when a role that holds content does not answer (nothing was changed)."""
    names = " and ".join(down)
    verb, holds = ("does", "it holds") if len(down) == 1 else ("do", "they hold")
    return (
        f"refused (role-down): {names} {verb} not answer, so what {holds} "
        "cannot be erased, and a later run could not find the texts (they are not kept after an "
        "erasure); nothing was changed anywhere. Start them with bxctl up first (or, to erase the rest "
        "and leave their holders unevaluated, pass --allow-unevaluated)"
    )


MEMORYD_DOWN = (
    "refused (role-down): memoryd does not answer, so no tombstone can be written and no item's text "
    "is known; nothing was changed anywhere. Start it with bxctl up first"
)


def _holder_line(row: dict[str, Any], reasons: dict[str, str], expected: bool = False) -> str:
    limitation = row.get("limitation_ref")
    why = ""
    if limitation:
        why = f" ({limitation}: {erasure.LIMITATIONS.get(str(limitation), '')}"
        extra = reasons.get(str(row.get("holder_ref")))
        why += f"; {escape_line(extra)})" if extra else ")"
    holds = row.get("holds", "-")
    count = "" if "holds" not in row else f"  [{'?' if holds is None else holds}]"
    result = str(row.get("result", "?"))
    label = f"would be {result}" if expected else result
    width = 29 if expected else 20
    return f"  {label:<{width}} {row.get('holder_ref')}{count}{why}"


@dataclass
class _Erasure:
    """One run of ``bxctl memory erase``: the scope, the sockets, and what each role answered."""

    items: tuple[str, ...]
    sessions: tuple[str, ...]
    authority: str
    sockets: dict[str, Path]
    down: dict[str, str] = field(default_factory=dict)
    texts: list[str] = field(default_factory=list)
    erasure_id: str = ""
    held: list[str] | None = None  # the sessions loopd or brokerd hold (None: brokerd did not say)
    allow_unevaluated: bool = False

    def ask(self, role: str, body: Any, timeout: float = 600.0) -> dict[str, Any] | None:
        """Ask `role`; None (and the reason in `down`) when it does not answer."""
        if role in self.down:
            return None
        try:
            return _ask(role, self.sockets[role], body, timeout)
        except _Down as exc:
            self.down[role] = str(exc)
            return None

    def loop_plan(self, texts: list[str]) -> dict[str, Any] | None:
        args = {"sessions": list(self.sessions), "texts": texts}
        return self.ask("loopd", LoopAdmin(command="erase-plan", args=args))

    def plan(self, reserve: bool) -> tuple[dict[str, Any] | None, ...]:
        """Every role's plan: (memoryd, loopd, brokerd); sets `texts` and `erasure_id`."""
        loop = self.loop_plan([])
        loop_texts = sorted(loop["texts"]) if loop else []
        broker = self.broker_plan(loop_texts)
        if broker is not None and loop is not None:
            folders = [s for s in self.sessions if _holds(loop, f"sessions/{s}/")]
            self.held = sorted({*folders, *(str(s) for s in broker.get("sessions_held") or [])})
        args: dict[str, Any] = {
            "items": list(self.items),
            "sessions": list(self.sessions),
            "texts": loop_texts,
        }
        if self.held is not None:
            args["held"] = self.held
        if not self.allow_unevaluated and {"loopd", "brokerd"} & set(self.down):
            reserve = False  # --yes will refuse: hold no erasure id for it
        memory = self.ask("memoryd", MemoryAdmin(command="erase-plan", args={**args, "reserve": reserve}))
        self.texts = sorted(set(memory["texts"]) if memory else set(loop_texts))
        self.erasure_id = str(memory["erasure_id"]) if memory else ""
        if loop is not None and self.texts != loop_texts:
            loop = self.loop_plan(self.texts)
        if broker is not None and self.texts != loop_texts:
            broker = self.broker_plan(self.texts)
        return memory, loop, broker

    def broker_plan(self, texts: list[str]) -> dict[str, Any] | None:
        broker_args = {"sessions": list(self.sessions), "texts": texts}
        return self.ask("brokerd", BrokerAdmin(command="erase-plan", args=broker_args))

    def execute(self, decided_at: str) -> tuple[dict[str, Any] | None, list[dict[str, Any]], dict[str, str]]:
        """loopd, brokerd, then memoryd erase; (the tombstone or None, every holder, reasons)."""
        args = {"sessions": list(self.sessions), "texts": self.texts, "erasure_id": self.erasure_id}
        holders: list[dict[str, Any]] = []
        reasons: dict[str, str] = {}
        done = self.ask("loopd", LoopAdmin(command="erase", args=args), timeout=3600.0)
        if done is not None:
            holders += done["holders"]
            reasons.update(done.get("reasons") or {})
        else:
            refs = [f"sessions/{s}/" for s in self.sessions] + ["sessions/", "model-server:slot-cache"]
            holders += _down_holders(refs)
        done = self.ask("brokerd", BrokerAdmin(command="erase", args=args), timeout=3600.0)
        if done is not None:
            holders += done["holders"]
        else:
            holders += _down_holders([f"broker/sessions/{s}.json" for s in self.sessions] + ["broker/audit/"])
        memory_args = {
            "items": list(self.items),
            **args,
            "authority": self.authority,
            "decided_at": decided_at,
            "holders": holders,
        }
        if self.held is not None:
            memory_args["held"] = self.held
        done = self.ask("memoryd", MemoryAdmin(command="erase", args=memory_args), timeout=3600.0)
        if done is None:
            return None, holders + _down_holders(list(erasure.MEMORYD_HOLDERS)), reasons
        return done["tombstone"], holders, reasons


@click.command(name="erase")
@click.option("--item", "items", multiple=True, metavar="ID", help="An item to erase (repeatable).")
@click.option(
    "--session", "sessions", multiple=True, metavar="ID", help="A whole session to erase (repeatable)."
)
@click.option(
    "--authority",
    required=True,
    metavar="REF",
    help="Who authorised it: a short reference (ticket or request id, 1-80 of A-Z a-z 0-9 ._:/-).",
)
@click.option("--yes", is_flag=True, help="Erase (without it, only the plan is printed; nothing changes).")
@click.option(
    "--allow-unevaluated",
    is_flag=True,
    help="With --yes: erase even when loopd or brokerd does not answer (their holders stay "
    "unevaluated, and a later run cannot find the texts).",
)
@json_option
@memory_socket_option
@loop_socket_option
@broker_socket_option
@pass_state
def memory_erase(  # noqa: PLR0917 (click passes each option as an argument)
    state: State,
    items: tuple[str, ...],
    sessions: tuple[str, ...],
    authority: str,
    yes: bool,
    allow_unevaluated: bool,
    as_json: bool,
    memory_socket: Path | None,
    loop_socket: Path | None,
    broker_socket: Path | None,
) -> None:
    """Erase items or whole sessions from every holder, irreversibly, and record a tombstone.

    This is not `forget` (that is withdrawal): it destroys the text in memory files, session logs,
    the audit log, the index and the model server's cache. Run it without --yes first and read the
    plan (it shows what each holder would be). With --yes it refuses, changing nothing, when memoryd,
    loopd or brokerd does not answer (start them with `bxctl up`); --allow-unevaluated erases anyway
    in the roles that answer and leaves the others' holders unevaluated.

    \b
    Example:
        bxctl memory erase --session chat-abc --authority ticket-42
        bxctl memory erase --item mem-2026-11-29-003 --authority ticket-42 --yes
    """
    _check_ids(items, sessions, authority)
    layout = state.layout
    sockets = {
        "memoryd": memory_socket or roles.MEMORYD.socket(layout),
        "loopd": loop_socket or roles.LOOPD.socket(layout),
        "brokerd": broker_socket or roles.BROKERD.socket(layout),
    }
    decided_at = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    run = _Erasure(items, sessions, authority, sockets, allow_unevaluated=allow_unevaluated)
    memory, loop, broker = run.plan(reserve=yes)
    if not yes:
        _print_plan(run, memory, loop, broker, as_json)
    else:
        if "memoryd" in run.down:
            raise client.RoleDown(MEMORYD_DOWN)
        others = [role for role in ("loopd", "brokerd") if role in run.down]
        if others and not allow_unevaluated:
            raise client.RoleDown(role_down_sentence(others))
        tombstone, holders, reasons = run.execute(decided_at)
        _print_receipt(tombstone, holders, reasons, run.down, as_json)
    if run.down:
        raise SystemExit(1)


def _print_plan(
    run: _Erasure,
    memory: dict[str, Any] | None,
    loop: dict[str, Any] | None,
    broker: dict[str, Any] | None,
    as_json: bool,
) -> None:
    authority, erasure_id, down = run.authority, run.erasure_id, run.down
    scope_refs = memory["scope_refs"] if memory else [*run.items, *run.sessions]
    roles_rows = {
        "memoryd": _expected(memory["holders"]) if memory else None,
        "loopd": _expected(loop["holders"]) if loop else None,
        "brokerd": _expected(broker["holders"]) if broker else None,
    }
    if as_json:
        plan = {
            "erasure_id": erasure_id or None,
            "scope_refs": scope_refs,
            "authority_ref": authority,
            "holders": roles_rows,
            "down": down,
            "live_sessions": loop.get("live", []) if loop else None,
            "changed": False,
        }
        click.echo(json.dumps(plan, ensure_ascii=True, indent=2))
        return
    lines = [
        f"plan of erasure {erasure_id or '(no id: memoryd does not answer)'} (authority {authority}); "
        "nothing has changed yet",
        f"scope: {', '.join(scope_refs)}",
    ]
    if memory and memory.get("items"):
        lines.append(f"items it would erase: {', '.join(memory['items'])}")
    for role, rows in roles_rows.items():
        if rows is None:
            lines.append(f"{role}: unevaluated: {down.get(role, '')}")
            continue
        lines.append(f"{role}: expected result if run with --yes [matches or files held]")
        lines += [_holder_line({**row, "result": row["expected"]}, {}, expected=True) for row in rows]
    lines.append("exports outside the home and copies elsewhere cannot be vouched for by bxctl")
    if down:
        lines.append(
            f"with --yes this refuses until {' and '.join(down)} answer (bxctl up; see --allow-unevaluated)"
        )
    lines.append("run again with --yes to erase; it cannot be undone")
    click.echo("\n".join(lines))


def _holds(plan: dict[str, Any], ref: str) -> bool:
    """True when `plan` lists `ref` as holding something."""
    return any(r.get("holder_ref") == ref and (r.get("holds") or 0) > 0 for r in plan.get("holders") or [])


def _expected(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A plan's rows with ``result`` renamed ``expected``: nothing has been done yet."""
    return [{("expected" if k == "result" else k): v for k, v in row.items()} for row in rows]


def _print_receipt(
    tombstone: dict[str, Any] | None,
    holders: list[dict[str, Any]],
    reasons: dict[str, str],
    down: dict[str, str],
    as_json: bool,
) -> None:
    if as_json:
        body = {
            "tombstone": tombstone,
            "holders": holders,
            "down": down,
            "not_kept": NOT_KEPT if down else None,
        }
        click.echo(json.dumps(body, ensure_ascii=True, indent=2))
        return
    if tombstone is not None:
        head = (
            f"erased: {tombstone['erasure_id']} (authority {tombstone['authority_ref']}); "
            f"scope {', '.join(tombstone['scope_refs'])}; tombstone in memory/erasures.jsonl"
        )
        rows = tombstone["holders"]
    else:
        head = "erased what the roles that answered hold; NO tombstone was written (memoryd does not answer)"
        rows = holders
    lines = [head] + [_holder_line(row, reasons) for row in rows]
    for role, why in down.items():
        lines.append(f"{role} did not answer, so its holders are unevaluated: {why}")
    if down:
        lines.append(NOT_KEPT)
    click.echo("\n".join(lines))


@click.command(name="erasures")
@click.option(
    "--memory-socket", type=click.Path(path_type=Path, dir_okay=False), help="memoryd's admin socket."
)
@json_option
@pass_state
def memory_erasures(state: State, memory_socket: Path | None, as_json: bool) -> None:
    """List the erasure tombstones (memory/erasures.jsonl): scope, authority, each holder's result.

    \b
    Example:
        bxctl memory erasures --json
    """
    path = memory_socket or roles.MEMORYD.socket(state.layout)
    client.emit(client.admin(path, "erasures"), as_json)
