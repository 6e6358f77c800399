package fleet_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kubeatlas/kubeatlas/fleet"
)

// TestAddKubeconfigErrorsNameTheFile: a kubeconfig that is not YAML, or
// not there, is an error that says which file (client-go's decoding error
// alone did not).
func TestAddKubeconfigErrorsNameTheFile(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "broken-kubeconfig")
	if err := os.WriteFile(bad, []byte("apiVersion: v1\nclusters: [\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{bad, filepath.Join(dir, "missing-kubeconfig")} {
		f, err := fleet.New()
		if err != nil {
			t.Fatal(err)
		}
		_, err = f.AddKubeconfig(name, "*")
		if err == nil || !strings.Contains(err.Error(), name) || strings.Count(err.Error(), name) != 1 {
			t.Errorf("AddKubeconfig(%s): %v", filepath.Base(name), err)
		}
	}
}
