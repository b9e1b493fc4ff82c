#!/usr/bin/env bash
# Harbor, pinned from PyPI, in an interpreter of its own (.cache/harbor/venv).
#
#   scripts/harbor/install.sh            # prints the venv's python on its last line
#
# The venv is made once per pin and interpreter under ${HEADROOM_CACHE_DIR:-$HOME/.cache/headroom}/harbor/
# and .cache/harbor/venv links to it (as scripts/k8s/build.sh links the plane's binaries), so a fresh clone
# on a warm machine installs nothing. HEADROOM_HARBOR_VENV=<new folder> makes it there instead (no link; point
# HEADROOM_HARBOR_PYTHON at the interpreter this prints, which headroom then uses).
#
# Harbor 0.25 needs Python >= 3.12 while headroom supports 3.11, so headroom never imports Harbor:
# the Harbor agent adapter and the export checks run in this venv's interpreter (docs/agents.md).
# The interpreter is the first of $HEADROOM_HARBOR_BASE_PYTHON, python3.13/python3.12 on PATH,
# or a pyenv-installed 3.12/3.13. Idempotent: a no-op when the pin is installed.
# Exits 1 when no such interpreter exists or the install failed (CI fails rather than skipping).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
pin="harbor==0.25.0"
link="${repo}/.cache/harbor/venv"
own="${HEADROOM_HARBOR_VENV:-}"
if [[ -n "${own}" && -f "${own}/.headroom-${pin}" && -x "${own}/bin/python" ]]; then
  echo "${own}/bin/python"
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

cache="${HEADROOM_CACHE_DIR:-${HOME}/.cache/headroom}/harbor"
if [[ -n "${own}" ]]; then
  venv="${own}"
else
  # one venv per pin and base interpreter (a venv is bound to the install it was made from)
  key="$(printf '%s\n%s\n' "${pin}" "$(realpath "${base}") $("${base}" --version 2>&1)" | sha256sum | cut -c1-12)"
  venv="${cache}/${key}/venv"
fi
stamp="${venv}/.headroom-${pin}"

link_into_repo() {
  [[ -n "${own}" ]] && return 0
  mkdir -p "$(dirname "${link}")"
  # an older checkout's venv was a folder here, not a link: ln would put the link inside it
  [[ -d "${link}" && ! -L "${link}" ]] && rm -rf "${link}"
  ln -sfn "${venv}" "${link}"
}

mkdir -p "${cache}" "$(dirname "${venv}")"
exec 9>"${cache}/.lock"
flock 9  # two checkouts installing at once: the second waits, then finds it done
if [[ ! -f "${stamp}" || ! -x "${venv}/bin/python" ]]; then
  if [[ -n "${own}" && -e "${venv}" && -n "$(ls -A "${venv}")" && ! -f "${stamp}" ]]; then
    echo "harbor/install.sh: HEADROOM_HARBOR_VENV=${venv} is not empty and not a venv this script made;" \
      "name a new folder" >&2
    exit 1
  fi
  echo "==> installing ${pin} into ${venv} (with $("${base}" --version))" >&2
  rm -rf "${venv}"
  "${base}" -m venv "${venv}"
  "${venv}/bin/python" -m pip install --quiet --upgrade pip >&2
  "${venv}/bin/python" -m pip install --quiet "${pin}" >&2
  "${venv}/bin/python" -c 'import harbor.agents.factory, harbor.models.trial.result' >&2
  touch "${stamp}"
fi
link_into_repo
if [[ -n "${own}" ]]; then echo "${venv}/bin/python"; else echo "${link}/bin/python"; fi
