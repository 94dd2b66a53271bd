# One command each for a fresh clone: `make test` and `make demo` create .venv themselves.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEMO_STAMP := $(VENV)/.installed-demo

.PHONY: test suite suite-interpreter lint docs demo voice-agent bench clean

# Everything the suite, the linters and the docs need.
$(STAMP): pyproject.toml
	[ -x $(BIN)/python ] || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test,docs]'
	touch $(STAMP)

# The demo needs the package alone (google-genai, websockets, msgspec, ...): no test tools.
$(DEMO_STAMP): pyproject.toml
	[ -x $(BIN)/python ] || $(PYTHON) -m venv $(VENV)
	[ $(STAMP) -nt pyproject.toml ] || $(BIN)/pip install --quiet -e .
	touch $(DEMO_STAMP)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

# The documentation site, built offline; any warning (a broken link, a missing docstring
# reference) fails the build.
docs: $(STAMP)
	$(BIN)/mkdocs build --strict --quiet --site-dir site

# The linters and the docs build run beside the suite, which leaves a core idle most of the time
# (its tests wait on sockets); each target's output is printed whole when it ends.
test: $(STAMP)
	$(MAKE) --no-print-directory -j3 --output-sync=target lint docs suite

# The whole suite, on pytest-xdist workers: most tests wait on sockets and timers, not the CPU,
# so there are three times as many workers as the machine's two cores (6: 251 s on an idle
# 2-core machine against 338 s with 4). The slow tests (left out of a bare
# `pytest`) run too, each first in a worker's share; Hypothesis runs its thorough `ci` profile.
# Tests marked `serial` (fifty browsers at once, the outbox filling) measure load or timing:
# they run afterwards, alone.
WORKERS ?= 6
HYPOTHESIS := --hypothesis-profile=ci
suite: $(STAMP)
	$(BIN)/pytest -q -rs -n $(WORKERS) --dist worksteal -m 'not serial' $(HYPOTHESIS)
	$(BIN)/pytest -q -rs -m serial $(HYPOTHESIS)

# What the interpreter decides (how deep a decoder recurses, where asyncio keeps the current
# task, how tasks are scheduled) differs between Python versions: these suites run on each, e.g.
# `make suite-interpreter PYTHON=python3.13 VENV=.venv-3.13`. The install, browser and valgrind
# tiers run once, in `make test`.
INTERPRETER_TESTS := tests/calls tests/adapters \
	tests/vendors/test_wire.py tests/vendors/test_protocol.py tests/vendors/test_protocol_openai.py \
	tests/protocol/test_events.py tests/protocol/test_wakeup.py \
	tests/live/test_session.py tests/live/test_session_backpressure.py tests/live/test_session_exits.py \
	tests/live/test_session_interrupt.py tests/live/test_session_metrics.py \
	tests/live/test_session_openai.py tests/live/test_session_repeats.py tests/live/test_session_wire.py
suite-interpreter: $(STAMP)
	$(BIN)/pytest -q -n $(WORKERS) --dist worksteal $(HYPOTHESIS) $(INTERPRETER_TESTS)

demo: $(DEMO_STAMP)
	$(BIN)/livebridge demo

voice-agent: $(STAMP)
	$(BIN)/python examples/voice_agent/server.py --emulator

bench: $(STAMP)
	$(BIN)/python -m benchmarks

clean:
	rm -rf .venv .venv-* site .pytest_cache .mypy_cache .ruff_cache
