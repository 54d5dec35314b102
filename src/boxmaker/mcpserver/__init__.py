"""boxmaker-mcp: an MCP server (stdio) in front of memoryd, so any agent that speaks MCP uses boxmaker's
memory with its trust model (issue 17; docs/protocol.md "The MCP server").

A thin shim: it never opens a memory file or the index. Each tool call is one ``mcp_call`` request on
memoryd's MCP socket (``{home}/run/mcp-memory/mcp.sock``), so memoryd's one writer serves every client
at once, and memoryd, not this process, decides the session's label. Modules: `cli` (the console
script), `session` (the session id and its taint bit, which only rises), `memoryd` (the socket client),
`tools` (the two tools' schemas and annotations, pure), `results` (memoryd's answers as MCP results),
`server` (the official SDK's low-level `Server` and its handlers), `sentences` (the fixed sentences).
"""
