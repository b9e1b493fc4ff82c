#!/usr/bin/env bash
# Headless Chromium and its matching WebDriver, for the `headroom view` browser tests.
#
#   scripts/browser-deps.sh
#
# Debian's chromium and chromium-driver come from the same source package, so the
# driver always matches the browser (no browser download of its own). Idempotent:
# a no-op when both are installed. Needs root (apt-get).
set -euo pipefail
if command -v chromium >/dev/null && command -v chromedriver >/dev/null; then
  exit 0
fi
if [[ ${EUID} -ne 0 ]]; then
  echo "scripts/browser-deps.sh: chromium/chromedriver missing and not root (needs apt-get as root)" >&2
  exit 1
fi
echo "==> installing chromium and chromium-driver (apt-get)"
export DEBIAN_FRONTEND=noninteractive
# Other apt users on the machine: wait for their lock rather than fail.
apt-get -o DPkg::Lock::Timeout=600 update -qq
apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends chromium chromium-driver fonts-dejavu-core >/dev/null
for tool in chromium chromedriver; do
  command -v "${tool}" >/dev/null || { echo "scripts/browser-deps.sh: ${tool} still missing after apt-get install" >&2; exit 1; }
done
