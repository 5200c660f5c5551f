"""The harness's small exception tree: every error a user can cause ends up as one line."""


class HarnessError(Exception):
    """Base of every error the harness raises on purpose."""


class UsageError(HarnessError):
    """Bad command-line input: a flag, a value, a combination of flags."""


class ConfigError(HarnessError):
    """A configuration that cannot work, found at startup (e.g. a tool in both explicit lists)."""


class InputFileError(HarnessError):
    """An input file that cannot be read: missing, not a regular file, too large, not UTF-8
    (V4)."""


class OutputFileError(HarnessError):
    """A file the tools write cannot be used or written (V1)."""


class ReportFileError(OutputFileError):
    """The proxy's report file (or event log) cannot be used or written."""


class UpstreamError(HarnessError):
    """The upstream MCP server could not be started or stopped working."""


class EventLogError(InputFileError):
    """An event log that cannot be read back."""


class ReportReadError(HarnessError):
    """A report that cannot be read back: not JSON, or not a report (O1, O2)."""
