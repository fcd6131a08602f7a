VENV ?= .venv
PY := $(VENV)/bin/python
PYTHON ?= python3

.PHONY: run test lint bench clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	# compat mode puts the project root on sys.path, so Spark's scan for pyspark_* modules finds pyspark_logmgr.
	$(PY) -m pip install --quiet -e '.[dev,spark]' --config-settings editable_mode=compat
	touch $@

$(VENV)/.bench-installed: $(VENV)/.installed
	$(PY) -m pip install --quiet -e '.[dev,spark,bench]' --config-settings editable_mode=compat
	touch $@

run: $(VENV)/.installed
	$(PY) examples/demo.py
	$(PY) examples/embedded_service.py
	$(PY) examples/spark_export.py

lint: $(VENV)/.installed
	$(PY) -m ruff check segments checkpoints logmgr cli tests bench examples
	$(PY) -m mypy --strict segments checkpoints logmgr/spark logmgr/offline logmgr/cleaner logmgr/topic_configs.py logmgr/cluster_metadata.py pyspark_logmgr.py

test: $(VENV)/.installed lint
	$(PY) -m pytest -q

bench: $(VENV)/.bench-installed
	$(PY) bench/run_all.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .mypy_cache .ruff_cache
