// Package withfake is the root of a module that holds the core packages'
// benchmarks, and the few tests, that need the fake API server
// (discovery/discoverytest), at the same paths below it:
// internal/withfake/discovery for discovery, internal/withfake/fleet for
// fleet, and so on, as external tests (package discovery_test, ...) that
// use only the exported API.
//
// The core's tests are beside its code, against internal/docserver (a
// server of the core module that internal/withfake/docserver holds to the
// fake). Only what needs the fake itself is here: legacy discovery and the
// older generations, several backends behind one URL, peer aggregation,
// CRD objects and their watches, fleets of clusters, the fake's synthetic
// OpenAPI schemas, and the benchmarks whose figures the README and
// docs/performance.md give. docs/testing.md lists each test here and why.
//
// They are a module of their own because the fake server needs
// k8s.io/apiserver: a test of the core module that imported it would make
// the core's go.mod require k8s.io/apiserver, and with it grpc, otel,
// prometheus and cel-go would be in the module graph of every program that
// imports discovery. The root go.work puts this module beside the core, so
// `go test work` at the root runs these tests with the others.
//
// This module is never published.
package withfake
