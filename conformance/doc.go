// Package conformance holds, in its subpackages, the test suites other
// projects wrote for the libraries kubeatlas replaces, ported so that every
// case runs against the original and against kubeatlas: a port error shows
// as a failure on the original's side, a divergence on kubeatlas's.
//
// # Files
//
//   - doc.go: this map. The suites are in clientgo/ (client-go v0.37.2's
//     discovery, memory cache, restmapper and openapi3 tests); clientgo/sides
//     runs a case on both sides.
package conformance
