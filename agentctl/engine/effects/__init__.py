"""The effect protocol: the gate around each dispatch, the journal, approvals and
questions, the approval policy, the budget ledger, and the effects in doubt."""
