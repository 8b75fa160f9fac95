"""Runs derived from a finished one: replay, retry, repair and fork planning, and
compensation."""
