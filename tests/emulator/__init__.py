"""The emulator's own tests. Each starts its own emulator rather than ``tests/conftest.py``'s
shared ones: what they check (violations, the transcript, the connections) is its report, which
covers the emulator's whole life."""
