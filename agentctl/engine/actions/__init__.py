"""Task bodies: the built-in action kinds, agents and their provider sessions, the
protocol actions (MCP, A2A, extensions), long-term memory actions, and how a
process action is launched and what it wrote."""
