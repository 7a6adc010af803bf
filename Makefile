# Fresh machine: `make demo` runs the main job, `make test` runs the tests.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test test-slow lint bench clean install js-deps
JS := bridge/clients/js

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	# torch first, pinned: where a local CPU wheel is offered pip takes it (a plain `torch` may pull a CUDA build)
	$(BIN)/pip install --quiet torch==2.13.0
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/village demo

# the JS client test's dependencies, from the lock file, when npm is there (the test skips without them)
js-deps:
	@if ! command -v npm >/dev/null 2>&1; then \
	  echo "npm not found: the JS client test will skip"; \
	elif [ ! -f $(JS)/node_modules/.package-lock.json ] || [ $(JS)/package-lock.json -nt $(JS)/node_modules/.package-lock.json ]; then \
	  (cd $(JS) && npm ci --no-audit --no-fund --loglevel=error >/dev/null) \
	    || echo "npm ci failed in $(JS): the JS client test will skip"; \
	fi

test: $(STAMP) js-deps
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q

test-slow: $(STAMP)
	$(BIN)/python -m pytest -q -m slow

bench: $(STAMP)
	$(BIN)/python bench/engine_throughput.py

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/lint-imports

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache $(JS)/node_modules
