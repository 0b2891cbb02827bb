# coopsim: two commands on a fresh machine.
#   make demo   create .venv, install, run the main job (64 agents, MG-MAPF, random-32-32-10)
#   make test   create .venv if missing, install [dev], run the tests
SHELL := /bin/bash
.SHELLFLAGS := -o pipefail -c
PY ?= python3
# (pip's output is filtered of the "Location ... is ignored" warnings this machine's pip config causes;
#  pipefail keeps a failing pip a failing make)
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | sha1sum | cut -c1-12)

.PHONY: demo test venv install bench clean-venv

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip 2>&1 | { grep -v "is ignored: it is neither a file nor a directory" || true; }

# torch first, the CPU build (on this workplace's machines from local disk); a plain torch requirement would pull a
# CUDA build from PyPI. Elsewhere: make demo TORCH_INDEX=https://download.pytorch.org/whl/cpu
TORCH_INDEX ?=
$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/pip install -q torch==2.13.0 $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX)) 2>&1 | { grep -v "is ignored: it is neither a file nor a directory" || true; }
	$(BIN)/pip install -q -e '.[dev]' 2>&1 | { grep -v "is ignored: it is neither a file nor a directory" || true; } \
	  | awk '/BuildBackendWarning: Editable installation/ {skip = 10} skip > 0 {skip--; next} {print}'  # setuptools' 10-line notice
	touch $(STAMP)

install: $(STAMP)

demo: install
	$(BIN)/coopsim run configs/mapf/random-32-32-10.yaml

test: install
	OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 $(BIN)/python -m pytest -q tests

bench: install
	$(BIN)/python benchmarks/mapf_throughput.py

clean-venv:
	rm -rf $(VENV)
