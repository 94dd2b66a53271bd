"""Standalone, repeatable benchmarks: `python -m benchmarks`."""
