#!/usr/bin/env bash
# The local backend's trial sandbox: bubblewrap (bwrap), setpriv (util-linux) and libseccomp (libseccomp2, for
# the seccomp filter built through the pyseccomp binding), from Debian packages.
# Idempotent: a no-op when all are installed. Without root or apt-get it says what is missing and exits 1
# (so a chained command stops, and CI fails rather than skipping the sandbox tests); headroom itself can
# still run trials with `isolation: none` and says so in every report (an external agent is then refused
# unless declared trusted: docs/isolation.md).
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
  exit 1
fi
echo "==> installing ${missing[*]} (the local backend's trial sandbox)"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
# Say so when the packages did not bring what the sandbox needs, rather than letting the tests find out.
command -v bwrap >/dev/null 2>&1 || { echo "install-sandbox: bwrap still missing after apt-get install bubblewrap" >&2; exit 1; }
command -v setpriv >/dev/null 2>&1 || { echo "install-sandbox: setpriv still missing after apt-get install util-linux" >&2; exit 1; }
