VENV ?= .venv
PY := $(VENV)/bin/python
PYTHON ?= python3

.PHONY: run test lint bench clean native

NATIVE_SOURCES := setup.py $(wildcard segments/_native/*.pyx segments/_native/*.pxd segments/_native/*.h)

$(VENV)/.installed: pyproject.toml $(NATIVE_SOURCES)
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	# compat mode puts the project root on sys.path, so Spark's scan for pyspark_* modules finds pyspark_logmgr.
	$(PY) -m pip install --quiet -e '.[dev,spark]' --config-settings editable_mode=compat
	touch $@

run: $(VENV)/.installed
	$(PY) examples/demo.py
	$(PY) examples/embedded_service.py
	$(PY) examples/spark_export.py

lint: $(VENV)/.installed
	$(PY) -m ruff check segments checkpoints logmgr cli tests bench examples
	$(PY) -m mypy --strict segments checkpoints logmgr cli pyspark_logmgr.py examples bench

test: $(VENV)/.installed lint
	$(PY) -m pytest -q

# Rebuild the compiled core in place after editing segments/_native (the install does it too).
native: $(VENV)/.installed
	$(PY) setup.py -q build_ext --inplace

bench: $(VENV)/.installed
	$(PY) bench/run_all.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .mypy_cache .ruff_cache segments/_native/*.c segments/_native/*.so
