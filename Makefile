# The README's two commands. Each sets itself up on a fresh clone: a virtual
# environment in .venv with bench and its pinned dependencies (torch 2.13.0 CPU).
PYTHON ?= python3
VENV   := .venv
STAMP  := $(VENV)/.installed-$(shell $(PYTHON) -c "import hashlib;print(hashlib.sha1(open('pyproject.toml','rb').read()).hexdigest()[:12])")

.PHONY: quickstart test clean

$(STAMP): pyproject.toml
	@$(PYTHON) -c "import sys; sys.exit(0 if sys.version_info >= (3, 11) else 'bench needs Python >= 3.11 (set PYTHON=python3.11)')"
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet --no-compile --upgrade pip
	@# --no-compile: pip would byte-compile every module it installs, most of which nothing imports; instead
	@# the commands below compile what they import, once, into the venv (docs/testing.md, "CI's time").
	$(VENV)/bin/python -m pip install --quiet --no-compile -e '.[test]'
	@rm -f $(VENV)/.installed-* && touch $@

# Python caches the bytecode it compiles (__pycache__, in .venv and this checkout: git ignores it), even where
# PYTHONDONTWRITEBYTECODE is set in the environment: without the cache every process compiles all it imports
# again, about 1,900 modules for a run's worker (docs/testing.md, "CI's time").
RUN := env -u PYTHONDONTWRITEBYTECODE

quickstart: $(STAMP)
	@# The report is written even when some cells failed (it lists them); the exit status still says so.
	$(RUN) $(VENV)/bin/bench run suites/quickstart.yaml; status=$$?; \
	$(RUN) $(VENV)/bin/bench report quickstart --out reports/quickstart || exit $$?; \
	echo; $(RUN) $(VENV)/bin/bench recommend --store sqlite:///results/bench.db --obs vector --reward dense --action discrete || exit $$?; \
	echo; echo "Next:"; \
	echo "  reports/quickstart/index.html                                 # the report: open it in a browser"; \
	echo "  $(VENV)/bin/bench recommend                                   # the shipped reference's table"; \
	echo "  $(VENV)/bin/bench recommend --store sqlite:///results/bench.db  # the table of your quick start's runs"; \
	exit $$status

test: $(STAMP)
	$(RUN) $(VENV)/bin/python -m pytest --durations=30

clean:
	rm -rf $(VENV) .nox .pytest_cache
