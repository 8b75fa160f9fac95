"""The durable executor: runs, tasks, the effect journal, approvals and recovery."""
