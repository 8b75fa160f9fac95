"""The effect protocol: the gate around each dispatch and its tracing, the journal,
approvals, the approval policy, the budget ledger, and the effects in doubt. Above
``core`` only."""
