"""``python -m boxmaker.memoryd``: the same as the `memoryd` command."""

from boxmaker.memoryd.cli import main

main()
