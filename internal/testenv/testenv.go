// Package testenv finds what tests need from outside Go: kubectl,
// redis-server, etcd. (Every fixture a test reads is in the repository.)
// Where something is absent a test
// skips with a clear message, so `go test ./...` passes on a fresh clone;
// with KUBEATLAS_REQUIRE_EXTERNAL=1 (set by .ci/run) it fails instead.
package testenv

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// RequireVar turns skips for missing external tools into failures.
const RequireVar = "KUBEATLAS_REQUIRE_EXTERNAL"

func missing(t testing.TB, format string, args ...any) {
	t.Helper()
	if os.Getenv(RequireVar) != "" {
		t.Fatalf(format+" ("+RequireVar+" is set, so this is a failure)", args...)
	}
	t.Skipf(format+" (set "+RequireVar+"=1 to fail instead)", args...)
}

// Tool returns the path of an executable on the PATH, or skips.
func Tool(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		missing(t, "%s is not on the PATH", name)
	}
	return p
}

// NoKubeconfig makes the test's process look like a machine with no
// kubeconfig: HOME an empty directory, KUBECONFIG empty. The go command's
// caches stay where they are, so that a `go run` the test causes does not
// build everything anew under the new HOME.
func NoKubeconfig(t *testing.T) {
	t.Helper()
	names := []string{"GOCACHE", "GOMODCACHE", "GOPATH"}
	out, err := exec.Command("go", append([]string{"env"}, names...)...).Output()
	if err != nil {
		t.Fatalf("go env: %v", err)
	}
	for i, v := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		t.Setenv(names[i], v)
	}
	t.Setenv("HOME", t.TempDir())
	t.Setenv("KUBECONFIG", "")
}
