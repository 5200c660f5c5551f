"""agent-harness runner: YAML experiment specs -> many agent runs through the proxy -> DuckDB -> HTML."""

import os

# litellm fetches its model cost map from the network at import unless told otherwise; the
# runner must work offline, and costs come from the map litellm ships. Set before any import.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
