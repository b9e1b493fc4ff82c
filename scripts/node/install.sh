#!/usr/bin/env bash
# Install what the real test node needs (tests/cluster/realnode.py, marker realnode).
# Idempotent and cached: a second run does nothing and takes well under a second.
#
#   scripts/node/install.sh
#
# 1. Debian packages (apt-get, only if one is missing): containerd (1.6, CRI built in),
#    runc, containernetworking-plugins (ptp, host-local, loopback in /usr/lib/cni),
#    mmdebstrap (builds the task image), iproute2 and util-linux (ip, unshare, nsenter).
#    The node never uses a system-wide containerd (none is started here, there is no
#    init system): it starts its own, with its own config, socket, root and state
#    under the session's temp folder.
# 2. The local images (scripts/images/build.sh): headroom.local/debian-base (Debian +
#    debian-base.packages: python3, tmux, ...) and headroom.local/pause, cached by the digest of their inputs.
# The kubelet itself is built with the control plane by scripts/k8s/build.sh.
set -Eeuo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "${here}/../.." && pwd)"
packages=(containerd runc containernetworking-plugins mmdebstrap iproute2 util-linux)

# shellcheck source=../lib/apt.sh
source "${repo}/scripts/lib/apt.sh"
apt_install_missing node/install.sh "${packages[@]}"
echo "node packages: $(for p in containerd runc containernetworking-plugins mmdebstrap; do
  printf '%s=%s ' "${p}" "$(dpkg-query -W -f='${Version}' "${p}")"; done)"

"${repo}/scripts/images/build.sh"
