"""The engine's ground floor: run and task records and the run log, fault injection,
preflight checks, compiling workflow files, the workspace check, and how a process is
isolated. It imports nothing else of the engine."""
