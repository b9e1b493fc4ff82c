# Sourced by the Go builds (scripts/k8s/build.sh, scripts/k8s/kueue.sh): one Go environment for both.
#
# Module checksums are verified. The checksum database is reached through the module proxy (GOPROXY as
# configured on the machine serves /sumdb/sum.golang.org/), so a machine whose only way out is the proxy
# still verifies every module against the public log; a module whose hash differs fails the build.
# HEADROOM_GOSUMDB names another checksum database; there is no switch that turns verification off.
export GOTOOLCHAIN=local
export CGO_ENABLED=0
export GOFLAGS="-mod=mod -buildvcs=false"
export GOSUMDB="${HEADROOM_GOSUMDB:-sum.golang.org}"
if [[ "${GOSUMDB}" == off ]]; then
  echo "Go builds verify module checksums: HEADROOM_GOSUMDB=off is not accepted" >&2
  exit 1
fi
unset GONOSUMDB GONOSUMCHECK GOINSECURE GOPRIVATE
