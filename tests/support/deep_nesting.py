"""How deep a test nests a value that no supported Python's decoder or converter reads."""

#: Python 3.11 stops near 1,000 levels, 3.13 near 10,000; below its limit a value is read
#: whatever its depth, so tests of the "too deep" path nest deeper than every one of them.
TOO_DEEP_FOR_ANY_PYTHON = 50_000
