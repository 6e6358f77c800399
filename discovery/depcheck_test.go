package discovery_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDependencies keeps the client lean: the fake server's heavy
// dependencies (the real apiserver and OpenAPI handlers) and the test
// double itself stay out of what a user of package discovery links.
func TestDependencies(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/kubeatlas/kubeatlas/discovery").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		// (go-restful and kube-openapi's handler3 arrive through client-go's
		// own discovery package, whose interfaces the adapter implements.)
		for _, banned := range []string{"k8s.io/apiserver/", "github.com/kubeatlas/kubeatlas/discovery/discoverytest"} {
			if strings.HasPrefix(dep, banned) {
				t.Errorf("package discovery depends on %s", dep)
			}
		}
	}
}
