# gpu_fabric.mnnvl — developer entry points.
#   make test    lint, sanity, units, Molecule scenarios, end-to-end tests on the simulated rack
#   make demo    simulated rack up, then site.yml (cluster + verify) against it, then the report
SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

VENV        ?= .venv
PYTHON      ?= python3
BIN         := $(abspath $(VENV))/bin
export PATH := $(BIN):$(PATH)
export ANSIBLE_CONFIG := $(CURDIR)/ansible.cfg

COLLECTIONS := $(CURDIR)/.tmp/collections
COLL_LINK   := $(COLLECTIONS)/ansible_collections/gpu_fabric/mnnvl
SANITY_TREE := $(CURDIR)/.tmp/sanity/ansible_collections/gpu_fabric/mnnvl
SANITY_PY   ?= 3.11
MOLECULE_SCENARIOS ?= $(sort $(notdir $(patsubst %/molecule.yml,%,$(wildcard molecule/*/molecule.yml))))

.PHONY: help venv layout lint sanity units artifact ee docs molecule integration bench-smoke test compat build install-collection demo sim-up sim-down changelog clean

help:  ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-20s %s\n", $$1, $$2}'

$(BIN)/ansible-playbook: requirements.txt requirements-host.txt requirements-test.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -r requirements-test.txt
	touch $@

venv: $(BIN)/ansible-playbook  ## create .venv with the controller and test requirements

layout:  ## lay the clone out as ansible_collections/gpu_fabric/mnnvl (a symlink under .tmp)
	@mkdir -p $(dir $(COLL_LINK))
	@ln -sfn ../../../.. $(COLL_LINK)

lint: venv layout  ## ruff, ansible-lint (production profile), changelog fragments
	ruff check .
	ruff format --check .
	ansible-lint --profile production
	antsibull-changelog lint

# Kubernetes manifests (the shipped RBAC, test CRDs) are several YAML documents per file, as kubectl
# expects them; they are not Ansible content, so ansible-test's yamllint does not read them.
# ansible-test bootstraps pip in its sanity venvs with a script it downloads from a host that
# build machines may not reach; tests/sanity/pip_bootstrap.py does the same from the standard library.
ANSIBLE_TEST_PIP := $(shell $(BIN)/python -c 'from ansible_test._internal.python_requirements import get_venv_packages as g; print(g(type("P", (), {"version": "$(SANITY_PY)"})())["pip"])' 2>/dev/null)
SANITY_DEPS := $(CURDIR)/.tmp/sanity/ansible_collections/kubernetes/core

sanity: venv  ## ansible-test sanity on a copy laid out as ansible_collections/gpu_fabric/mnnvl
	rm -rf $(CURDIR)/.tmp/sanity
	mkdir -p $(SANITY_TREE) $(dir $(SANITY_DEPS)) ~/.ansible/test/cache
	git ls-files -co --exclude-standard | tar -cf - -T - | tar -xf - -C $(SANITY_TREE)
	cp -r $$($(BIN)/python -c 'import ansible_collections.kubernetes.core as m; print(m.__path__[0])') $(SANITY_DEPS)
	cp tests/sanity/pip_bootstrap.py ~/.ansible/test/cache/get_pip_$(subst .,_,$(ANSIBLE_TEST_PIP)).py
	cd $(SANITY_TREE) && git init -q . && ansible-test sanity --venv --python $(SANITY_PY) --color no --exclude tests/sanity/pip_bootstrap.py --exclude sim/ --exclude docs/rbac/ --exclude tests/integration/openshift/

units: venv layout  ## pytest: module_utils, modules and filters against real tool outputs
	eval "$$(tests/fetch-containerd.sh)" && pytest tests/unit

# The host scenarios, longest first (seconds each in the CI run of 2026-12-06: hosts 132, bad_inputs 122,
# nvidia_imex 90, nvidia_driver 88, containerd 62, preflight 31), any other after them.
MOLECULE_LONGEST_FIRST := hosts bad_inputs nvidia_imex nvidia_driver containerd preflight
HOST_SCENARIOS := $(filter $(MOLECULE_SCENARIOS),$(MOLECULE_LONGEST_FIRST)) $(filter-out cluster $(MOLECULE_LONGEST_FIRST),$(MOLECULE_SCENARIOS))
# Host scenarios at once (MOLECULE_STREAMS=1: one after another): each on podman trays of its own names
# and network namespaces. They are mostly CPU (Ansible, the modules, podman exec): two at a time gain what
# one leaves idle of two cores (8 % on a busy machine, docs/PERFORMANCE.md "Cutting the CI run").
MOLECULE_STREAMS ?= 2

# Each scenario: destroy, create, prepare, converge, idempotence (must report changed=0), verify,
# destroy. The host scenarios run on podman trays, MOLECULE_STREAMS at a time (tests/molecule/run-scenarios.sh,
# each one's output printed whole when it ends); `cluster` runs last, against the simulated rack
# (whose cold build .ci/run starts in the background), with the kubeconfig, Helm and URLs of
# `sim/rack env`. A summary line per scenario
# (wall time and Molecule's idempotence verdict) ends the target.
molecule: venv layout  ## every Molecule scenario: converge, idempotence (changed=0), verify
	tests/molecule/build-image.sh
	failed=0; tests/molecule/run-scenarios.sh $(MOLECULE_STREAMS) $(HOST_SCENARIOS) || failed=1; \
	for s in $(filter cluster,$(MOLECULE_SCENARIOS)); do \
	  start=$$(date +%s); rc=0; \
	  sim/rack up && source <(sim/rack env) && molecule test -s $$s 2>&1 | tee .tmp/molecule/$$s.log || rc=$$?; \
	  idem=$$(sed -n 's/\x1b\[[0-9;]*m//g; s/.*\(idempotence: [A-Za-z]*: [A-Za-z]*\).*/\1/p' .tmp/molecule/$$s.log | tail -n 1); \
	  printf 'molecule %-14s %-6s %4ss  %s\n' $$s $$([ $$rc -eq 0 ] && echo passed || echo FAILED) $$(( $$(date +%s) - start )) "$${idem:-idempotence: not reached}" >>.tmp/molecule/summary; \
	  [ $$rc -eq 0 ] || failed=1; \
	done; \
	cat .tmp/molecule/summary; exit $$failed

# Two streams by default (INTEGRATION_STREAMS=1 for one): a test file runs whole in one stream, and each
# stream after the first brings up a simulated rack of its own (tests/integration/conftest.py). The tests
# mostly wait on the sim, so one stream leaves about half of two cores idle. The files start longest first
# (conftest.py, FILE_SECONDS; --no-loadscope-reorder keeps that order), so that both streams end together;
# --durations=0 prints every test's time, from which FILE_SECONDS is kept current.
INTEGRATION_STREAMS ?= 2
integration: venv layout  ## end-to-end tests against the simulated rack (sim/rack up once per run and stream)
	pytest tests/integration --durations=0 $(if $(filter-out 1,$(INTEGRATION_STREAMS)),-n $(INTEGRATION_STREAMS) --dist loadfile --no-loadscope-reorder)

# Each benchmark at its smallest size, on simulated racks of its own (ports apart from the tests'):
# proves they still run; the figures of docs/PERFORMANCE.md come from `bench/run` at full size, one at a
# time. Two at a time here (each on its own ports and Helm settings): a smoke run proves, it does not time.
bench-smoke: venv layout  ## every benchmark of bench/ at its smallest size, two at a time (bench/run --smoke --jobs 2)
	bench/run --smoke --jobs 2

# THE test command: each stage in turn (artifact and ee share one build), its wall time and exit code appended to
# $(STAGE_TIMES), which .ci/run prints as a table at its end; the first stage that fails stops the run.
TEST_STAGES := lint sanity units artifact+ee docs molecule integration bench-smoke
STAGE_TIMES ?= $(CURDIR)/.tmp/stage-times.tsv
test:  ## THE test command (what CI runs): lint sanity units artifact ee docs molecule integration bench-smoke
	@mkdir -p $(dir $(STAGE_TIMES)); : >$(STAGE_TIMES)
	@for stage in $(TEST_STAGES); do \
	  start=$$(date +%s); rc=0; \
	  $(MAKE) --no-print-directory $${stage//+/ } || rc=$$?; \
	  printf '%s\t%s\t%s\n' "$$stage" $$(( $$(date +%s) - start )) $$rc >>$(STAGE_TIMES); \
	  [ $$rc -eq 0 ] || exit $$rc; \
	done

COMPAT_VERSIONS ?=
compat: venv layout  ## cluster + verify on each Kubernetes minor from 1.33 to the newest (COMPAT_VERSIONS="1.33.13 1.37.2")
	COMPAT_VERSIONS="$(COMPAT_VERSIONS)" tests/compat.sh

build: venv  ## build the collection artifact
	ansible-galaxy collection build --force --output-path .tmp/dist

artifact: build  ## what the built collection ships: nothing that only works in a clone
	$(BIN)/python tests/build/check_artifact.py .tmp/dist/gpu_fabric-mnnvl-$$(sed -n 's/^version: *//p' galaxy.yml).tar.gz

# The execution environment's build context (no image is built: that needs a container engine and the
# registries): ansible-builder create, then a check of its Containerfile and _build/ (tests/build/check_ee.py).
EE_CONTEXT := $(CURDIR)/.tmp/ee
ee: build  ## execution-environment.yml: ansible-builder create, then check the generated build context
	mkdir -p dist
	cp .tmp/dist/gpu_fabric-mnnvl-$$(sed -n 's/^version: *//p' galaxy.yml).tar.gz dist/gpu_fabric-mnnvl.tar.gz
	rm -rf $(EE_CONTEXT)
	ansible-builder create --file execution-environment.yml --context $(EE_CONTEXT) --output-filename Containerfile
	$(BIN)/python tests/build/check_ee.py $(EE_CONTEXT) $(CURDIR)

# The collection's documentation site (modules, filters, roles from their argument specs) as HTML:
# antsibull-docs writes the reStructuredText, Sphinx the HTML, with -W (a warning fails the build).
# tests/build/docs_conf.py makes it a build without network (no intersphinx inventory to fetch).
DOCS_BUILD := $(CURDIR)/.tmp/docs
docs: venv layout  ## the collection's documentation as HTML (antsibull-docs, Sphinx); any warning fails it
	rm -rf $(DOCS_BUILD)
	mkdir -p $(DOCS_BUILD)
	chmod 755 $(DOCS_BUILD)
	antsibull-docs sphinx-init --use-current --fail-on-error --dest-dir $(DOCS_BUILD) \
	  --project gpu_fabric.mnnvl --copyright 'gpu_fabric.mnnvl contributors' \
	  --title 'gpu_fabric.mnnvl' --html-short-title 'gpu_fabric.mnnvl' gpu_fabric.mnnvl >/dev/null
	cat tests/build/docs_conf.py >>$(DOCS_BUILD)/conf.py
	$(DOCS_BUILD)/build.sh
	@echo "HTML: $(DOCS_BUILD)/build/html/index.html"

install-collection: build  ## install the built artifact into .tmp/installed
	ansible-galaxy collection install --force -p .tmp/installed .tmp/dist/gpu_fabric-mnnvl-$$(sed -n 's/^version: *//p' galaxy.yml).tar.gz

sim-up: venv layout  ## bring the simulated GB200 rack up (cold build of the control plane: minutes)
	sim/rack up

sim-down:  ## tear the simulated rack down
	sim/rack down

DEMO_REPORT_DIR ?= $(CURDIR)/report

demo: venv layout  ## simulated rack + site.yml (cluster and verify stages) + the report
	sim/rack up
	source <(sim/rack env) && status=0 && \
	  ansible-playbook -i inventories/sim playbooks/site.yml -e gpu_fabric_report_dir=$(DEMO_REPORT_DIR) || status=$$?; \
	  echo; sed -n '1,/^## /p' $(DEMO_REPORT_DIR)/report.md | head -n -1; \
	  echo "report: $(DEMO_REPORT_DIR)/report.md (.json .junit.xml .html)"; exit $$status

changelog: venv  ## render CHANGELOG.rst from the fragments
	antsibull-changelog release

clean:  ## remove build and test leftovers (not the simulated rack's binary cache)
	rm -rf .tmp .pytest_cache .ruff_cache dist
