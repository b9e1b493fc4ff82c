#!/usr/bin/env bash
# Install what the Docker backend's tests need (tests/docker, marker docker).
# Idempotent and cached: a second run does nothing and takes well under a second.
#
#   scripts/docker/install.sh
#
# 1. Debian packages (apt-get, only if one is missing): docker.io (dockerd 20.10 with
#    its containerd and runc), podman (4.3, with conmon; it runs containers with docker.io's
#    runc) and mmdebstrap (builds the base image). No system-wide dockerd or Podman service
#    is started here: the test session starts its own (tests/docker/daemon.py,
#    tests/docker/podman.py), each with its own roots and unix socket under a temp folder.
# 2. The local base image (scripts/images/build.sh): headroom.local/debian-base, built
#    from Debian's packages and cached by the digest of its inputs. Task images in the
#    tests are built `FROM` it; no registry is ever contacted.
# 3. The wheelhouse of the controller image (scripts/images/wheelhouse.sh): headroom's
#    dependencies as wheels from PyPI, cached by the digest of pyproject.toml, so the test
#    that builds helm/Dockerfile on the local base image needs no network.
set -Eeuo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "${here}/../.." && pwd)"
packages=(docker.io podman mmdebstrap)

# shellcheck source=../lib/apt.sh
source "${repo}/scripts/lib/apt.sh"
apt_install_missing docker/install.sh "${packages[@]}"
echo "docker packages: $(for p in "${packages[@]}"; do
  printf '%s=%s ' "${p}" "$(dpkg-query -W -f='${Version}' "${p}")"; done)"

"${repo}/scripts/images/build.sh"
"${repo}/scripts/images/wheelhouse.sh" >/dev/null
