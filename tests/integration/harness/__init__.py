"""The integration tests' harness: one module per concern (conftest.py makes their fixtures pytest's)."""
