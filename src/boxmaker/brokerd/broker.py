"""What the owner's commands read of a running broker (`admin`, `erase`): a record, no behaviour.

`Brokerd` builds it from its own collaborators and hands it over, so the command modules never see
the service (STYLE 4: the state is passed in).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from boxmaker.brokerd.approvals import Approvals
from boxmaker.brokerd.grants import GrantWatcher
from boxmaker.brokerd.ledger import AuditLog, SessionLabels
from boxmaker.proto.home import Layout
from boxmaker.proto.startcheck import Finding


@dataclass(frozen=True, slots=True)
class Broker:
    """The broker's files and state: the home's layout, the grants, each session's label, the audit
    log and the calls waiting for the owner (the same objects `Brokerd` decides calls with), and the
    damage the start-up check found (`startcheck`; empty when none)."""

    layout: Layout
    grants: GrantWatcher
    labels: SessionLabels
    audit: AuditLog
    approvals: Approvals
    damage: list[Finding] = field(default_factory=list)
