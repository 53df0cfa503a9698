# Two commands on a fresh machine:  make train   (trains the default model)   make test   (the whole suite)
# Each installs what it needs into .venv first. torch is pinned to the CPU wheel this project's machines
# carry; elsewhere set TORCH_VERSION= (empty) or TORCH_SPEC="torch" to let pip choose your build.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
TORCH_VERSION ?= 2.13.0
TORCH_SPEC ?= $(if $(TORCH_VERSION),torch==$(TORCH_VERSION),torch)
ARGS ?=
PYTEST_ARGS ?=
# The suite's test files run side by side, one pytest-xdist worker per core (at most 4), each worker on cores of its
# own (tests/conftest.py), the files with slow tests first; PYTEST_WORKERS=0 runs them in one process.
PYTEST_WORKERS ?= auto

# The data root: TINYGPT_DATA if set, else ../shared/data when it exists (this project's checkouts),
# else tinygpt's per-user cache (named corpora are downloaded there).
ifneq ($(wildcard ../shared/data),)
export TINYGPT_DATA ?= $(abspath ../shared/data)
endif

.PHONY: install train test lint tensorboard clean device-check

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check "$(TORCH_SPEC)"
	$(VENV)/bin/pip install --quiet --disable-pip-version-check -e ".[dev]"
	touch $@

install: $(VENV)/.installed

train: install
	$(PY) scripts/train.py $(ARGS)

test: install
	$(PY) -m pytest -n $(PYTEST_WORKERS) --maxprocesses 4 --dist loadfile --no-loadscope-reorder $(PYTEST_ARGS)

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

# On a GPU machine: the device tests, speed, packing and the spec's two tables, into $(OUT) (docs/benchmarks/gpu.md)
OUT ?= device-check
device-check:
	$(PYTHON) scripts/device_check.py --out $(OUT) $(ARGS)

tensorboard: install
	$(VENV)/bin/tensorboard --logdir outputs

clean:
	rm -rf $(VENV)
