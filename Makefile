# Set-up and the two everyday commands. `make train` and `make test` build the venv on demand.
PYTHON ?= python3.11
VENV   ?= .venv
BIN    := $(VENV)/bin
# The local CPU build of torch: an unpinned torch pulls a multi-GB CUDA build.
PINS   := torch==2.13.0 gymnasium==0.29.1 numpy==1.26.4
# Optional extras installed in both venvs: the test suite exercises them (their tests skip without
# them; cleanrl, analytics and wandb are the built-in worker's and plugins' heavy dependencies, which
# the light core leaves out). `make extras` adds them to venvs built before.
EXTRAS ?= cleanrl,analytics,wandb,test,minigrid,web,sweep,atari,mujoco,ray,docs,lint,arena

# The distribution was `mosaic-workers` before it was `mosaic-rl`: a venv or checkout built before would keep
# the old one's entry points beside the new one's (every plugin twice) unless they go.
forget_old_name = $(1)/bin/pip uninstall -q -y mosaic-workers >/dev/null 2>&1 || true; rm -rf mosaic_workers.egg-info

.PHONY: venv extras train test test-gym1 test-extras proto clean browser-deps docs lint

venv: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml examples/*/pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(call forget_old_name,$(VENV))
	$(BIN)/pip install -q $(PINS)
	$(BIN)/pip install -q -e '.[$(EXTRAS)]' $(PINS)
	for ex in examples/*/pyproject.toml; do $(BIN)/pip install -q -e "$$(dirname $$ex)" $(PINS) || exit 1; done
	touch $@

train: venv
	$(BIN)/mosaic run --worker cleanrl --algo ppo --env-id CartPole-v1 --total-timesteps 50000

# In CI (CI=true) each lane ends with its 25 slowest tests, to see where the minutes go.
DURATIONS := $(if $(CI),--durations=25)

# The suite runs in $(JOBS) processes (pytest-xdist), a module (or a cluster's tests) to a process,
# longest first (tests/conftest.py). The tests marked `alone` judge a run against a clock (a stop
# sent at half the budget, a grace period): they run afterwards by themselves, so no other test's
# load decides them.
# One process more than CI's 2 cores: with 2 the cores idled 11% of the lane (tests waiting on
# Slurm's 30 s time-limit checks, a cluster starting, a run's next event); each run keeps its
# one-thread budget (mosaic_core.threads), so a third process shares the cores, never oversubscribes.
JOBS ?= 3
PARALLEL = -n $(JOBS) --dist loadscope
test: venv
	$(BIN)/python -m pytest -q $(PARALLEL) -m "not alone" $(DURATIONS) $(PYTEST_ARGS)
	$(BIN)/python -m pytest -q -m alone $(DURATIONS) $(PYTEST_ARGS) || [ $$? = 5 ]  # 5: none selected

# A second, smaller lane: our code on gymnasium 1.x. It runs the tests of the code that meets
# gymnasium (the host's training-process side, the CleanRL worker and its algorithms, FastLane,
# curriculum, the zoo, the modes); the daemon, dashboard, sweep, analytics and security tests use
# a CartPole run only as a vehicle and run in the default lane. Not here either: the workers with
# environments of their own (their training processes never see the host's gymnasium) and Ray
# clusters (the launcher is the same on both lanes).
GYM1 := .venv-gym1
GYM1_TESTS ?= tests/core tests/cleanrl tests/algorithms tests/atari_mujoco tests/curriculum tests/fastlane \
	tests/modes tests/zoo tests/arena
# Of those folders' modules, these never meet gymnasium: none of their tests imports it or calls into
# it, in the test process or any process a test starts, on gymnasium 1.x (config, flags, discovery,
# the capabilities and run index, start-up imports, layering, FastLane's shared memory and settings,
# the curriculum's schedules and host side). They run in the default lane only. `.ci/gym1_trace.py`
# (its docstring says how) finds them; a new module runs on both lanes until it is listed here.
GYM1_HOST_ONLY := $(addprefix tests/,cleanrl/test_flags.py cleanrl/test_grpc_handshake.py \
	core/test_capabilities.py core/test_config.py core/test_contract.py core/test_discovery.py core/test_hook_reference.py \
	core/test_launchers.py core/test_layering.py core/test_listing_bounds.py core/test_no_plugin_names_in_core.py core/test_private_dirs.py core/test_reference_docs.py \
	core/test_run_index.py core/test_score.py core/test_startup.py curriculum/test_host.py curriculum/test_schedule.py \
	fastlane/test_frames.py fastlane/test_segment.py fastlane/test_seqlock.py fastlane/test_settings.py)
# And these meet it through a CartPole run that is only their vehicle (the manual's smoke blocks, the CLI's
# small things, the worker choice, hooks, terminal output, plugin isolation, the shared machine, the user's
# state, paths and ids, registration, thread budgets; continuing a run, whose training side is the resume
# that tests/algorithms/test_run_contract.py checks on this lane), as the daemon's and the security tests do.
GYM1_VEHICLE_ONLY := $(addprefix tests/core/,test_docs.py test_small_things.py test_worker_choice.py test_hooks.py \
	test_terminal.py test_isolation.py test_shared_machine.py test_user_state.py test_paths_and_ids.py \
	test_registration.py test_thread_budget.py test_continue.py)
GYM1_SKIP := --ignore=tests/core/test_worker_environments.py $(addprefix --ignore=,$(GYM1_HOST_ONLY) $(GYM1_VEHICLE_ONLY))
$(GYM1)/.installed: pyproject.toml
	test -x $(GYM1)/bin/python || $(PYTHON) -m venv $(GYM1)
	$(call forget_old_name,$(GYM1))
	$(GYM1)/bin/pip install -q torch==2.13.0 'gymnasium>=1.0,<2' numpy==1.26.4
	$(GYM1)/bin/pip install -q -e '.[$(EXTRAS)]' -e examples/mosaic_example_plugin torch==2.13.0 'gymnasium>=1.0,<2' numpy==1.26.4
	touch $@

# The optional extras ($(EXTRAS)) into whichever of the two venvs exist.
extras:
	for venv in $(VENV) $(GYM1); do test ! -x $$venv/bin/pip || $$venv/bin/pip install -q -e '.[$(EXTRAS)]' \
	  torch==2.13.0 numpy==1.26.4 "gymnasium$$(test $$venv = $(GYM1) && echo '>=1.0,<2' || echo '==0.29.1')" || exit 1; done

test-gym1: $(GYM1)/.installed
	$(GYM1)/bin/python -m pytest -q -p no:cacheprovider $(PARALLEL) $(DURATIONS) -m "not slow and not alone" $(GYM1_SKIP) $(GYM1_TESTS)
	$(GYM1)/bin/python -m pytest -q -p no:cacheprovider $(DURATIONS) -m "alone and not slow" $(GYM1_SKIP) $(GYM1_TESTS) || [ $$? = 5 ]

# A third lane: the extras upstream CleanRL's other scripts need (envpool, jax, dm-control; about 1.5 GB),
# in a venv of their own built once per CI run rather than in every venv (procgen is left out: its gym3
# pins glfw<2, envpool glfw>=2.10). Runs the bundled algorithms on EnvPool and DM Control and the
# fixture checkout's scripts (tests/atari_mujoco/test_extras.py), and what `mosaic algos` says there.
EXTRAS_VENV := .venv-cleanrl-extras
EXTRAS_LANE := cleanrl,analytics,test,atari,mujoco,envpool,jax,dm-control
$(EXTRAS_VENV)/.installed: pyproject.toml
	test -x $(EXTRAS_VENV)/bin/python || $(PYTHON) -m venv $(EXTRAS_VENV)
	$(call forget_old_name,$(EXTRAS_VENV))
	$(EXTRAS_VENV)/bin/pip install -q $(PINS)
	$(EXTRAS_VENV)/bin/pip install -q -e '.[$(EXTRAS_LANE)]' -e examples/mosaic_example_plugin $(PINS)
	touch $@

test-extras: $(EXTRAS_VENV)/.installed
	$(EXTRAS_VENV)/bin/python -m pytest -q -p no:cacheprovider $(DURATIONS) tests/atari_mujoco/test_extras.py tests/cleanrl/test_readiness.py

# What the dashboard's browser tests need: Debian's chromium (never `playwright install`, which
# downloads a browser) and playwright, which drives /usr/bin/chromium through executable_path.
browser-deps: venv
	test -x /usr/bin/chromium || (apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium fonts-liberation)
	$(BIN)/pip install -q playwright==1.64.1

# The manual as a site (mkdocs.yml): a broken link, anchor or included file fails the build. The
# reference pages are generated from the code first, so a stale one fails here too (regenerate:
# `python -m mosaic_core.refdocs`, `python -m mosaic_core.hookdocs > docs/hooks.md`).
docs: venv
	$(BIN)/python -m mosaic_core.refdocs --check
	$(BIN)/python -m mosaic_core.hookdocs | cmp -s - docs/hooks.md || { echo "docs/hooks.md is stale: python -m mosaic_core.hookdocs > docs/hooks.md" >&2; exit 1; }
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet --site-dir $(or $(SITE_DIR),site)

# Lint (a CI lane, before the tests: it takes seconds): ruff's checks and its format on the whole tree,
# mypy strict on mosaic_core and with its default checks on the plugins (pyproject.toml: [tool.ruff],
# [tool.mypy]; .ci/mypy_plugins.py). docs/contributing.md says how.
lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/python .ci/mypy_plugins.py  # the plugins: mypy's default checks (the core's are strict)

# Regenerate the gRPC code from mosaic_core/trainer/trainer.proto (generated files are committed).
proto: venv
	$(BIN)/python -m grpc_tools.protoc -I. --python_out=. --pyi_out=. --grpc_python_out=. mosaic_core/trainer/trainer.proto

clean:
	rm -rf $(VENV) $(GYM1) $(EXTRAS_VENV) var runs wandb site
