#!/usr/bin/env bash
# Harbor, pinned from PyPI, in an interpreter of its own (.cache/harbor/venv).
#
#   scripts/harbor/install.sh            # prints the venv's python on its last line
#
# Harbor 0.25 needs Python >= 3.12 while headroom supports 3.11, so headroom never imports Harbor:
# the Harbor agent adapter and the export checks run in this venv's interpreter (docs/agents.md).
# The interpreter is the first of $HEADROOM_HARBOR_BASE_PYTHON, python3.13/python3.12 on PATH,
# or a pyenv-installed 3.12/3.13. Idempotent: a no-op when the pin is installed.
# Exits 1 when no such interpreter exists or the install failed (CI fails rather than skipping).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
pin="harbor==0.25.0"
venv="${HEADROOM_HARBOR_VENV:-${repo}/.cache/harbor/venv}"
stamp="${venv}/.headroom-${pin}"
if [[ -f "${stamp}" && -x "${venv}/bin/python" ]]; then
  echo "${venv}/bin/python"
  exit 0
fi

supported() { "$1" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 12) else 1)' >/dev/null 2>&1; }
base=""
candidates=()
[[ -n "${HEADROOM_HARBOR_BASE_PYTHON:-}" ]] && candidates+=("${HEADROOM_HARBOR_BASE_PYTHON}")
for name in python3.13 python3.12; do
  found="$(command -v "${name}" 2>/dev/null || true)"
  [[ -n "${found}" ]] && candidates+=("${found}")
done
pyenv_root="${PYENV_ROOT:-${HOME}/.pyenv}"
for dir in "${pyenv_root}"/versions/3.13* "${pyenv_root}"/versions/3.12*; do
  [[ -x "${dir}/bin/python3" ]] && candidates+=("${dir}/bin/python3")
done
for candidate in "${candidates[@]}"; do
  if supported "${candidate}"; then base="${candidate}"; break; fi
done
if [[ -z "${base}" ]]; then
  echo "harbor/install.sh: ${pin} needs Python >= 3.12 and none was found" \
    "(set HEADROOM_HARBOR_BASE_PYTHON, or install python3.12)" >&2
  exit 1
fi

echo "==> installing ${pin} into ${venv} (with $("${base}" --version))" >&2
rm -rf "${venv}"
mkdir -p "$(dirname "${venv}")"
"${base}" -m venv "${venv}"
"${venv}/bin/pip" install --quiet --upgrade pip >&2
"${venv}/bin/pip" install --quiet "${pin}" >&2
"${venv}/bin/python" -c 'import harbor.agents.factory, harbor.models.trial.result' >&2
touch "${stamp}"
echo "${venv}/bin/python"
