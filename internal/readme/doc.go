// Package readme holds README.md to what it says: a newcomer copies its
// commands and programs first, so a stale one costs the most there.
//
// Files:
//   - readme_test.go: reads the README's ```go and ```sh blocks; compiles
//     every Go program in the module its imports belong to (through a build
//     overlay, so nothing is written into the tree); checks that every command
//     names examples, packages, modules, flags and benchmarks that exist, and
//     runs those that need no cluster and no network (the examples on their
//     embedded fake cluster).
//
// The package has no code of its own: it is a test over the repository.
package readme
