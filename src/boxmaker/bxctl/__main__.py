"""``python -m boxmaker.bxctl``: the same as the `bxctl` command."""

from boxmaker.bxctl.cli import main

main()
