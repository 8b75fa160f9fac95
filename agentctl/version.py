"""The version of agentctl, written in this one place.

pyproject.toml reads it (``[tool.setuptools.dynamic]``), ``agentctl --version`` prints it,
and record-format and schema messages quote it. It imports nothing, so any floor of the
package may read it (docs/architecture.md).
"""

__all__ = ["__version__"]

__version__ = "0.1.0"
