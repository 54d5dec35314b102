"""``python -m boxmaker.brokerd``: the same as the `brokerd` command."""

from boxmaker.brokerd.cli import main

main()
