# One command each for a fresh clone: `make test` and `make demo` create .venv themselves.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEMO_STAMP := $(VENV)/.installed-demo

.PHONY: test suite lint docs demo voice-agent bench clean

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

test: lint docs suite

# The test suite alone, e.g. on another Python: `make suite PYTHON=python3.13 VENV=.venv-3.13`.
suite: $(STAMP)
	$(BIN)/pytest -q

demo: $(DEMO_STAMP)
	$(BIN)/livebridge demo

voice-agent: $(STAMP)
	$(BIN)/python examples/voice_agent/server.py --emulator

bench: $(STAMP)
	$(BIN)/python -m benchmarks

clean:
	rm -rf .venv .venv-* site .pytest_cache .mypy_cache .ruff_cache
