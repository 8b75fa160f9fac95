"""Observability: the hash-chained audit log and redaction of what is stored."""
