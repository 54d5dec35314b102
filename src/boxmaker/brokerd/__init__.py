"""brokerd: decides every tool call against the grants, keeps each session's label, writes the audit
log, and runs decided calls (DESIGN 1; M5a section 8).

Skeleton (STYLE 2): `cli` -> `config` -> `server` -> `service` (the handlers), with the pure parts
apart: `grants` (loading the grant files), `arguments` (argument shapes), `policy` (the decision),
`tools` (the local tools' schemas). `runtime`, `fetch` and `ledger` hold the I/O.
"""
