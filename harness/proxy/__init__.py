"""The proxy's public face: what a caller needs to run one proxy and read what it recorded.

Configure it (`ProxyConfig` with its `PlanConfig`, checked by the fault registry as it is
built, and `ClassifierConfig`), start it as a subprocess (`proxy_command`: the config goes
over as one file, `--config FILE`) or in this process (`in_process_proxy`: the config object
itself), then read its event log (`read_event_log`); `proxy_main` is the whole
`agent-harness proxy` command line, whose flags `parse` reads into the same ProxyConfig. The
runner, and a Ray worker executing one run, import the harness through here.
"""

from harness.events import CallReceived, FaultApplied, ToolsListed
from harness.events import read_jsonl as read_event_log
from harness.faults import (
    FAULTS,
    HTTP_ONLY,
    INJECTING,
    MAX_RETRY_AFTER_S,
    SCENARIOS,
    Param,
    PlanConfig,
    error_rate_problem,
)
from harness.operations.classify import DEFAULT_KEY_FIELDS, ClassifierConfig
from harness.operations.identity import operation_id, value_key
from harness.proxy.args import ProxyConfig, parse
from harness.proxy.hosting import InProcessProxy, in_process_proxy, proxy_command
from harness.proxy.main import main as proxy_main
from harness.wire.fdlines import StreamClosed
from harness.wire.http.headers import HeaderSpec, valid_header_name

__all__ = [
    "DEFAULT_KEY_FIELDS",
    "FAULTS",
    "HTTP_ONLY",
    "INJECTING",
    "MAX_RETRY_AFTER_S",
    "CallReceived",
    "ClassifierConfig",
    "FaultApplied",
    "HeaderSpec",
    "InProcessProxy",
    "Param",
    "PlanConfig",
    "ProxyConfig",
    "SCENARIOS",
    "StreamClosed",
    "ToolsListed",
    "error_rate_problem",
    "in_process_proxy",
    "operation_id",
    "parse",
    "proxy_command",
    "proxy_main",
    "read_event_log",
    "valid_header_name",
    "value_key",
]
