"""``python -m boxmaker.loopd``."""

from boxmaker.loopd.cli import main

main()
