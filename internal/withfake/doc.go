// Package withfake is the root of a module that holds the core packages'
// tests and benchmarks that run the fake API server
// (discovery/discoverytest), at the same paths below it:
// internal/withfake/discovery tests discovery, internal/withfake/fleet
// tests fleet, and so on, as external tests (package discovery_test, ...)
// that use only the exported API.
//
// They are a module of their own because the fake server needs
// k8s.io/apiserver: a test of the core module that imported it would make
// the core's go.mod require k8s.io/apiserver, and with it grpc, otel,
// prometheus and cel-go would be in the module graph of every program that
// imports discovery. The root go.work puts this module beside the core, so
// `go test work` at the root runs these tests with the others. The core's
// internal tests, which reach unexported code and so cannot be here, use
// internal/docserver, which internal/withfake/docserver holds to the fake.
//
// This module is never published.
package withfake
