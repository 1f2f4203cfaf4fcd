# Two commands do everything on a fresh machine: `make reproduce` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell sha256sum requirements.txt | cut -c1-12)
export PYTHONPATH := $(CURDIR)
export SOURCE_DATE_EPOCH := 0
export MPLBACKEND := Agg

.PHONY: all venv test reproduce bench clean

all: test

venv: $(STAMP)

$(STAMP): requirements.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --disable-pip-version-check -q -r requirements.txt
	rm -f $(VENV)/.installed-*
	touch $@

# the test suite, including every notebook at a small size
test: $(STAMP)
	$(PY) -m pytest -q -p no:cacheprovider tests

# every notebook at full size: tables/ and figures/ regenerate byte-identically
reproduce: $(STAMP)
	$(PY) -m finbench.pipeline

# episodes per second over the full corpus x 5 seeds, one process
bench: $(STAMP)
	$(PY) -m finbench.bench

clean:
	rm -rf build data/cache
