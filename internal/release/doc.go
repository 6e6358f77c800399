// Package release publishes the modules of this repository as a release
// would, to a file-based module proxy, so that a test can build programs
// from outside the repository against them exactly as users will: no
// replace directive, no go.work, each nested module resolving the core
// through the version its go.mod requires.
//
// It is a module of its own so that golang.org/x/mod, which only this
// check needs, stays out of the core's requirements (and so out of every
// user's module graph).
//
// # Files
//
// publish.go: Modules (the publishable modules of a checkout) and Publish
// (their go.mod rewritten to a version, zipped with golang.org/x/mod/zip,
// laid out as GOPROXY=file:// expects). publish_test.go: consumers of each
// module, under testdata/consumers, built offline from the proxy.
// cmd/publish: the command that publishes the checkout to a proxy
// directory, to try the modules by hand (docs/versioning.md).
package release
