// Command publish writes every publishable module of this checkout to a
// file-based module proxy at one version, as the tags of a release would
// publish them (release.Publish), so that they can be tried from outside
// the repository exactly as users will get them: no go.work, no replace.
//
//	cd internal/release && go run ./cmd/publish -dir /tmp/kubeatlas-proxy -version v0.1.0
//
// It prints the environment that makes the go command use that proxy
// first (and the public one for everything else), without checksum-database
// lookups for these unpublished modules. See docs/versioning.md.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/mod/modfile"

	"github.com/kubeatlas/kubeatlas/internal/release"
)

const coreModule = "github.com/kubeatlas/kubeatlas"

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "publish:", err)
		}
		os.Exit(2)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("publish", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", "", "the file-based module proxy to write (created if missing; GOPROXY=file://DIR)")
	version := fs.String("version", "v0.1.0", "the version every module is published at, and every sibling requirement rewritten to")
	root := fs.String("root", "", "the checkout (default: the directory above the working directory whose go.mod is "+coreModule+")")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dir == "" || fs.NArg() != 0 {
		fs.Usage()
		return errors.New("-dir is required, and no arguments are taken")
	}
	if *root == "" {
		r, err := findRoot()
		if err != nil {
			return err
		}
		*root = r
	}
	mods, err := release.Modules(*root)
	if err != nil {
		return err
	}
	abs, err := filepath.Abs(*dir)
	if err != nil {
		return err
	}
	if err := release.Publish(abs, mods, *version); err != nil {
		return err
	}
	var paths []string
	for _, m := range mods {
		paths = append(paths, m.Path)
	}
	fmt.Fprintf(stdout, "published %s at %s to %s\n\nTry them from a module outside the repository with:\n\n", strings.Join(paths, ", "), *version, abs)
	fmt.Fprintf(stdout, "export GOPROXY=file://%s,https://proxy.golang.org GONOSUMDB=%s GOWORK=off\n", filepath.ToSlash(abs), coreModule)
	fmt.Fprintf(stdout, "go get %s@%s\n\n(The module cache keeps what it downloaded: publish a change at a new version, or remove %s from `go env GOMODCACHE`.)\n", coreModule, *version, coreModule+"@"+*version)
	return nil
}

// findRoot walks up from the working directory to the core's go.mod.
func findRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if data, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && modfile.ModulePath(data) == coreModule {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no %s go.mod above the working directory: give -root", coreModule)
		}
		dir = parent
	}
}
