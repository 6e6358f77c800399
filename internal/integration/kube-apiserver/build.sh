#!/usr/bin/env bash
# Builds the real kube-apiserver of this directory's go.mod (k8s.io/kubernetes
# vX.Y.Z) into $1: about 8-10 minutes cold on 2 cores, seconds once Go's build
# cache has it. Nothing is downloaded but Go modules. kube-apiserver-v1.37
# holds the same script (a symlink) for the second version of the mixed pair.
set -euo pipefail
cd "$(dirname "$0")"
out=${1:?usage: build.sh OUTPUT}
v=$(awk '$1 == "require" && $2 == "k8s.io/kubernetes" {print $3}' go.mod)
minor=$(echo "$v" | cut -d. -f2)
ld=""
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
	ld="$ld -X $p.gitVersion=$v -X $p.gitMajor=1 -X $p.gitMinor=$minor"
done
go build -o "$out" -ldflags "$ld" k8s.io/kubernetes/cmd/kube-apiserver
