# The README's two commands are `make book` and `make test`; everything else is a helper.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
VENDOR_STAMP := book/_vendor/.vendored

.PHONY: help setup book strict-book book-current pytest-all test test-thorough lint unit unit-fast warm-kernels notebooks nbval build-strict lab lab-setup test-lab bench clean report

help:
	@echo "make book   build the static book into _build/html (sets everything up)"
	@echo "make test   lint, strict book build (each chapter runs once), unit and notebook tests beside the page check"
	@echo "make unit-fast  unit tests without notebooks, browsers or slow tests, few hypothesis examples (about a minute)"
	@echo "make test-thorough  the unit tests with every property test's full example count"
	@echo "make lab    open the notebooks in JupyterLab"
	@echo "make bench  time the planner's hot paths"
	@echo "make test-lab  run every chapter in a headless JupyterLab and move each explorer"
	@echo "make report CHAPTER=name PARAMS=\"a=1 b=x\" [PARAMS_FILE=p.yaml] OUT=dir   one chapter on your inputs, as one offline page"

# A virtual environment with the pinned requirements and the package (editable).
$(STAMP): requirements.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r requirements.txt
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps -e .
	touch $@

# Browser JavaScript for the offline book, from the npm registry, checksummed.
$(VENDOR_STAMP): book/_js/vendor.sh book/_js/SHA256SUMS book/_js/book.css book/_js/widget-paths.js book/_js/charts.js
	bash book/_js/vendor.sh
	touch $@

setup: $(STAMP) $(VENDOR_STAMP)

book: setup
	$(MAKE) --no-print-directory strict-book
	@echo
	@echo "Book built. Open: file://$(CURDIR)/_build/html/index.html"

lint: $(STAMP)
	$(BIN)/ruff check planner tests book data
	$(BIN)/ruff format --check planner tests book data
	$(BIN)/mypy

# The fast engine's kernels, and those the lockstep engine and the differential tests call on their
# own, compiled into numba's cache (a few seconds when they are cached; tests/warm_kernels.py) in two
# processes: the engine's part, the longest, and the others in turn, the first of which compiles the
# engine's decision kernel before the engine's part needs it. After a kernel changes, or in a new
# checkout (numba keys its cache on the sources' paths), the test workers would otherwise both compile
# the same kernels at once.
warm-kernels: $(STAMP)
	$(BIN)/python -m tests.warm_kernels engine & engine=$$!; \
	$(BIN)/python -m tests.warm_kernels loose steps lockstep & others=$$!; \
	status=0; for job in $$engine $$others; do wait $$job || status=1; done; exit $$status

# Markers are set by module in tests/conftest.py.
unit: warm-kernels
	HYPOTHESIS_PROFILE=$${HYPOTHESIS_PROFILE:-ci} $(BIN)/python -m pytest tests -q -n 2 -m "not notebook"

# Every property test with the examples it asks for (up to 3,000), on fresh random examples.
test-thorough: warm-kernels
	HYPOTHESIS_PROFILE=thorough $(BIN)/python -m pytest tests -q -n 2 -m "not notebook"

# The five slowest steps are printed: a test whose own call passes a second belongs in SLOW_TESTS
# (tests/conftest.py); a shared fixture's setup is paid once per worker.
unit-fast: warm-kernels
	HYPOTHESIS_PROFILE=$${HYPOTHESIS_PROFILE:-dev} $(BIN)/python -m pytest tests -q -n 2 -m "not notebook and not browser and not slow" --durations=5

# After build-strict: a chapter run with its default parameters, and the check that
# every cell of every notebook ran without error (what nbval-lax checks), read the
# build's execution cache; runs on other parameters execute, in kernels forked from a process that has
# loaded the compiled kernels (tests/kernel_fork.py), so those are compiled first.
notebooks: warm-kernels
	$(BIN)/python -m pytest tests -q -n 2 -m notebook

# Executes every notebook again, on its own; `make test` reads the build's runs instead.
nbval: $(STAMP)
	$(BIN)/python -m pytest --nbval-lax book -q -n 2 --dist loadfile

# The book built strictly (-W -n): each notebook is executed once per change of its code cells
# or of the fingerprint of planner/, data/ and the pins (tests/execution_cache.py), two at a
# time before Sphinx reads them (which would run them one by one), and the
# notebook tests read these runs. A passed build is stamped with the fingerprint of everything
# the pages are built from.
strict-book: setup
	rm -rf _build/html _build/.doctrees
	$(BIN)/python -m tests.execution_cache config _build/_config.cache.yml
	$(BIN)/python -m tests.execution_cache execute 2
	$(BIN)/jupyter-book build . --config _build/_config.cache.yml -W -n --keep-going
	$(BIN)/python -m tests.execution_cache stamp _build/html

# A strict build of the current inputs (`make book` makes one) is not built again.
book-current: setup
	$(BIN)/python -m tests.execution_cache current _build/html || $(MAKE) --no-print-directory strict-book

# The strict build, then every page opened in Chromium at both widths.
build-strict: book-current
	$(BIN)/python tests/check_built_book.py _build/html

# Every test, unit and notebook, in one run: the two workers take the longest first, and a worker
# waiting on a notebook's kernel leaves its core to the other.
pytest-all: $(STAMP)
	HYPOTHESIS_PROFILE=$${HYPOTHESIS_PROFILE:-ci} $(BIN)/python -m pytest tests -q -n 2 --dist worksteal --durations=15

# make warm-kernels runs beside lint, which yields the cores to it (lint's report is printed first). After
# the strict build (the notebook tests read its runs), the built pages are opened in Chromium while the
# tests run, to fill the cores the tests leave idle; the page check's report is printed after the tests'.
# With LAB=1 (CI), JupyterLab's environment is made beside lint (make lab-setup), and every chapter also
# runs in JupyterLab beside the tests (make test-lab); its report is printed last.
test: setup
	mkdir -p _build
	$(MAKE) --no-print-directory warm-kernels > _build/warm_kernels.log 2>&1 & warm=$$!; \
	lab_setup=; $(if $(LAB),$(MAKE) --no-print-directory lab-setup > _build/lab_setup.log 2>&1 & lab_setup=$$!;) \
	nice -n 10 $(MAKE) --no-print-directory lint; \
	wait $$warm || { cat _build/warm_kernels.log; exit 1; }; cat _build/warm_kernels.log; \
	if [ -n "$$lab_setup" ]; then wait $$lab_setup || { cat _build/lab_setup.log; exit 1; }; cat _build/lab_setup.log; fi
	$(MAKE) --no-print-directory book-current
	$(BIN)/python tests/check_built_book.py _build/html > _build/check_built_book.log 2>&1 & pages=$$!; \
	lab=; $(if $(LAB),$(MAKE) --no-print-directory test-lab > _build/lab_check.log 2>&1 & lab=$$!;) \
	tests=0; $(MAKE) --no-print-directory pytest-all || tests=$$?; \
	pages_status=0; wait $$pages || pages_status=$$?; \
	cat _build/check_built_book.log; \
	lab_status=0; if [ -n "$$lab" ]; then wait $$lab || lab_status=$$?; cat _build/lab_check.log; fi; \
	test $$tests -eq 0 -a $$pages_status -eq 0 -a $$lab_status -eq 0

# Jupyter refuses to run as root unless told; containers often are root.
LAB_ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root,)

# JupyterLab in an environment of its own: its dependencies (anywidget, jsonschema's format checkers)
# slow `import altair` by about a second and a half in every process, so the tests' does without them.
# It is a copy of .venv (the same pins, at the cost of a copy, not of a second install) with the
# package's `lab` extra added; the copied scripts are pointed at the copy's python.
LAB_VENV := .venv-lab
LAB_BIN := $(LAB_VENV)/bin
LAB_STAMP := $(LAB_VENV)/.installed

$(LAB_STAMP): $(STAMP)
	rm -rf $(LAB_VENV)
	cp -a $(VENV) $(LAB_VENV)
	$(LAB_BIN)/python tests/relocate_venv.py $(VENV) $(LAB_VENV)
	$(LAB_BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[lab]'
	touch $@

lab-setup: $(LAB_STAMP)

lab: $(LAB_STAMP)
	$(LAB_BIN)/jupyter lab $(LAB_ROOT_FLAG) book/

# Every chapter in a real JupyterLab (headless, 127.0.0.1), driven by Chromium through Playwright.
test-lab: $(LAB_STAMP)
	$(LAB_BIN)/python -m tests.lab_check

# One chapter on your own inputs: its executed notebook and one offline HTML page in OUT.
# Relative *_path values are taken from the folder make runs in.
report: setup
	@test -n "$(CHAPTER)" -a -n "$(OUT)" || { echo 'usage: make report CHAPTER=loadtest_thresholds PARAMS="loadtest_path=my.json itl_p99_slo_ms=40" OUT=reports/mine' >&2; exit 2; }
	$(BIN)/planner report $(CHAPTER) $(foreach p,$(PARAMS),--param $(p)) $(if $(PARAMS_FILE),--params $(PARAMS_FILE)) --out $(OUT)

bench: $(STAMP)
	$(BIN)/python -m tests.bench.run

clean:
	rm -rf _build book/_vendor .pytest_cache .ruff_cache .hypothesis
