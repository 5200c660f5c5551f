"""The built-in upstream kinds by name, with nothing imported: what a spec is checked against
(`--dry-run`, a bad spec) without loading the servers and the MCP SDK behind them."""

KINDS = ("booking", "booking-nosearch", "payment")
