"""The test kit: helpers, fixtures and test servers shared by tests (no test file imports another)."""
