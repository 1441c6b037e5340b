# Two commands on a fresh machine: `make demo` and `make test`. Both install what is missing.
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: install test lint unit demo schemas clean bench checkov fio chromium

install: $(VENV)/.installed node_modules/.installed fio chromium

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -c 'import sys; assert sys.version_info[:2] == (3, 11), "Python 3.11 is required"'
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	touch $@

node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

fio:
	@command -v fio >/dev/null || { $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq fio; }

# The browser the report and UI tests drive (headless; Playwright launches this binary).
chromium:
	@command -v /usr/bin/chromium >/dev/null || { $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq chromium; }

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy .

# Bicep templates: Checkov in a virtualenv of its own (its pins clash with the test stack).
checkov:
	scripts/checkov.sh

# The test lanes (tests/lanes.py; README, "Tests and lanes"). `make test` runs every test in
# two phases: first all that run no fio and time nothing, in WORKERS processes side by side
# (pytest-xdist, whole modules at a time; each worker starts a stack of its own), then the fio
# and timing tests one at a time with nothing else of ours running. Both phases run; either
# failing fails the target.
PYTEST := $(VENV)/bin/pytest
WORKERS ?= 2
PARALLEL := -n $(WORKERS) --dist loadscope --no-loadscope-reorder -m "not (fio or timing)"
SERIAL := -m "fio or timing"
# Where the time goes: the slowest test phases, then a line per lane.
DURATIONS := --durations=30 --durations-min=2
test: install lint checkov
	@rc=0; \
	echo '== parallel phase: pytest $(PARALLEL)'; \
	$(PYTEST) -q -ra $(PARALLEL) $(DURATIONS) || rc=$$?; \
	echo '== serial phase: pytest $(SERIAL)'; \
	$(PYTEST) -q -ra $(SERIAL) $(DURATIONS) || rc=$$?; \
	exit $$rc

# The lane that needs no server, no fio and no browser, less its slow and timing tests: under
# a minute. One process: two xdist workers took as long here (each collects every test).
UNIT := unit and not slow and not timing
unit: $(VENV)/.installed
	$(PYTEST) -q -ra -m "$(UNIT)" $(DURATIONS)

demo: install
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" scripts/demo.sh

schemas: $(VENV)/.installed
	$(PY) scripts/gen_schemas.py

# Performance figures (README, "Performance figures"): each bench writes bench/out/<name>.json.
# About 25 minutes on 2 cores; run it on a quiet machine and compare ratios, not absolutes.
BENCHES := bench.overhead bench.start_skew bench.aggregate_scale bench.detect_scale \
	bench.detect bench.api_latency bench.profile_api bench.intake bench.idle_polls \
	bench.bot_latency bench.live_cost
bench: install
	$(VENV)/bin/pip install -q -r requirements-bench.txt
	@set -e; for b in $(BENCHES); do echo "== $$b"; $(PY) -m $$b; done

clean:
	-$(VENV)/bin/benchctl local down
	rm -rf .local .pytest_cache .mypy_cache .ruff_cache .venv-checkov
