#!/usr/bin/env bash
# Times a warm `api-resources -o name` of kubeatlas's example against
# `kubectl api-resources -o name` as whole processes, alternating, against a
# real kube-apiserver v1.36.3 serving CRDS CRDs (default 3000), ROUNDS rounds
# (default 20). Prints each one's median wall time and peak RSS (GNU time's) and our share
# of kubectl's (wall-share, rss-share). Needs etcd, kubectl and GNU time (Debian: time);
# builds kube-apiserver unless KUBEATLAS_KUBE_APISERVER names one.
#
#   internal/integration/time-api-resources.sh
#   CRDS=500 ROUNDS=10 internal/integration/time-api-resources.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if [ -z "${KUBEATLAS_KUBE_APISERVER:-}" ]; then
  KUBEATLAS_KUBE_APISERVER=$(mktemp -d)/kube-apiserver
  "$here/kube-apiserver/build.sh" "$KUBEATLAS_KUBE_APISERVER" >&2
fi
export KUBEATLAS_KUBE_APISERVER
cd "$here/tests"
KUBEATLAS_BENCH_CRDS="${CRDS:-3000}" go test -count=1 -run '^$' \
  -bench '^BenchmarkRealServer$/cli-warm-api-resources-name' -benchtime "${ROUNDS:-20}x" -timeout 60m .
