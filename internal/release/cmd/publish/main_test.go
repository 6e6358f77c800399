package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPublish: the command finds the checkout above the working directory,
// writes every module's .mod, .zip and .info to the proxy at the version
// asked for, and says how to use it; a bad version is an error.
func TestPublish(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	if err := run([]string{"-dir", dir, "-version", "v0.0.1-cmdtest"}, &out, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	for _, mod := range []string{"github.com/kubeatlas/kubeatlas", "github.com/kubeatlas/kubeatlas/redisstore", "github.com/kubeatlas/kubeatlas/discovery/discoverytest"} {
		for _, ext := range []string{".mod", ".zip", ".info"} {
			if _, err := os.Stat(filepath.Join(dir, mod, "@v", "v0.0.1-cmdtest"+ext)); err != nil {
				t.Errorf("%s: %v", mod, err)
			}
		}
	}
	if !strings.Contains(out.String(), "GOPROXY=file://"+filepath.ToSlash(dir)) || !strings.Contains(out.String(), "go get github.com/kubeatlas/kubeatlas@v0.0.1-cmdtest") {
		t.Errorf("printed:\n%s", out.String())
	}
	out.Reset()
	if err := run([]string{"-dir", t.TempDir(), "-version", "1.0"}, &out, &out); err == nil || !strings.Contains(err.Error(), "semver") {
		t.Errorf("version 1.0: %v", err)
	}
	if err := run([]string{"-version", "v0.1.0"}, &out, &out); err == nil {
		t.Errorf("no -dir: no error")
	}
}
