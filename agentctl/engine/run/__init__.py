"""One run from creation to its last commit: creating it, the executor and its commits,
the frontier and task claims, deadlines, retries within a run, watchers, artifacts, and
check and dry-run modes. Above ``actions``; driving a run to its end is the engine's top."""
