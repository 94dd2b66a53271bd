"""What the tests share: the servers they start, SDK clients and sessions against the emulator,
worker processes, the Hypothesis profiles and the time unit."""
