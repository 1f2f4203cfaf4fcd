# Two commands do everything on a fresh machine: `make reproduce` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell cat requirements.txt pyproject.toml | sha256sum | cut -c1-12)
export PYTHONPATH := $(CURDIR)
export SOURCE_DATE_EPOCH := 0
export MPLBACKEND := Agg

.PHONY: all venv test test-fast reproduce reproduce-paper check verify bench bench-model lab eval mutate clean

all: test

venv: $(STAMP)

$(STAMP): requirements.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --disable-pip-version-check -q -r requirements.txt
	# the project itself, editable: `import finbench` and the `finbench` command work from any folder
	$(PY) -m pip install --disable-pip-version-check -q --no-deps --no-build-isolation -e .
	rm -f $(VENV)/.installed-*
	touch $@

# the test suite, including every notebook at a small size, and every docstring example under finbench/
# (--doctest-modules: each module is imported, headless, and its `>>>` examples run as written).
# --ignore=finbench/__main__.py: importing it runs the command line (`sys.exit(main())`); pytest already
# skips __main__.py for doctests, the flag says so here and keeps it so under any pytest.
test: $(STAMP)
	$(PY) -m pytest -q -p no:cacheprovider -n 2 --dist loadgroup --doctest-modules \
		--ignore=finbench/__main__.py tests finbench

# the fast tier, about a minute on 2 cores: every test but those marked slow (a notebook, a full-size corpus,
# a subprocess or a server: `pytest.mark.slow`, registered in tests/conftest.py), and the docstring examples.
# `make mutate` runs its tests (under tests/) against each mutant; `make test` stays the whole suite.
test-fast: $(STAMP)
	$(PY) -m pytest -q -p no:cacheprovider -n 2 --dist loadgroup -m "not slow" --doctest-modules \
		--ignore=finbench/__main__.py tests finbench

# every notebook at full size: tables/ and figures/ regenerate byte-identically
reproduce: $(STAMP)
	$(PY) -m finbench.pipeline

# the paper alone: the notebooks behind Tables II-VII, Figures 1-3, the 2x2, the cost sweep and the plan search
reproduce-paper: $(STAMP)
	$(PY) -m finbench.pipeline --paper

# a seeded sample of rows of every origin (played, derived, cut, re-priced, loaded) replayed alone and compared
verify: $(STAMP)
	$(PY) -m finbench verify

# fails naming every table, figure or corpus file that differs from the committed one (after `make reproduce`)
check: $(STAMP)
	$(PY) -m finbench.pipeline --check

# episodes per second over the full corpus x 5 seeds, one process
bench: $(STAMP)
	$(PY) -m finbench.bench

# a model's episodes against the scripted model server (finbench mock-server) at 0.25 s a request: Table V's
# subset with 1 and 16 connections, both walls, the ratio, requests and tokens, rows and transcripts compared.
# `make bench-model BENCH_MODEL_ARGS="--latency 2 --connections 32 --max-in-flight 8"`
BENCH_MODEL_ARGS ?=
bench-model: $(STAMP)
	$(PY) -m finbench.bench model $(BENCH_MODEL_ARGS)

# your agent beside the nine, its report card in build/eval/<name>/ (python -m finbench eval --help):
# `make eval AGENT=my_agent.py:MyAgent EVAL_ARGS="--n-tasks 30 --seeds 2"`
AGENT ?=
EVAL_ARGS ?=
eval: $(STAMP)
	@test -n '$(AGENT)' || { echo 'make eval: give AGENT=PATH.py:NAME (or module:NAME), e.g. make eval AGENT=my_agent.py:MyAgent' >&2; exit 64; }
	$(PY) -m finbench eval '$(AGENT)' $(EVAL_ARGS)

# JupyterLab on the venv's python3 kernel, rooted here; `make lab LAB_PORT=8899` to move it.
# MPLBACKEND is dropped so that kernels show figures inline (Agg is for the batch runs);
# --allow-root since these machines run as root (a no-op for anyone else).
LAB_IP ?= 127.0.0.1
LAB_PORT ?= 8888
lab: $(STAMP)
	$(PY) -m ipykernel install --sys-prefix --name python3
	env -u MPLBACKEND $(PY) -m jupyterlab --no-browser --allow-root --ServerApp.ip=$(LAB_IP) \
		--ServerApp.port=$(LAB_PORT) '--ServerApp.root_dir=$(CURDIR)'

# mutation testing (mutmut; what and with which tests: setup.cfg) of the engine, the grader, the policies,
# the runners and the analysis, against the fast tier (`make test-fast`'s tests under tests/, -m "not slow";
# each mutant runs only the tests that reach it, the fastest first): docs/mutation.md says
# per module how many mutants the tests killed and lists each survivor with its triage
# (docs/mutation_triage.csv). From scratch by default: ~18,400 mutants in 48 modules, the better part of a
# day on 2 cores; `make mutate MUTATE=finbench/sim/economics.py`
# (files or folders, space-separated) re-tests only those and keeps the other modules' last
# results. mutmut works in mutants/: the tests run there, and PYTHONPATH points there so they,
# and any process they start, import the mutated copy. Bytecode is written there (PYTHONDONTWRITEBYTECODE
# unset for mutmut alone): a mutated module holds every one of its mutants, megabytes of source, and each
# mutant's run compiled them all afresh (2.6 s a run) where it now loads them (0.1 s), about twice the
# mutants a minute.
MUTATE ?=
MUTATE_JOBS ?= 2
# MUTATE_SAMPLE=n (with MUTATE naming files): n mutants of each module, drawn uniformly with a fixed seed
# (scripts/mutation_sample.py), instead of all: a score with a stated interval in an hour, not a day
MUTATE_SAMPLE ?=
MUTANT_GLOBS = $(foreach m,$(MUTATE:/=),$(if $(filter %.py,$(m)),$(subst /,.,$(patsubst %/__init__,%,$(m:.py=))).x*,$(subst /,.,$(m)).*))
MUTMUT = env -u PYTHONDONTWRITEBYTECODE PYTHONPATH=$(CURDIR)/mutants $(VENV)/bin/mutmut
mutate: $(STAMP)
	$(if $(MUTATE),if [ -d mutants ]; then find mutants -type f ! -name '*.meta' -delete; fi,rm -rf mutants)
	mkdir -p mutants  # before python starts: a PYTHONPATH folder missing at start-up is never searched
ifeq ($(MUTATE_SAMPLE),)
	$(if $(MUTATE),$(PY) scripts/mutation_sample.py 0 $(MUTATE))
	$(MUTMUT) run --max-children $(MUTATE_JOBS) $(foreach g,$(MUTANT_GLOBS),'$(g)')
else
	# first the mutants and the test statistics (a name no mutant has: nothing is run), then the sample
	$(MUTMUT) run --max-children $(MUTATE_JOBS) 'finbench.no_such_module.x_none' > mutants/prepare.log 2>&1 \
		|| grep -q "nothing matches" mutants/prepare.log || { cat mutants/prepare.log; exit 1; }
	$(MUTMUT) run --max-children $(MUTATE_JOBS) $$($(PY) scripts/mutation_sample.py $(MUTATE_SAMPLE) $(MUTATE))
endif
	$(PY) scripts/mutation_report.py $(if $(MUTATE),--measured $(MUTATE),--measured-all)

clean:
	rm -rf build data/cache
