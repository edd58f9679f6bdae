# make demo: set up, build the demo bench and materialize every asset on the embedded default.
# make test: set up and run the test suite.   make ui: the Dagster UI on the same instance.
PYTHON ?= python3.11
VENV   ?= .venv
BIN    := $(VENV)/bin
ARGUS_HOME ?= $(CURDIR)/.argus
export ARGUS_HOME
PIP    := $(BIN)/pip --disable-pip-version-check -q

.PHONY: setup demo test ui clean

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -e '.[dev]' 2>&1 | grep -v "is ignored: it is neither" || true
	@# rapidocr declares the GUI build of OpenCV, which clashes with opencv-python-headless: its
	@# other dependencies are in pyproject.toml, the package itself goes in without them.
	$(PIP) install --no-deps rapidocr-onnxruntime==1.4.4 2>&1 | grep -v "is ignored: it is neither" || true
	$(BIN)/python -c "import dagster, dagster_polars, decord, cv2, rapidocr_onnxruntime, torch, transformers"
	touch $@

setup: $(BIN)/.installed

demo: setup
	$(BIN)/argus demo

test: setup
	$(BIN)/python -m pytest -q

ui: setup
	DAGSTER_HOME=$(ARGUS_HOME)/dagster_home; mkdir -p $$DAGSTER_HOME; export DAGSTER_HOME; \
	$(BIN)/dagster dev -w workspace.yaml

clean:
	rm -rf $(VENV) .argus
