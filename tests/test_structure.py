"""Rules about the project's shape: the dependency rule, help on every command, the README's commands.

STYLE 3 and 9; DESIGN 1.
"""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path

import click
import pytest

from boxmaker.brokerd.cli import cli as brokerd_cli
from boxmaker.bxctl.cli import cli as bxctl_cli
from boxmaker.mcpserver.cli import cli as mcp_cli
from boxmaker.memoryd.cli import cli as memoryd_cli

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "boxmaker"
ROLES = sorted(p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists())
#: Packages of data only (starter files): any role may read them, none is code.
DATA_PACKAGES = {"config"}


def boxmaker_imports(path: Path) -> set[str]:
    """The boxmaker sub-packages a module imports (``boxmaker.memoryd.x`` -> ``memoryd``)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        for name in names:
            parts = name.split(".")
            if parts[0] == "boxmaker" and len(parts) > 1:
                found.add(parts[1])
    return found


@pytest.mark.parametrize("role", [r for r in ROLES if r not in DATA_PACKAGES])
def test_each_role_imports_only_proto_and_itself(role: str) -> None:
    allowed = {"proto", role}
    for module in (PACKAGE / role).rglob("*.py"):
        extra = boxmaker_imports(module) - allowed
        assert not extra, f"{module.relative_to(ROOT)} imports boxmaker.{sorted(extra)}"


def test_proto_imports_no_role_and_no_rich_or_click() -> None:
    for module in (PACKAGE / "proto").rglob("*.py"):
        assert boxmaker_imports(module) <= {"proto"}, module
        text = module.read_text(encoding="utf-8")
        assert not re.search(r"^\s*(import|from) (rich|click|httpx)\b", text, re.M), module


PURE = [
    "memoryd/files/entries.py",
    "memoryd/files/edits.py",
    "memoryd/files/revert.py",
    "memoryd/check/rules.py",
    "memoryd/check/phrases.py",
    "memoryd/index/query.py",
    "memoryd/files/notes.py",
    "memoryd/files/block.py",
    "memoryd/index/hits.py",
    "memoryd/review/tiers.py",
    "loopd/cron.py",
    "loopd/trigger.py",
]


@pytest.mark.parametrize("module", PURE)
def test_pure_modules_do_no_io(module: str) -> None:
    text = (PACKAGE / module).read_text(encoding="utf-8")
    for word in ("import os", "import socket", "import sqlite3", "open(", "subprocess", "pathlib"):
        assert word not in text, f"{module} uses {word}"


def walk(group: click.Group, prefix: str) -> list[tuple[str, click.Command]]:
    commands: list[tuple[str, click.Command]] = [(prefix, group)]
    for name, command in sorted(group.commands.items()):
        if isinstance(command, click.Group):
            commands += walk(command, f"{prefix} {name}")
        else:
            commands.append((f"{prefix} {name}", command))
    return commands


COMMANDS = (
    walk(bxctl_cli, "bxctl")
    + walk(memoryd_cli, "memoryd")
    + walk(brokerd_cli, "brokerd")
    + [("boxmaker-mcp", mcp_cli)]
)


@pytest.mark.parametrize(("name", "command"), COMMANDS, ids=[name for name, _ in COMMANDS])
def test_every_command_has_help_with_an_example(name: str, command: click.Command) -> None:
    assert command.help, f"{name} has no help"
    first, _, rest = command.help.partition("\n")
    assert first.strip(), name
    assert "Example:" in rest, f"{name}'s help has no example"


def test_listing_commands_take_json() -> None:
    for name, command in COMMANDS:
        if name.split()[-1] in (
            "log",
            "pending",
            "files",
            "search",
            "status",
            "show",
            "approvals",
            "grants",
            "tiers",
            "jobs",
            "sessions",
            "prune",
        ):
            assert any(p.name == "as_json" for p in command.params), f"{name} has no --json"


def test_ci_runs_the_readme_test_command() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    blocks = re.findall(r"```(?:sh|bash|console)?\n(.*?)```", readme, re.S)
    commands = [line.strip() for block in blocks for line in block.splitlines()]
    test_command = next(c for c in commands if "scripts/gate.py" in c)
    assert test_command in ci


# memoryd's floors (docs/architecture.md "The import direction") ---------------------------------------

MEMORYD = PACKAGE / "memoryd"


def _floor_table() -> dict[str, set[str]]:
    """The table of docs/architecture.md: each memoryd package and the packages it may import."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = text.split("### The import direction", 1)[1].split("\n## ", 1)[0]
    table: dict[str, set[str]] = {}
    for row in re.findall(r"^\| `([a-z_]+)` \| (.*) \|$", section, re.M):
        table[row[0]] = set(re.findall(r"`([a-z_]+)`", row[1]))
    return table


def _memoryd_part(path: Path) -> str:
    parts = path.relative_to(MEMORYD).parts
    return parts[0] if len(parts) > 1 else parts[0].removesuffix(".py")


def _memoryd_imports(path: Path) -> set[str]:
    """The memoryd packages (or top modules) a module imports, under TYPE_CHECKING and in functions too."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("boxmaker.memoryd"):
            parts = node.module.split(".")
            found |= {alias.name for alias in node.names} if len(parts) == 2 else {parts[2]}
        elif isinstance(node, ast.Import):
            found |= {a.name.split(".")[2] for a in node.names if a.name.startswith("boxmaker.memoryd.")}
    return found


def test_memoryd_packages_import_only_the_floors_below_them() -> None:
    table = _floor_table()
    parts = {_memoryd_part(p) for p in MEMORYD.rglob("*.py")} - {"__init__", "__main__"}
    assert parts == set(table), (
        f"docs/architecture.md's table and memoryd's packages differ: {parts ^ set(table)}"
    )
    for module in MEMORYD.rglob("*.py"):
        part = _memoryd_part(module)
        if part in ("__init__", "__main__"):
            continue
        extra = _memoryd_imports(module) - table[part] - {part}
        assert not extra, f"{module.relative_to(ROOT)} ({part}) imports {sorted(extra)}"


def test_the_floor_table_has_no_circle_and_the_front_doors_stay_apart() -> None:
    table = _floor_table()
    assert "admin" not in table["tool"]
    assert "tool" not in table["admin"]
    seen: dict[str, int] = {}

    def visit(name: str, path: tuple[str, ...]) -> None:
        assert name not in path, f"circle: {' -> '.join((*path, name))}"
        if seen.get(name):
            return
        for below in table[name]:
            visit(below, (*path, name))
        seen[name] = 1

    for name in table:
        visit(name, ())


def test_no_module_circle_in_src() -> None:
    """No two modules of src/ import each other, directly or through others (TYPE_CHECKING and
    function-level imports count)."""
    modules = {}
    for path in PACKAGE.rglob("*.py"):
        name = ".".join(path.relative_to(ROOT / "src").with_suffix("").parts).removesuffix(".__init__")
        modules[name] = path
    edges: dict[str, set[str]] = {m: set() for m in modules}
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            for target in targets:
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if target and target != name:
                    edges[name].add(target)
    state: dict[str, int] = {}

    def visit(name: str, path: list[str]) -> None:
        state[name] = 1
        for other in edges[name]:
            assert state.get(other) != 1, f"import circle: {' -> '.join([*path, name, other])}"
            if other not in state:
                visit(other, [*path, name])
        state[name] = 2

    for name in modules:
        if name not in state:
            visit(name, [])


def test_handlers_keep_nothing_past_their_request() -> None:
    """The front doors (tool/, admin/) hold no state of their own: no `global`, and at module level only
    constants and the tables (UPPER_CASE names, an `Action`/`Command` table, type aliases)."""
    for module in [*(MEMORYD / "tool").glob("*.py"), *(MEMORYD / "admin").glob("*.py")]:
        tree = ast.parse(module.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            assert not isinstance(node, (ast.Global, ast.Nonlocal)), module
        for node in tree.body:
            if isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    where = f"{module.relative_to(ROOT)}: module state {ast.unparse(target)}"
                    assert isinstance(target, ast.Name), where
                    assert target.id.isupper(), where


def _top_level_imports(path: Path) -> set[str]:
    """The top-level modules a module imports (``from rich.console import X`` -> ``rich``)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return found


def test_every_library_src_imports_is_a_runtime_dependency() -> None:
    """`pip install .` must give bxctl and the daemons every library they import (README's first
    command): an import of a library that only an extra (``[test]``) installs breaks a plain install."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]

    def norm(name: str) -> str:
        return re.sub(r"[-_.]+", "-", name).lower()

    declared = {norm(re.split(r"[<>=!~\[ ;]", spec, maxsplit=1)[0]) for spec in project["dependencies"]}
    # an import name is the distribution's name unless the installed distributions say otherwise
    # (``mcp_types`` comes from ``mcp-types``)
    distributions = importlib.metadata.packages_distributions()
    missing = {}
    for module in PACKAGE.rglob("*.py"):
        for name in _top_level_imports(module) - set(sys.stdlib_module_names) - {"boxmaker"}:
            if not {norm(d) for d in distributions.get(name, [name])} & declared:
                missing.setdefault(name, str(module.relative_to(ROOT)))
    assert not missing, f"imported by src/ but not in [project] dependencies: {missing}"
