#!/usr/bin/env bash
# Install everything the test suite needs, then run all of it (slow and cluster tests included).
#
#   scripts/test.sh [pytest args...]
#
# 1. a virtualenv in .venv with the package and its test extras (PyPI only);
# 2. the Kubernetes test control plane, built from the Go module proxy and cached
#    (scripts/k8s/build.sh: a no-op when the pins are unchanged);
# 3. Debian's docker.io and the Debian base image for the Docker backend's tests
#    (scripts/docker/install.sh: a no-op when installed and cached);
# 4. pytest over tests/. Exit code 5 (nothing collected) is an error here: a
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
  .venv/bin/pip install --quiet --upgrade pip
  .venv/bin/pip install --quiet -e '.[test]'
  touch "${stamp}"
fi

echo "==> Kubernetes test control plane (scripts/k8s/build.sh)"
scripts/k8s/build.sh

echo "==> Docker daemon and base image (scripts/docker/install.sh)"
scripts/docker/install.sh

echo "==> pytest"
set +e
.venv/bin/python -m pytest "$@"
rc=$?
set -e
if [[ ${rc} -eq 5 ]]; then
  echo "pytest collected no tests: failing on purpose" >&2
  exit 1
fi
exit ${rc}
