"""Task bodies: the built-in action kinds, agents and their provider sessions, the
protocol actions (MCP, A2A, extensions), long-term memory actions, what a process action
wrote, and what a body is given: its context and its questions. Above ``effects``."""
