# lanekit.serving — developer entry points. Two commands matter on a fresh Debian 12 machine:
#   make demo   # creates the venv, brings up the simulated cluster, deploys the default lane
#   make test   # make check, lint, sanity, the collection build and the four molecule scenarios on the simulated cluster
#   (make check is the fast loop after every change; make scenario S=<name> runs one scenario alone)
SHELL := /bin/bash
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
# The bench tools (playbooks/bench-lane.yml) in a virtualenv of their own: llama-benchy pulls in
# transformers and ~55 packages whose pins must not move the controller's (requirements-bench.txt).
BENCH_VENV := .venv-bench
LANE ?= mistral-large4-nvfp4-8x-vllm
INVENTORY ?= inventories/sim
COLLECTION_LINK := .collections/ansible_collections/lanekit/serving
export ANSIBLE_CONFIG := $(CURDIR)/ansible.cfg
export PATH := $(CURDIR)/$(BIN):$(PATH)

.PHONY: check scenario venv venv-bench demo demo-real test test-extended unit integration typecheck lint syntax plan sim-up sim-down host-deps molecule build changelog docs clean

$(BIN)/ansible-playbook: requirements.txt
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -r requirements.txt
	touch $@

$(COLLECTION_LINK):
	mkdir -p $(dir $(COLLECTION_LINK))
	ln -sfn ../../.. $(COLLECTION_LINK)

venv: $(BIN)/ansible-playbook $(COLLECTION_LINK)

$(BENCH_VENV)/bin/tool-eval-bench: requirements-bench.txt
	$(PY) -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/pip install -q --upgrade pip
	$(BENCH_VENV)/bin/pip install -q -r requirements-bench.txt
	touch $@

venv-bench: $(BENCH_VENV)/bin/tool-eval-bench

# Docker engine, debootstrap and the registry for the simulated cluster (root, Debian).
host-deps:
	bash tests/sim/host-deps.sh

plan: venv
	$(BIN)/ansible-playbook playbooks/plan_lane.yml -i inventories/spark8 -e lane=$(LANE)

# SIM_ARGS passes options to the sim playbooks, e.g.
#   make sim-down SIM_ARGS="-e sim_cluster_purge_cache=true"   # also delete the debootstrap cache
sim-up: venv host-deps
	$(BIN)/ansible-playbook tests/sim/playbooks/sim_up.yml $(SIM_ARGS)

sim-down: venv
	$(BIN)/ansible-playbook tests/sim/playbooks/sim_down.yml $(SIM_ARGS)

demo: sim-up
	$(BIN)/ansible-playbook playbooks/deploy_lane.yml -i $(INVENTORY) -e lane=$(LANE)

# A real vLLM (its CPU build from PyPI) serving a generated tiny Llama over the sim's two CPU nodes
# (inventories/sim-cpu): about 3.2 GB of disk for the image and 6 GiB of memory while it serves.
REAL_LANE := tiny-llama-cpu-2x-vllm
demo-real: venv host-deps
	$(BIN)/ansible-playbook tests/sim/playbooks/sim_up.yml -e sim_cluster_real_vllm=true $(SIM_ARGS)
	$(BIN)/ansible-playbook playbooks/deploy_lane.yml -i inventories/sim-cpu -e lane=$(REAL_LANE)

# The unit tests need only the controller venv: the few that drive the bench tools skip without
# .venv-bench. The run fails when the unit tests cover less of plugins/ than COVERAGE_FLOOR percent
# (measured 90% when the floor was set; lower it only with a reason in the commit). Coverage data
# goes to a temporary file: a test run leaves the working tree as it found it.
# PYTEST_WORKERS: pytest-xdist workers for the unit and integration tests (2: both cores of a build
# machine; measured 297 s for the unit tests in one process, 158 s in two; 0 runs them in one process).
COVERAGE_FLOOR ?= 87
PYTEST_WORKERS ?= 2
PYTEST_PARALLEL := $(if $(filter 0,$(PYTEST_WORKERS)),,-n $(PYTEST_WORKERS))
# The bad-input sweeps (tests/unit/badinput) run on their own, untraced: they run the planner and the
# recipe compiler thousands of times, and coverage's tracer made them three times slower (50 core-s
# untraced, 174 traced) for lines the other tests reach too (pytest-cov's no_cover marker does not stop
# the tracer in an xdist worker). The floor counts the other unit tests only.
unit: venv
	cov=$$(mktemp -u /tmp/lanekit-coverage.XXXXXX); rc=0; \
	  COVERAGE_FILE=$$cov $(BIN)/pytest -q -p no:cacheprovider $(PYTEST_PARALLEL) tests/unit --ignore=tests/unit/badinput \
	    --cov=plugins --cov-report= --cov-fail-under=$(COVERAGE_FLOOR) || rc=$$?; \
	  rm -f "$$cov"*; [ $$rc = 0 ] || exit $$rc; \
	  $(BIN)/pytest -q -p no:cacheprovider $(PYTEST_PARALLEL) tests/unit/badinput

# Tests that run ansible-playbook on the controller (local connection, no cluster): roles and
# playbooks end to end, slower than unit tests.
integration: venv
	$(BIN)/pytest -q -p no:cacheprovider $(PYTEST_PARALLEL) tests/integration

# The fast loop, run after every change: ruff, mypy, the playbooks' syntax, the unit tests (the
# docs-consistency tests in tests/unit/docs among them) and the integration tests, on the controller
# only (no Docker, no cluster). It stops at the first failing step; the last line says how long it took.
check: venv
	@start=$$(date +%s); step=; \
	  for target in ruff typecheck syntax unit integration; do \
	    echo "check: $$target"; \
	    if [ $$target = ruff ]; then $(BIN)/ruff check --no-cache; else $(MAKE) --no-print-directory $$target; fi \
	      || { step=$$target; break; }; \
	  done; \
	  if [ -n "$$step" ]; then echo "check: FAILED at $$step after $$(( $$(date +%s) - start )) s"; exit 1; fi; \
	  echo "check: passed in $$(( $$(date +%s) - start )) s"

# mypy over plugins/ with mypy.ini (community.docker's settings: every function annotated). The
# collection is checked under its Ansible name through the .collections link, so each file is
# checked once; the paths are printed relative to the checkout.
typecheck: venv
	set -o pipefail; $(BIN)/mypy -p ansible_collections.lanekit.serving.plugins \
	  | sed 's#^\.collections/ansible_collections/lanekit/serving/##'

# One ansible-playbook for every playbook (2 s; one run per playbook took 38 s): an error names its file
# and line ("Origin: playbooks/x.yml:3:7").
syntax: venv
	$(BIN)/ansible-playbook --syntax-check -i inventories/spark8 playbooks/*.yml tests/sim/playbooks/*.yml >/dev/null
	@echo "syntax: all playbooks parse (the collection's and tests/sim's)"

# antsibull-docs checks every module's and role's documentation as the docs site renders it
# (markup, references such as M(...), role argument specs and their defaults).
lint: venv
	$(BIN)/ansible-lint --profile production
	$(BIN)/antsibull-changelog lint
	$(BIN)/antsibull-docs lint-collection-docs --plugin-docs .

# The collection's docs site (every module and role, from their documentation) in .build/docs/build/html,
# offline: antsibull-docs writes the RST, Sphinx builds it. Without network, Sphinx cannot fetch
# Ansible's own inventory, so links to ansible.builtin modules and Ansible's docs pages stay plain
# text (Sphinx warns; the build does not fail on them), and the site uses Sphinx's alabaster theme
# unless sphinx-ansible-theme is installed.
DOCS := .build/docs
docs: venv
	rm -rf $(DOCS) && mkdir -p $(DOCS)
	$(BIN)/antsibull-docs sphinx-init --use-current --dest-dir $(DOCS) lanekit.serving >/dev/null
	mkdir -p $(DOCS)/rst && chmod og-w $(DOCS)/rst
	cd $(DOCS) && $(CURDIR)/$(BIN)/antsibull-docs --config-file antsibull-docs.cfg collection --cleanup everything \
	  --use-current --dest-dir rst lanekit.serving
	theme=$$($(BIN)/python -c 'import sphinx_ansible_theme' 2>/dev/null && echo sphinx_ansible_theme || echo alabaster); \
	  $(BIN)/sphinx-build -M html $(DOCS)/rst $(DOCS)/build -c $(DOCS) -q -D html_theme=$$theme 2>&1 \
	  | grep -v -e "WARNING: undefined label" -e "intersphinx inventory" -e "failed to reach any of the inventories" || true; \
	  test -s $(DOCS)/build/html/collections/lanekit/serving/index.html
	@echo "docs: $(DOCS)/build/html/index.html"

# ruff, then ansible-test sanity (validate-modules, pylint, pep8, ...) on a copy of the checkout.
.PHONY: sanity
sanity: venv
	$(BIN)/ruff check --no-cache
	bash tests/sanity.sh

build: venv
	bash tests/check-collection.sh

# The molecule scenarios (molecule/<scenario>, settings shared in .config/molecule/config.yml), each of
# which stands alone: `make scenario S=seed-lanes` brings up only the nodes that scenario uses, runs it
# and removes what it brought up. README, "Scenarios", says what each proves and how long it took.
SCENARIOS := seed-lanes ssh-faults recipes real-vllm
scenario: venv venv-bench host-deps
	@test -n "$(S)" || { echo "make scenario S=<name>: one of $(SCENARIOS)"; exit 2; }
	bash tests/molecule-run.sh $(S)

# Every scenario, one after another, each bringing up and removing its own nodes.
molecule: venv venv-bench host-deps
	rc=0; for s in $(SCENARIOS); do bash tests/molecule-run.sh $$s || rc=1; done; exit $$rc

# The checks that need no cluster run while the simulated cluster comes up (tests/test-all.sh).
# The bench tools' venv (.venv-bench) is built by tests/test-all.sh beside the cluster's start: only
# the scenarios need it.
test: venv host-deps
	bash tests/test-all.sh

# make test, plus the scenario tests it leaves out (molecule/shared/tests/lanefixtures.py, EXTENDED_ONLY:
# each proves on the cluster what a unit test in make test proves without one); about 10 minutes more.
test-extended: venv host-deps
	LANEKIT_SCENARIOS=all bash tests/test-all.sh

# Generate CHANGELOG.md and changelogs/changelog.yaml from changelogs/fragments/ (no release).
changelog: venv
	$(BIN)/antsibull-changelog lint
	$(BIN)/antsibull-changelog generate

clean:
	rm -rf .build .pytest_cache
