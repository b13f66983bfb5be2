# Every target creates .venv when missing and installs what it needs, so each works on a
# fresh machine with only Python, pip and gcc.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP_TEST := $(VENV)/.stamp-test
STAMP_BENCH := $(VENV)/.stamp-bench
STAMP_PLOT := $(VENV)/.stamp-plot
STAMP_SYS := $(VENV)/.stamp-sys
STAMP_DOCS := $(VENV)/.stamp-docs
STAMP_JAVA := $(VENV)/.stamp-java

.PHONY: demo test test-fast coverage test-oldest lint format-check bench bench-quick clean docs

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(VENV)/.stamp-core: $(BIN)/python pyproject.toml
	$(BIN)/pip install -q -e .
	touch $@

$(STAMP_PLOT): $(BIN)/python pyproject.toml
	$(BIN)/pip install -q -e ".[plot]"
	touch $@

$(STAMP_TEST): $(BIN)/python pyproject.toml
	$(BIN)/pip install -q -e ".[test]"
	touch $@

$(STAMP_DOCS): $(BIN)/python pyproject.toml
	$(BIN)/pip install -q -e ".[docs,plot]"
	touch $@

$(STAMP_BENCH): $(STAMP_TEST)
	$(BIN)/pip install -q -e ".[bench,test]"
	touch $@

demo: $(STAMP_PLOT)
	$(BIN)/dpkit demo --plot dpkit-demo.png

lint: $(STAMP_TEST) format-check
	$(BIN)/ruff check src tests benchmarks tools
	$(BIN)/mypy --strict src/dpkit

# The tree is laid out by `ruff format` (settings in pyproject.toml); this only checks.
format-check: $(STAMP_TEST)
	$(BIN)/ruff format --check src tests benchmarks tools

# PostgreSQL and Chromium for the ledger and web-page tests (apt, only when missing).
$(STAMP_SYS): $(BIN)/python .ci/system-deps.sh
	bash .ci/system-deps.sh
	touch $@

# Two pytest-xdist workers (the reference machine has two cores). `--dist loadgroup` keeps the
# Spark, PostgreSQL and Chromium tests each on one worker, so one JVM pair, one server and one
# browser start per run (tests/conftest.py assigns the groups). `make test XDIST=` runs serially,
# as a plain `pytest` does.
XDIST ?= -n 2 --dist loadgroup

# The whole suite includes tests/test_docs_site.py, which builds this site in strict mode.
test: lint $(STAMP_SYS)
	$(BIN)/pytest $(XDIST)

# The inner loop: no JVM, PostgreSQL or Chromium, nothing marked slow, no lint (markers in
# pyproject.toml; tests/conftest.py adds spark/postgres/browser from the fixtures a test uses).
FAST := not slow and not spark and not postgres and not browser
test-fast: $(STAMP_TEST)
	$(BIN)/pytest $(XDIST) -m "$(FAST)"

# Line coverage of src/dpkit by the test-fast selection; fails below fail_under in
# pyproject.toml (the whole suite covers at least as much). Not part of `make test`, which the
# tracer would slow down several times on the numeric tests.
coverage: $(STAMP_TEST)
	HYPOTHESIS_PROFILE=coverage $(BIN)/pytest $(XDIST) -m "$(FAST)" --cov=dpkit \
		--cov-report=term:skip-covered

# `make test-fast` against the oldest versions of the dependencies pyproject.toml declares, in
# .venv-oldest (see .ci/oldest-deps.sh).
test-oldest:
	PY=$(PY) XDIST="$(XDIST)" bash .ci/oldest-deps.sh .venv-oldest

# Java for the Spark tutorial of the documentation (apt, only when missing).
$(STAMP_JAVA): $(BIN)/python .ci/system-deps.sh
	bash .ci/system-deps.sh java
	touch $@

# The documentation site, into site/: runs every tutorial block and draws the plots.
docs: $(STAMP_DOCS) $(STAMP_JAVA)
	PYTHONPATH=src NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

# Peers of the analytics benchmark live in their own environments (their pins clash with ours).
PEERS := .venv-peers
TUMULT := .venv-tumult
# pure-ldp's count-mean sketches need numpy < 1.26 and its hashes xxhash < 4
PURELDP := .venv-pureldp

$(PEERS)/bin/python:
	$(PY) -m venv $(PEERS)
	$(PEERS)/bin/pip install -q "opendp[polars]==0.16.0" "pipeline-dp==0.3.1" pyarrow \
		"pyspark==3.5.9"

$(PURELDP)/bin/python:
	$(PY) -m venv $(PURELDP)
	$(PURELDP)/bin/pip install -q "numpy==1.25.2" "pure-ldp==1.2.0" "xxhash<4" \
		"statsmodels==0.15.0" "scipy==1.16.3" "scikit-learn==1.9.1"

# diffprivlib fails to import with scikit-learn 1.9 (pin 1.7.2)
QUANTPEERS := .venv-quantpeers

$(QUANTPEERS)/bin/python:
	$(PY) -m venv $(QUANTPEERS)
	$(QUANTPEERS)/bin/pip install -q "diffprivlib==0.6.6" "scikit-learn==1.7.2" "opendp==0.16.0"

# SmartNoise Synth 1.0.8 and OpenDP's MST/AIM (opendp[mbi] 0.16 pins mbi 1.1.0, as smartnoise-synth
# asks; smartnoise-sql's pin opendp<0.15 is overridden: synth only uses its parser and noise).
# smartnoise-synth without its deps: opacus 0.14 and pac-synth serve only its GAN synthesizers.
SYNTHPEERS := .venv-synthpeers

$(SYNTHPEERS)/bin/python:
	$(PY) -m venv $(SYNTHPEERS)
	$(SYNTHPEERS)/bin/pip install -q "smartnoise-sql==1.0.10" "Faker>=17" "disjoint-set>=0.9,<0.10" \
		pyarrow
	$(SYNTHPEERS)/bin/pip install -q "opendp[mbi]==0.16.0"
	$(SYNTHPEERS)/bin/pip install -q --no-deps "smartnoise-synth==1.0.8"

$(TUMULT)/bin/python:
	$(PY) -m venv $(TUMULT)
	$(TUMULT)/bin/pip install -q "tmlt.analytics==0.21.0"

# The utility benchmark's diffprivlib and SmartNoise SQL: SmartNoise SQL pins an older OpenDP
# than the quantile peers' one, so they get an environment of their own.
DPLIB := .venv-dplib
$(DPLIB)/bin/python:
	$(PY) -m venv $(DPLIB)
	$(DPLIB)/bin/pip install -q "diffprivlib==0.6.6" "scikit-learn==1.7.2" \
		"smartnoise-sql==1.0.10" pyarrow

bench: $(STAMP_BENCH) $(STAMP_SYS) $(PEERS)/bin/python $(TUMULT)/bin/python $(PURELDP)/bin/python \
		$(QUANTPEERS)/bin/python $(DPLIB)/bin/python $(SYNTHPEERS)/bin/python
	$(BIN)/python benchmarks/noise.py
	$(BIN)/python benchmarks/accounting.py
	$(BIN)/python benchmarks/loss_engine.py
	$(BIN)/python benchmarks/ledger.py
	$(BIN)/python benchmarks/service.py
	$(BIN)/python benchmarks/audit.py
	$(BIN)/python benchmarks/ldp.py --pure-ldp-python $(PURELDP)/bin/python
	$(BIN)/python benchmarks/selection.py
	$(BIN)/python benchmarks/partition_selection.py --peers-python $(PEERS)/bin/python
	$(BIN)/python benchmarks/analytics_accuracy.py
	$(BIN)/python benchmarks/quantile_accuracy.py --peers-python $(QUANTPEERS)/bin/python
	$(BIN)/python benchmarks/synth.py --peers-python $(SYNTHPEERS)/bin/python \
		--big-rows 10000000 --write
	$(BIN)/python benchmarks/synth_binning.py
	$(BIN)/python benchmarks/analytics.py --peers-python $(PEERS)/bin/python \
		--tumult-python $(TUMULT)/bin/python
	$(BIN)/python benchmarks/spark.py --peers-python $(PEERS)/bin/python \
		--tumult-python $(TUMULT)/bin/python
	$(BIN)/python benchmarks/utility.py --peers-python $(PEERS)/bin/python \
		--tumult-python $(TUMULT)/bin/python --dplib-python $(DPLIB)/bin/python

# Every benchmark once at its smallest sizes, with the same environments as `make bench`: proves
# that they install and that each script runs. The sections go to bench-quick.md (the figures
# of a quick pass are not the measured ones), never to docs/benchmarks.md.
QUICK_DOC := $(abspath bench-quick.md)
QUICK_DATA := /tmp/dpkit-bench-quick
QUICK := DPKIT_BENCH_DOC=$(QUICK_DOC) $(BIN)/python
bench-quick: $(STAMP_BENCH) $(STAMP_SYS) $(PEERS)/bin/python $(TUMULT)/bin/python \
		$(PURELDP)/bin/python $(QUANTPEERS)/bin/python $(DPLIB)/bin/python
	rm -f $(QUICK_DOC)
	$(QUICK) benchmarks/noise.py
	$(QUICK) benchmarks/accounting.py
	$(QUICK) benchmarks/loss_engine.py
	$(QUICK) benchmarks/ledger.py --quick
	$(QUICK) benchmarks/service.py --analysts 4 --queries 20 --trials 5
	$(QUICK) benchmarks/audit.py --quick
	$(QUICK) benchmarks/ldp.py --quick --pure-ldp-python $(PURELDP)/bin/python
	$(QUICK) benchmarks/selection.py
	$(QUICK) benchmarks/partition_selection.py --quick --peers-python $(PEERS)/bin/python
	$(QUICK) benchmarks/analytics_accuracy.py --quick
	$(QUICK) benchmarks/quantile_accuracy.py --quick --peers-python $(QUANTPEERS)/bin/python
	$(QUICK) benchmarks/synth.py --rows 20000 --epsilons 1 --aim-epsilons \
		--path $(QUICK_DATA)-synth.parquet --write
	$(QUICK) benchmarks/synth_binning.py --quick
	$(QUICK) benchmarks/analytics.py --quick --no-big --data $(QUICK_DATA) \
		--peers-python $(PEERS)/bin/python --tumult-python $(TUMULT)/bin/python
	$(QUICK) benchmarks/spark.py --sizes 100000 --repeat-below 0 --data $(QUICK_DATA) \
		--write --peers-python $(PEERS)/bin/python --tumult-python $(TUMULT)/bin/python
	$(QUICK) benchmarks/utility.py --quick --data $(QUICK_DATA)-utility \
		--peers-python $(PEERS)/bin/python --tumult-python $(TUMULT)/bin/python \
		--dplib-python $(DPLIB)/bin/python

clean:
	rm -rf $(VENV) $(PEERS) $(TUMULT) $(QUANTPEERS) $(DPLIB) $(SYNTHPEERS) .venv-oldest .coverage .pytest_cache .mypy_cache .ruff_cache site bench-quick.md
