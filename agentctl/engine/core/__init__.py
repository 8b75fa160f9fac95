"""The engine's ground storey (docs/architecture.md): run and task rows, the run log and
attempts, fault injection, preflight checks, compiling workflow files, the workspace
check, and how a process is isolated. It imports nothing else of the engine."""
