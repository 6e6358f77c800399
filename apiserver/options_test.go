package apiserver_test

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/runtime/serializer"

	"github.com/kubeatlas/kubeatlas/apiserver"
)

// TestLocalWritesOutsideWorkingDirectory: --local without --cert-dir puts
// its self-signed certificate in a temporary directory, not in
// k8s.io/apiserver's default apiserver.local.config/ of the working
// directory, which `go run ./apiserver/cmd/kubeatlas-apiserver --local`
// from a checkout wrote into the repository.
func TestLocalWritesOutsideWorkingDirectory(t *testing.T) {
	wd := t.TempDir()
	t.Chdir(wd)
	o := apiserver.NewOptions()
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	o.AddFlags(fs)
	if err := fs.Parse([]string{"--local"}); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	o.Recommended.SecureServing.Listener = ln
	scheme := apiserver.NewScheme()
	if _, err := o.Config(scheme, serializer.NewCodecFactory(scheme)); err != nil {
		t.Fatal(err)
	}
	dir := o.Recommended.SecureServing.ServerCert.CertDirectory
	t.Cleanup(func() { os.RemoveAll(dir) })
	entries, err := os.ReadDir(wd)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) > 0 || dir == "" || strings.HasPrefix(dir, wd) || !filepath.IsAbs(dir) {
		t.Errorf("--local wrote %d entries into the working directory (%v); its certificates are in %q", len(entries), entries, dir)
	}
	if _, err := os.Stat(filepath.Join(dir, "kubeatlas-apiserver.crt")); err != nil {
		t.Errorf("no certificate in the temporary directory: %v", err)
	}
}
