"""Action executors' building blocks: bounded host processes and workspace file primitives."""
