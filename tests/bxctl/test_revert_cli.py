"""``bxctl memory revert`` against a real memoryd (issue 19): an older wrong entry taken back while later
edits stand, the log's ``revertable``, and a conflict refused with its code, exit 1 and nothing changed."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from boxmaker.bxctl.cli import cli


def bx(*args: str) -> Any:
    return CliRunner().invoke(cli, ["memory", *args])


def test_the_owner_reverts_an_older_wrong_entry_from_the_command_line(
    home: Path, daemon: subprocess.Popen[bytes]
) -> None:
    assert bx("add", "--file", "user", "Prefers answers in UTC.").exit_code == 0
    wrong = bx("add", "--file", "user", "Lives in Lisbon.", "--json")
    assert wrong.exit_code == 0, wrong.output
    wrong_id = json.loads(wrong.output)["edit"]
    assert bx("add", "--file", "user", "Deploys on Thursdays.").exit_code == 0
    assert (
        bx("replace", "--file", "user", "Prefers answers in UTC.", "Prefers answers in CET.").exit_code == 0
    )

    log = json.loads(bx("log", "--json").output)
    assert {line["id"]: line["revertable"] for line in log}[wrong_id] is True
    assert undo_refused(wrong_id)  # undo takes only the latest edit; revert goes further

    done = bx("revert", wrong_id, "--json")
    assert done.exit_code == 0, done.output
    assert json.loads(done.output)["code"] == "ok"
    user_md = home / "memory" / "user.md"
    assert user_md.read_text() == "Prefers answers in CET.\n§\nDeploys on Thursdays.\n"

    before = user_md.read_bytes()
    first = log[-4]["id"]  # the add of "Prefers answers in UTC.", replaced since
    refused = bx("revert", first, "--json")
    assert refused.exit_code == 1
    data = json.loads(refused.stdout)
    assert data["code"] == "refused:conflict"
    assert log[-1]["id"] in data["text"]
    assert user_md.read_bytes() == before
    typo = bx("revert", "last-week")
    assert typo.exit_code == 1
    assert "Traceback" not in typo.output


def undo_refused(edit: str) -> bool:
    result = bx("undo", edit, "--json")
    return result.exit_code == 1 and json.loads(result.stdout)["code"] == "refused:not-latest"
