# Set-up and the two everyday commands. `make train` and `make test` build the venv on demand.
PYTHON ?= python3.11
VENV   ?= .venv
BIN    := $(VENV)/bin
# The local CPU build of torch: an unpinned torch pulls a multi-GB CUDA build.
PINS   := torch==2.13.0 gymnasium==0.29.1 numpy==1.26.4

.PHONY: venv train test bench clean

venv: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml examples/*/pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q $(PINS)
	$(BIN)/pip install -q -e '.[test,minigrid]' $(PINS)
	for ex in examples/*/; do $(BIN)/pip install -q -e "$$ex" $(PINS) || exit 1; done
	touch $@

train: venv
	$(BIN)/mosaic run --worker cleanrl --algo ppo --env-id CartPole-v1 --total-timesteps 50000

test: venv
	$(BIN)/python -m pytest -q $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) var runs wandb
