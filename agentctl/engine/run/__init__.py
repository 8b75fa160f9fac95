"""One run from creation to its last commit: creating it, the executor and its
commits, task bodies' context and deadlines, retries within a run, watchers,
artifacts, tracing, and check and dry-run modes."""
