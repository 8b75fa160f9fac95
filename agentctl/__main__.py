"""``python -m agentctl`` is the same as the ``agentctl`` command."""

from agentctl.cli.main import run

if __name__ == "__main__":
    run()
