# Two entry points, each complete on its own on a fresh clone:
#   make quickstart   install evalkit + plugins/ into .venv, run the quickstart
#   make test         install evalkit + plugins/ + test tools into .venv, run ruff, the
#                     import contracts (pyproject.toml) and the tests
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PLUGINS := $(wildcard plugins/*/pyproject.toml)
PLUGIN_DIRS := $(foreach p,$(PLUGINS),-e $(dir $(p)))
export LITELLM_LOCAL_MODEL_COST_MAP := True

.PHONY: quickstart test install install-test bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# pandas: the README's Python lines use Run.df
install: $(BIN)/python
	$(BIN)/python -m pip install --quiet -e ".[pandas]" $(PLUGIN_DIRS)

install-test: $(BIN)/python
	$(BIN)/python -m pip install --quiet -e ".[test]" $(PLUGIN_DIRS)

quickstart: install
	$(BIN)/evalkit run +experiment=quickstart

test: install-test
	$(BIN)/python -m ruff check evalkit plugins tests bench
	$(BIN)/lint-imports
	$(BIN)/python -m pytest -q -p no:cacheprovider -n 2 --dist loadfile

bench: install-test
	for script in bench/bench_*.py; do $(BIN)/python $$script || exit 1; done

clean:
	rm -rf $(VENV) runs .pytest_cache
