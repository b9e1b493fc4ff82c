#!/usr/bin/env bash
# Where the Kubernetes test plane binaries live (built by scripts/k8s/build.sh).
#
#   scripts/k8s/env.sh              print the bin folder (exit 1 if not built yet)
#   scripts/k8s/env.sh --exports    print `export ...` lines, for eval "$(...)"
#   source scripts/k8s/env.sh       export HEADROOM_K8S_{PIN,ROOT,BIN}, prepend PATH
#
# The folder is ${HEADROOM_CACHE_DIR:-$HOME/.cache/headroom}/k8s-bin/<pin>/bin where
# <pin> is the first 16 hex digits of sha256(versions.env + build.sh). It does not
# depend on the checkout folder, so a fresh clone on a warm machine finds it.
_hr_k8s_here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
HEADROOM_K8S_PIN="$(cat "${_hr_k8s_here}/versions.env" "${_hr_k8s_here}/build.sh" | sha256sum | cut -c1-16)"
HEADROOM_K8S_ROOT="${HEADROOM_CACHE_DIR:-${HOME}/.cache/headroom}/k8s-bin/${HEADROOM_K8S_PIN}"
HEADROOM_K8S_BIN="${HEADROOM_K8S_ROOT}/bin"
export HEADROOM_K8S_PIN HEADROOM_K8S_ROOT HEADROOM_K8S_BIN
unset _hr_k8s_here

if [[ "${BASH_SOURCE[0]}" != "${0}" ]]; then
  # sourced: make the binaries callable unless we are inside build.sh
  if [[ "$(basename "${0}")" != "build.sh" ]]; then
    case ":${PATH}:" in *":${HEADROOM_K8S_BIN}:"*) ;; *) PATH="${HEADROOM_K8S_BIN}:${PATH}" ;; esac
    export PATH
  fi
else
  case "${1:-}" in
    --exports)
      printf 'export HEADROOM_K8S_PIN=%q\nexport HEADROOM_K8S_ROOT=%q\nexport HEADROOM_K8S_BIN=%q\n' \
        "${HEADROOM_K8S_PIN}" "${HEADROOM_K8S_ROOT}" "${HEADROOM_K8S_BIN}"
      ;;
    "")
      echo "${HEADROOM_K8S_BIN}"
      [[ -f "${HEADROOM_K8S_ROOT}/.stamp" ]] || { echo "not built yet: run scripts/k8s/build.sh" >&2; exit 1; }
      ;;
    *) echo "usage: env.sh [--exports]" >&2; exit 2 ;;
  esac
fi
