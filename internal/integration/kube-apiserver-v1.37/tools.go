//go:build tools

// Package kubeapiserver builds the real kube-apiserver for kubeatlas's
// integration tier, with nothing downloaded but Go modules:
//
//	go build -o BIN k8s.io/kubernetes/cmd/kube-apiserver
//
// (run in this directory; see build.sh). It is its own module so that the
// library's go.mod stays lean.
package kubeapiserver

import _ "k8s.io/kubernetes/cmd/kube-apiserver"
