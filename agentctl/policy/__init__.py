"""Policy checks that gate effects before dispatch (workspace paths, allow-lists)."""
