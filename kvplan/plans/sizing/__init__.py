"""Sizing one deployment: KV size (size), fit, latency, calibration, the vLLM command-line reader."""
