// Package readme holds README.md to what it says: a newcomer copies its
// commands and programs first, so a stale one costs the most there.
//
// Files:
//   - readme_test.go: reads the README's ```go and ```sh blocks; builds
//     every Go program (the quick starts) in a new module outside the
//     repository, made by the README's Install commands, so nothing is
//     written into the tree, and runs each with no kubeconfig and with
//     $KUBECONFIG naming a fake cluster; checks that every command
//     names examples, packages, modules, flags and benchmarks that exist, and
//     runs those that need no cluster and no network (the examples on their
//     embedded fake cluster).
//
// The package has no code of its own: it is a test over the repository.
package readme
