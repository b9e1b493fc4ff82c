#!/usr/bin/env bash
# Wheels of every dependency of the headroom package (PyPI only, through pip), so the
# controller image (helm/Dockerfile) builds with no network and no registry image.
#
#   scripts/images/wheelhouse.sh          download what is missing, print the folder
#   scripts/images/wheelhouse.sh --path   print the folder (exit 1 if not there yet); no download
#
# The local base image (scripts/images/build.sh) has Debian's python3 but no pip, so the
# wheelhouse also holds pip's own wheel (helm/Dockerfile runs pip from it) and the build
# backend (setuptools, wheel) that installs headroom from its source.
#
# Cache: ${HEADROOM_CACHE_DIR:-$HOME/.cache/headroom}/wheels/<key12>/ where <key> is the
# sha256 of pyproject.toml, this script and the Python version and platform of the pip
# used (${PYTHON:-.venv/bin/python}); they must match the image's python3 (the base image
# is built from the host's Debian suite, so they do). headroom's own wheel is not cached:
# the image build makes it from the source it is given.
set -Eeuo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "${here}/../.." && pwd)"
python="${PYTHON:-${repo}/.venv/bin/python}"
[[ -x "${python}" ]] || python=python3
mode=build
case "${1:-}" in
  --path) mode=path ;;
  -h|--help) sed -n '2,17p' "${BASH_SOURCE[0]}"; exit 0 ;;
  "") ;;
  *) echo "wheelhouse.sh: unknown argument: $1" >&2; exit 2 ;;
esac

tag="$("${python}" -c 'import sys, sysconfig; print(sys.implementation.cache_tag, sysconfig.get_platform())')"
key="$({ cat "${repo}/pyproject.toml" "${BASH_SOURCE[0]}"; echo "${tag}"; } | sha256sum | cut -c1-12)"
cache="${HEADROOM_CACHE_DIR:-${HOME}/.cache/headroom}/wheels"
dir="${cache}/${key}"

if [[ "${mode}" == path ]]; then
  [[ -f "${dir}/.complete" ]] || { echo "wheelhouse not built yet: run scripts/images/wheelhouse.sh" >&2; exit 1; }
  echo "${dir}"; exit 0
fi
if [[ -f "${dir}/.complete" ]]; then echo "${dir}"; exit 0; fi

mkdir -p "${cache}"
exec 9>"${cache}/.lock"
flock 9
tmp="${dir}.tmp"
rm -rf "${tmp}"; mkdir -p "${tmp}"
t0=$SECONDS
# headroom's dependencies with its [kubernetes] extra (the image is the controller's) as wheels (sdists are
# built into wheels here), then the tools
"${python}" -m pip wheel --quiet --wheel-dir "${tmp}" "${repo}[kubernetes]" >&2
rm -f "${tmp}"/headroom-*.whl
"${python}" -m pip download --quiet --only-binary=:all: --dest "${tmp}" pip "setuptools>=77" wheel >&2
touch "${tmp}/.complete"
rm -rf "${dir}"; mv "${tmp}" "${dir}"
# keep the newest 3 wheelhouses (other branches may use them)
ls -1dt "${cache}"/*/ 2>/dev/null | grep -v '\.tmp/$' | tail -n +4 | while read -r old; do rm -rf "${old}"; done
echo "wheelhouse: $(ls "${dir}" | wc -l) wheels, $(du -sh "${dir}" | cut -f1), $((SECONDS - t0))s" >&2
echo "${dir}"
