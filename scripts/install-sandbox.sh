#!/usr/bin/env bash
# The local backend's trial sandbox: bubblewrap (bwrap), setpriv (util-linux) and libseccomp (libseccomp2, for
# the seccomp filter built through the pyseccomp binding), from Debian packages.
# Idempotent: a no-op when all are installed. Without root or apt-get it only says what is missing;
# headroom then runs trials with `isolation: none` (without libseccomp: sandboxed, but with no keyring filter)
# and says so.
set -euo pipefail
missing=()
command -v bwrap >/dev/null 2>&1 || missing+=(bubblewrap)
command -v setpriv >/dev/null 2>&1 || missing+=(util-linux)
/sbin/ldconfig -p 2>/dev/null | grep -q 'libseccomp\.so\.2 ' || missing+=(libseccomp2)
if [[ ${#missing[@]} -eq 0 ]]; then
  exit 0
fi
if [[ $(id -u) -ne 0 ]] || ! command -v apt-get >/dev/null 2>&1; then
  echo "install-sandbox: missing ${missing[*]} and cannot install it here (needs root and apt-get)" >&2
  exit 0
fi
echo "==> installing ${missing[*]} (the local backend's trial sandbox)"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
