"""Report generator for pickle's benchmark result files (schema pickle-bench/1)."""
