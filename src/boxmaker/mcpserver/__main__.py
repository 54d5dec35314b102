"""``python -m boxmaker.mcpserver``: the same as the ``boxmaker-mcp`` console script."""

from boxmaker.mcpserver.cli import main

main()
