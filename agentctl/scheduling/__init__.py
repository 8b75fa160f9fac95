"""Starting runs by themselves: the workflow registry, schedules and the daemon loop.

Nothing here imports the engine: the daemon is handed a launcher that creates and starts
runs, so this package stays beside ``engine`` on the same floor.
"""
