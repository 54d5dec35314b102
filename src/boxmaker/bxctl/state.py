"""State bxctl resolves once, in the group callback, and passes down (STYLE 10)."""

from __future__ import annotations

from dataclasses import dataclass

import click

from boxmaker.proto.home import Layout


@dataclass(frozen=True, slots=True)
class State:
    """The owner's home and its layout."""

    layout: Layout


pass_state = click.make_pass_decorator(State)
