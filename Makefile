# Two commands do everything on a fresh machine: `make reproduce` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell sha256sum requirements.txt | cut -c1-12)
export PYTHONPATH := $(CURDIR)
export SOURCE_DATE_EPOCH := 0
export MPLBACKEND := Agg

.PHONY: all venv test reproduce check bench lab clean

all: test

venv: $(STAMP)

$(STAMP): requirements.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --disable-pip-version-check -q -r requirements.txt
	rm -f $(VENV)/.installed-*
	touch $@

# the test suite, including every notebook at a small size
test: $(STAMP)
	$(PY) -m pytest -q -p no:cacheprovider -n 2 --dist loadgroup tests

# every notebook at full size: tables/ and figures/ regenerate byte-identically
reproduce: $(STAMP)
	$(PY) -m finbench.pipeline

# fails naming every table, figure or corpus file that differs from the committed one (after `make reproduce`)
check: $(STAMP)
	$(PY) -m finbench.pipeline --check

# episodes per second over the full corpus x 5 seeds, one process
bench: $(STAMP)
	$(PY) -m finbench.bench

# JupyterLab on the venv's python3 kernel, rooted here; `make lab LAB_PORT=8899` to move it.
# MPLBACKEND is dropped so that kernels show figures inline (Agg is for the batch runs);
# --allow-root since these machines run as root (a no-op for anyone else).
LAB_IP ?= 127.0.0.1
LAB_PORT ?= 8888
lab: $(STAMP)
	$(PY) -m ipykernel install --sys-prefix --name python3
	env -u MPLBACKEND $(PY) -m jupyterlab --no-browser --allow-root --ServerApp.ip=$(LAB_IP) \
		--ServerApp.port=$(LAB_PORT) '--ServerApp.root_dir=$(CURDIR)'

clean:
	rm -rf build data/cache
