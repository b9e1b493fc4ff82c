# Sourced by the install scripts: install the Debian packages that are missing, and only those.
#
#   apt_install_missing WHO PACKAGE...
#
# A no-op when every package is installed. Needs root otherwise (exits 1 saying what WHO misses).
apt_install_missing() {
  local who=$1; shift
  local missing=() p t0
  for p in "$@"; do
    dpkg-query -W -f='${db:Status-Status}' "${p}" 2>/dev/null | grep -qx installed || missing+=("${p}")
  done
  [[ ${#missing[@]} -eq 0 ]] && return 0
  if [[ "$(id -u)" != 0 ]]; then
    echo "${who}: need root to apt-get install: ${missing[*]}" >&2
    exit 1
  fi
  echo "==> apt-get install ${missing[*]}"
  t0=$SECONDS
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq -o DPkg::Lock::Timeout=600
  # --no-install-recommends: only what the packages need to run.
  apt-get install -y -qq --no-install-recommends -o DPkg::Lock::Timeout=600 "${missing[@]}" > /dev/null
  echo "    done in $((SECONDS - t0))s"
}
