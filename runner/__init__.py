"""agent-harness runner: YAML experiment specs -> many agent runs through the proxy -> DuckDB -> HTML."""
