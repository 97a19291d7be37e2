"""Benchmarks: each prints ratios measured side by side in one run, never a bare time as a gate."""
