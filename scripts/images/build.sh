#!/usr/bin/env bash
# Build headroom's local container images from Debian packages (no registry needed).
#
#   scripts/images/build.sh             build what is missing, print the image names
#   scripts/images/build.sh --force     rebuild both images
#   scripts/images/build.sh --exports   print `export HEADROOM_IMAGE_...=` lines for the
#                                       current inputs (exit 1 if not built); no build
#
# Images (each one archive that `docker load` and `ctr -n k8s.io image import` accept):
#   headroom.local/debian-base:<key12>  Debian's essential set + debian-base.packages
#                                       (bash, coreutils, python3, ...), built by mmdebstrap
#                                       from the host's Debian apt sources, CMD ["bash"]
#   headroom.local/pause:<key12>        one static Go binary (pause/main.go): the pod sandbox
#
# Cache: ${HEADROOM_CACHE_DIR:-$HOME/.cache/headroom}/images/<image>-<key12>/ holding
#   image.tar (the archive), image.json (name + digests), and for debian-base
#   packages.lock (every installed package=version, the resolved package list).
# <key> = sha256 of the inputs: the normalised package list, suite and architecture
# (debian-base) or main.go/go.mod and the Go version (pause), plus this script and
# oci_archive.py. Same key -> no build. Builds are reproducible (SOURCE_DATE_EPOCH,
# deterministic archive writer): the same package versions give the same image digest.
#
# Needs: mmdebstrap (apt), go (for pause; the same toolchain scripts/k8s/build.sh uses).
set -Eeuo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
force=0
mode=build
for arg in "$@"; do
  case "${arg}" in
    --force) force=1 ;;
    --exports) mode=exports ;;
    -h|--help) sed -n '2,26p' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) echo "images/build.sh: unknown argument: ${arg}" >&2; exit 2 ;;
  esac
done

cache="${HEADROOM_CACHE_DIR:-${HOME}/.cache/headroom}/images"
# Fixed timestamp for every file and the image config: part of reproducibility.
export SOURCE_DATE_EPOCH="${HEADROOM_IMAGE_EPOCH:-1764460800}"   # 2025-11-30T00:00:00Z
arch="$(dpkg --print-architecture 2>/dev/null || echo amd64)"
# shellcheck disable=SC1091
suite="${HEADROOM_DEBIAN_SUITE:-$(. /etc/os-release && echo "${VERSION_CODENAME:-bookworm}")}"

packages() { sed -e 's/#.*//' -e 's/[[:space:]]//g' "${here}/debian-base.packages" | grep -v '^$' | sort -u; }

base_key="$(
  { echo "suite=${suite} arch=${arch} epoch=${SOURCE_DATE_EPOCH}"; packages
    cat "${here}/build.sh" "${here}/oci_archive.py"; } | sha256sum | cut -c1-64)"
go_version="$(go env GOVERSION 2>/dev/null || echo none)"
pause_key="$(
  { echo "go=${go_version} arch=${arch} epoch=${SOURCE_DATE_EPOCH}"
    cat "${here}/pause/main.go" "${here}/pause/go.mod" "${here}/build.sh" "${here}/oci_archive.py"; } \
  | sha256sum | cut -c1-64)"

base_name="headroom.local/debian-base:${base_key:0:12}"
pause_name="headroom.local/pause:${pause_key:0:12}"
base_dir="${cache}/debian-base-${base_key:0:12}"
pause_dir="${cache}/pause-${pause_key:0:12}"

print_exports() {
  printf 'export HEADROOM_IMAGE_BASE=%q\nexport HEADROOM_IMAGE_BASE_ARCHIVE=%q\n' \
    "${base_name}" "${base_dir}/image.tar"
  printf 'export HEADROOM_IMAGE_PAUSE=%q\nexport HEADROOM_IMAGE_PAUSE_ARCHIVE=%q\n' \
    "${pause_name}" "${pause_dir}/image.tar"
}

if [[ "${mode}" == exports ]]; then
  print_exports
  [[ -f "${base_dir}/image.json" && -f "${pause_dir}/image.json" ]] || {
    echo "images not built yet: run scripts/images/build.sh" >&2; exit 1; }
  exit 0
fi

mkdir -p "${cache}"
exec 9>"${cache}/.lock"   # one build at a time (CI and a dev shell may share the cache)
if ! flock -n 9; then echo "images/build.sh: waiting for another build..."; flock 9; fi

# publish TMP DIR: move a finished build into place, fixing the recorded archive path.
publish() {
  chmod 0644 "$1/image.tar"
  sed -i "s#$1/image.tar#$2/image.tar#" "$1/image.json"
  rm -rf "$2"; mv "$1" "$2"
}

build_base() {
  command -v mmdebstrap >/dev/null || {
    echo "images/build.sh: mmdebstrap missing (scripts/node/install.sh installs it)" >&2; exit 1; }
  # The host's Debian sources (deb822 or one-line file); other vendors' lists are not used.
  local sources="${HEADROOM_DEBIAN_SOURCES:-}"
  if [[ -z "${sources}" ]]; then
    for f in /etc/apt/sources.list.d/debian.sources /etc/apt/sources.list; do
      [[ -s "${f}" ]] && { sources="${f}"; break; }
    done
  fi
  [[ -n "${sources}" ]] || { echo "images/build.sh: no Debian apt sources found" >&2; exit 1; }
  local tmp="${base_dir}.tmp" t0=$SECONDS
  rm -rf "${tmp}"; mkdir -p "${tmp}"
  echo "  debian-base (${suite}, ${arch}): mmdebstrap, log ${tmp%.tmp}/build.log"
  if ! mmdebstrap --variant=essential --architectures="${arch}" --format=tar \
      --include="$(packages | paste -sd, -)" \
      --dpkgopt='path-exclude=/usr/share/man/*' \
      --dpkgopt='path-exclude=/usr/share/info/*' \
      --dpkgopt='path-exclude=/usr/share/locale/*' \
      --dpkgopt='path-exclude=/usr/share/doc/*' \
      --dpkgopt='path-include=/usr/share/doc/*/copyright' \
      --customize-hook='rm -f "$1/etc/resolv.conf" "$1/etc/hostname"' \
      --customize-hook="dpkg-query --admindir=\"\$1/var/lib/dpkg\" -W -f='\${Package}=\${Version}\n' | LC_ALL=C sort > '${tmp}/packages.lock'" \
      "${suite}" "${tmp}/rootfs.tar" "${sources}" > "${tmp}/build.log" 2>&1; then
    tail -n 30 "${tmp}/build.log" >&2
    echo "images/build.sh: mmdebstrap failed (log: ${tmp}/build.log)" >&2
    exit 1
  fi
  python3 "${here}/oci_archive.py" --layer "${tmp}/rootfs.tar" --name "${base_name}" \
    --out "${tmp}/image.tar" --created "${SOURCE_DATE_EPOCH}" --cmd '["bash"]' \
    --env LANG=C.UTF-8 \
    --label "org.headroom.image=debian-base" --label "org.headroom.suite=${suite}" \
    --label "org.headroom.packages-lock-sha256=$(sha256sum < "${tmp}/packages.lock" | cut -c1-64)" \
    --created-by "scripts/images/build.sh: mmdebstrap --variant=essential ${suite}" \
    > "${tmp}/image.json"
  rm -f "${tmp}/rootfs.tar"   # the layer lives on inside image.tar
  publish "${tmp}" "${base_dir}"
  echo "  debian-base: $(wc -l < "${base_dir}/packages.lock") packages, $((SECONDS - t0))s"
}

build_pause() {
  command -v go >/dev/null || { echo "images/build.sh: go is not on PATH (pause image)" >&2; exit 1; }
  local tmp="${pause_dir}.tmp" t0=$SECONDS
  rm -rf "${tmp}"; mkdir -p "${tmp}/root"
  (cd "${here}/pause" && CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-buildvcs=false \
     go build -trimpath -ldflags "-s -w" -o "${tmp}/root/pause" .)
  # A layer holding only /pause, written with fixed owner/mode/mtime.
  python3 - "${tmp}/root/pause" "${tmp}/layer.tar" "${SOURCE_DATE_EPOCH}" <<'PY'
import sys, tarfile
src, out, mtime = sys.argv[1], sys.argv[2], int(sys.argv[3])
with tarfile.open(out, "w", format=tarfile.PAX_FORMAT) as t, open(src, "rb") as f:
    ti = t.gettarinfo(src, arcname="pause")
    ti.uid = ti.gid = 0; ti.uname = ti.gname = "root"; ti.mode = 0o755; ti.mtime = mtime
    t.addfile(ti, f)
PY
  python3 "${here}/oci_archive.py" --layer "${tmp}/layer.tar" --name "${pause_name}" \
    --out "${tmp}/image.tar" --created "${SOURCE_DATE_EPOCH}" --entrypoint '["/pause"]' \
    --label "org.headroom.image=pause" --created-by "scripts/images/build.sh: pause/main.go ${go_version}" \
    > "${tmp}/image.json"
  rm -rf "${tmp}/root" "${tmp}/layer.tar"
  publish "${tmp}" "${pause_dir}"
  echo "  pause: $((SECONDS - t0))s"
}

t0=$SECONDS
if [[ ${force} -eq 1 || ! -f "${base_dir}/image.json" ]]; then build_base; fi
if [[ ${force} -eq 1 || ! -f "${pause_dir}/image.json" ]]; then build_pause; fi

# Keep the newest few builds of each image (other branches may use them); drop the rest.
keep="${HEADROOM_IMAGES_KEEP:-3}"
for img in debian-base pause; do
  ls -1dt "${cache}/${img}-"*/ 2>/dev/null | grep -v '\.tmp/$' | tail -n +"$((keep + 1))" \
    | while read -r old; do rm -rf "${old}"; done
done

echo "images ready ($((SECONDS - t0))s):"
echo "  ${base_name}  ${base_dir}/image.tar"
echo "  ${pause_name}  ${pause_dir}/image.tar"
print_exports > "${cache}/last.env"
