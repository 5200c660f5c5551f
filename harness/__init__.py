"""agent-harness: a chaos proxy for MCP servers that judges whether an agent executed a write twice."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("agent-harness")
except PackageNotFoundError:  # running from a source tree without an install
    __version__ = "0.0.0+source"

CERTIFICATION = "UNVERIFIED_FOR_PRODUCTION"
