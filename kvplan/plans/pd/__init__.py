"""Prefill/decode disaggregation (xPyD): inputs, pool search, the KV link, rows and verdict."""
