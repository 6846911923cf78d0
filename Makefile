# clade — `make run` starts the daemon on ./.clade; `make test` runs the suite but its minutes-long
# runs, `make test-slow` those (CI runs both).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
DATA   ?= .clade

.PHONY: install run test test-slow lint docs bench clean install-service demo

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# Reinstall when the project's metadata changes.
$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $@

install: $(STAMP)

run: install
	@test -f $(DATA)/identity.key || $(BIN)/clade --data-dir $(DATA) init
	$(BIN)/clade --data-dir $(DATA) run

# An owner and 3 golems on loopback in a temp dir: writes, arrivals, then everything stops.
demo: install
	$(BIN)/clade demo --siblings $(or $(SIBLINGS),3)

# On every core (pytest-xdist; tests that must not overlap share an xdist_group). PYTEST_ARGS adds options.
PYTEST_XDIST := -n auto --dist loadgroup

test: install
	$(BIN)/python -m pytest $(PYTEST_XDIST) -m "not slow" $(PYTEST_ARGS)

# The minutes-long runs: crash and chaos loops, multi-daemon soaks (marked @pytest.mark.slow).
test-slow: install
	$(BIN)/python -m pytest $(PYTEST_XDIST) -m slow $(PYTEST_ARGS)

lint: install
	$(BIN)/ruff check crdt crypto daemon tui tests bench
	$(BIN)/mypy

# The documentation site (docs/ -> site/): the configuration reference is regenerated from the
# config model first; --strict fails on any broken link or anchor (mkdocs.yml: validation).
docs: install
	$(BIN)/python -m daemon.config_reference --write docs/operator/config-reference.md
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

# Every benchmark, one after the other (bench/README.md says what each measures; bench_recall_daemon needs a store).
bench: install
	$(BIN)/python -m bench.bench_store
	$(BIN)/python -m bench.bench_crdt
	$(BIN)/python -m bench.bench_micro
	$(BIN)/python -m bench.bench_recall
	$(BIN)/python -m bench.bench_recall_options
	$(BIN)/python -m bench.bench_vault
	$(BIN)/python -m bench.bench_warnings
	$(BIN)/python -m bench.bench_api
	$(BIN)/python -m bench.bench_clade
	$(BIN)/python -m bench.bench_curator
	$(BIN)/python -m bench.bench_styx
	$(BIN)/python -m bench.bench_tui
	$(BIN)/python -m bench.bench_rotate
	$(BIN)/python -m bench.bench_strangers
	$(BIN)/python -m bench.bench_recovery
	$(BIN)/python -m bench.bench_ecology
	$(BIN)/python -m bench.bench_footprint
	$(BIN)/python -m bench.bench_scale

install-service:
	sudo systemd/install.sh

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache .mypy_cache .ruff_cache .hypothesis site
