"""``bxctl jobs``: the owner's cron jobs, their next run and their last result (M5d section 4.2).

Asked of loopd (``loop_admin jobs`` on its owner socket), which reads ``{home}/jobs/`` and the ledger
``jobs/runs.jsonl``.
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from boxmaker.bxctl import client, roles
from boxmaker.bxctl.options import json_option, loop_socket_option
from boxmaker.bxctl.state import State, pass_state
from boxmaker.proto.escape import escape
from boxmaker.proto.messages import LoopAdmin, LoopAdminReply


@click.group(name="jobs", invoke_without_command=True)
@json_option
@loop_socket_option
@click.pass_context
def jobs(ctx: click.Context, as_json: bool, loop_socket: Path | None) -> None:
    """List the cron jobs in {home}/jobs/: schedule, next run (UTC), last result.

    A job is a file jobs/<name>.toml with `schedule` (five-field UTC crontab) and `prompt`; each run
    is a new session job-<name>-t<unix time>, whose answer stays in its log (bxctl sessions show).
    `bxctl jobs run NAME` runs one now.

    \b
    Example:
        bxctl jobs
        tier  0 6 * * 1  next 2026-11-30T06:00:00Z  last finished 2026-11-23T06:00:00Z (job-tier-t1795413600)
    """
    if ctx.invoked_subcommand is not None:
        return
    state: State = ctx.obj
    path = loop_socket or roles.LOOPD.socket(state.layout)
    reply = client.request("loopd", path, LoopAdmin(command="jobs"))
    if not isinstance(reply, LoopAdminReply):
        raise client.RoleRefused(f"loopd answered {type(reply).__name__} to loop_admin")
    if as_json:
        click.echo(json.dumps(reply.data, ensure_ascii=True, indent=2))
    else:
        click.echo(escape(reply.text))
    if isinstance(reply.data, dict) and str(reply.data.get("code", "")).startswith("refused:"):
        raise SystemExit(1)  # a job file is broken: loopd will not start with it


@jobs.command(name="run")
@click.argument("name")
@loop_socket_option
@pass_state
def jobs_run(state: State, name: str, loop_socket: Path | None) -> None:
    """Run the job NAME now, in the background, as a new session (its answer stays in its log).

    \b
    Example:
        bxctl jobs run morning
    """
    path = loop_socket or roles.LOOPD.socket(state.layout)
    reply = client.request("loopd", path, LoopAdmin(command="run", arg=name[:200]))
    if not isinstance(reply, LoopAdminReply):
        raise client.RoleRefused(f"loopd answered {type(reply).__name__} to loop_admin")
    code = reply.data.get("code") if isinstance(reply.data, dict) else None
    if isinstance(code, str) and code.startswith("refused:"):
        raise client.RoleRefused(escape(reply.text))
    click.echo(escape(reply.text))
