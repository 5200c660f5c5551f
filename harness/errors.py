"""The harness's small exception tree: every error a user can cause ends up as one line."""


class HarnessError(Exception):
    """Base of every error the harness raises on purpose."""


class UsageError(HarnessError):
    """Bad command-line input: a flag, a value, a combination of flags."""


class ConfigError(HarnessError):
    """A configuration that cannot work, found at startup (e.g. a tool in both explicit lists)."""


class ReportFileError(HarnessError):
    """The report file cannot be used or written."""


class UpstreamError(HarnessError):
    """The upstream MCP server could not be started or stopped working."""


class EventLogError(HarnessError):
    """An event log that cannot be read back."""
