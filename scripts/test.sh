#!/usr/bin/env bash
# Install everything the test suite needs, then run all of it (slow and cluster tests included).
#
#   scripts/test.sh [pytest args...]
#
# 1. a virtualenv in .venv with the package and its test extras (PyPI only; installed by uv, itself from PyPI);
# 2. bubblewrap for the local backend's trial sandbox (Debian package; scripts/install-sandbox.sh);
# 3. Debian's chromium and chromium-driver for the `headroom view` browser tests
#    (scripts/browser-deps.sh: apt-get, a no-op when installed);
# 4. the Kubernetes test control plane, built from the Go module proxy and cached
#    (scripts/k8s/build.sh: a no-op when the pins are unchanged), and Kueue's controller
#    manager for the Kueue tests (scripts/k8s/kueue.sh: the same, for its own pin);
# 5. the real test node's parts (scripts/node/install.sh: containerd, runc, CNI plugins
#    and mmdebstrap from apt, the local images; cached, skipped with HEADROOM_SKIP_REALNODE=1);
# 6. Debian's docker.io and the Debian base image for the Docker backend's tests
#    (scripts/docker/install.sh: a no-op when installed and cached);
# 7. Harbor, pinned from PyPI, in a Python >= 3.12 venv of its own (scripts/harbor/install.sh), for the
#    Harbor agent and export tests;
# 8. ruff (lint and format) and mypy (types) over the tree, configured in pyproject.toml; a finding
#    fails the script before any test runs (docs/development.md, "Lint and types"); then the import contracts
#    (import-linter, .importlinter): the layers of docs/engine.md, and only orchestrator/kube imports the
#    kubernetes client;
# 9. pytest over tests/, on three xdist workers (HEADROOM_TEST_WORKERS). Exit code 5 (nothing collected) is an error here: a
#    suite that runs no test must not pass.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${repo}"

python="${PYTHON:-python3}"
if [[ ! -x .venv/bin/python ]]; then
  "${python}" -m venv .venv
fi
stamp=.venv/.headroom-installed
if [[ ! -f "${stamp}" || pyproject.toml -nt "${stamp}" ]]; then
  echo "==> installing Python packages into .venv"
  # uv (from PyPI) installs the same packages as pip from its own cache in a fraction of pip's time (23 s against
  # 50 s for a fresh clone on a warm machine, docs/development.md); the bytecode is compiled at install, as pip does,
  # since the suite starts hundreds of processes and this machine kind sets PYTHONDONTWRITEBYTECODE.
  .venv/bin/pip install --quiet --upgrade pip 'uv==0.13.10'
  # uv reads its own settings, not pip's: a mirror given to pip by environment is given to uv too
  if [[ -n "${PIP_INDEX_URL:-}" && -z "${UV_INDEX_URL:-}" ]]; then export UV_INDEX_URL="${PIP_INDEX_URL}"; fi
  if [[ -n "${PIP_EXTRA_INDEX_URL:-}" && -z "${UV_EXTRA_INDEX_URL:-}" ]]; then
    export UV_EXTRA_INDEX_URL="${PIP_EXTRA_INDEX_URL}"
  fi
  .venv/bin/uv pip install --quiet --compile-bytecode --python .venv/bin/python -e '.[test]'
  touch "${stamp}"
fi

# Bytecode for the package, once: the tests start the CLI as a process many times, and where the environment sets
# PYTHONDONTWRITEBYTECODE (this machine kind does) each of them compiled the modules it imports from source again.
# A module edited later is compiled from source as before (a .pyc records its source's mtime and size).
.venv/bin/python -m compileall -q orchestrator

echo "==> lint: ruff check (pyproject.toml [tool.ruff])"
if ! .venv/bin/ruff check orchestrator tests benchmarks examples scripts; then
  echo "lint failed: ruff found the problems above (fix them, or .venv/bin/ruff check --fix for the safe ones)" >&2
  exit 1
fi
echo "==> format: ruff format --check (pyproject.toml [tool.ruff])"
if ! .venv/bin/ruff format --check orchestrator tests benchmarks examples scripts; then
  echo "format check failed: the files above differ from ruff format (run .venv/bin/ruff format orchestrator tests benchmarks examples scripts)" >&2
  exit 1
fi
echo "==> types: mypy (pyproject.toml [tool.mypy])"
if ! .venv/bin/python -m mypy; then
  echo "type check failed: mypy found the problems above" >&2
  exit 1
fi
echo "==> layers: lint-imports (.importlinter)"
if ! .venv/bin/lint-imports --no-cache .importlinter; then
  echo "layer check failed: an import above breaks a contract in .importlinter (an import only points down the layers of docs/engine.md, and only orchestrator/kube imports the kubernetes client); move the helper down, never add an exemption" >&2
  exit 1
fi

echo "==> trial sandbox (scripts/install-sandbox.sh)"
scripts/install-sandbox.sh

echo "==> headless Chromium for the viewer's browser tests (scripts/browser-deps.sh)"
scripts/browser-deps.sh

echo "==> Kubernetes test control plane (scripts/k8s/build.sh)"
scripts/k8s/build.sh
echo "==> Kueue for the test plane (scripts/k8s/kueue.sh)"
scripts/k8s/kueue.sh

if [[ "${HEADROOM_SKIP_REALNODE:-}" != 1 ]]; then
  echo "==> real test node: packages and images (scripts/node/install.sh)"
  scripts/node/install.sh
fi

echo "==> Docker daemon and base image (scripts/docker/install.sh)"
scripts/docker/install.sh

echo "==> Harbor in its own interpreter (scripts/harbor/install.sh)"
scripts/harbor/install.sh >/dev/null

# Workers: the suite spends much of its time waiting on Pods, containers and sandboxes. The real node's
# tests stay on one worker (one node; 12 of pytest's 17-18 minutes in 2026-12-07's runs), so two more take
# the rest: on two cores three workers ran the suite in 21 min against 32 for two (docs/development.md).
# Tests that share a service (the control plane and real node; the private dockerd and Podman) stay on one
# worker (tests/conftest.py). HEADROOM_TEST_WORKERS=0, or an -n of your own, runs it your way.
workers=(-n "${HEADROOM_TEST_WORKERS:-3}" --dist loadgroup)
for arg in "$@"; do
  case "${arg}" in -n|-n[0-9]*|--numprocesses|--numprocesses=*|no:xdist) workers=() ;; esac
done
echo "==> pytest ${workers[*]}"
set +e
.venv/bin/python -m pytest "${workers[@]}" "$@"
rc=$?
set -e
if [[ ${rc} -eq 5 ]]; then
  echo "pytest collected no tests: failing on purpose" >&2
  exit 1
fi
exit ${rc}
