package cli_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestEveryExampleHelpExitsZero: every command under examples answers
// --help with its usage and exit status 0, as kubectl does (fleet exited 1
// with "pflag: help requested"). Commands in modules of their own are run
// there.
func TestEveryExampleHelpExitsZero(t *testing.T) {
	if testing.Short() {
		t.Skip("builds every example")
	}
	mains, err := filepath.Glob("../../*/main.go")
	if err != nil {
		t.Fatal(err)
	}
	if len(mains) < 8 {
		t.Fatalf("found only %v", mains)
	}
	for _, m := range mains {
		dir := filepath.Dir(m)
		name := filepath.Base(dir)
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			// go run, not go build and exec: the go command caches the
			// executables it runs, so a warm run links nothing.
			cmd := exec.Command("go", "run", ".", "--help")
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), "KUBECONFIG="+filepath.Join(t.TempDir(), "none"))
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Errorf("%s --help: %v\n%s", name, err, out)
			}
			if !strings.Contains(strings.ToLower(string(out)), "usage") {
				t.Errorf("%s --help printed no usage:\n%s", name, out)
			}
		})
	}
}
