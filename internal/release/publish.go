package release

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"
	"golang.org/x/mod/zip"
)

// Module is one module of the checkout: its path and its directory.
type Module struct {
	Path string
	Dir  string
}

// Modules lists the publishable modules of the checkout at root: the root
// module and every nested one, in path order. Modules whose path has an
// internal element (the integration tier, the kube-apiserver builders,
// this one) are left out: nothing outside the repository can import their
// packages, so they are never tagged.
func Modules(root string) ([]Module, error) {
	var mods []Module
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			// The go command ignores these too when it matches packages.
			if name := d.Name(); p != root && (name == "testdata" || name == "vendor" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if d.Name() != "go.mod" {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		mp := modfile.ModulePath(data)
		if mp == "" {
			return fmt.Errorf("%s: no module directive", p)
		}
		if !slices.Contains(strings.Split(mp, "/"), "internal") {
			mods = append(mods, Module{Path: mp, Dir: filepath.Dir(p)})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(mods, func(a, b Module) int { return strings.Compare(a.Path, b.Path) })
	return mods, nil
}

// Publish writes mods to the file-based module proxy in dir (usable as
// GOPROXY=file://dir) at version, as the tags <prefix>version of a release
// would publish them: each module's go.mod has its requirements of the
// other modules in mods rewritten to version, and its zip holds the files
// git would commit (tracked, and untracked but not ignored) below the
// module's directory, less nested modules.
//
// Publish refuses what would break users once published: a replace
// directive (ignored in a dependency, and refused by go install
// pkg@version), and requirements of sibling modules that are not one
// release version (all modules are released together, so each requires
// the others at the version of the release).
func Publish(dir string, mods []Module, version string) error {
	if !semver.IsValid(version) || semver.Canonical(version) != version {
		return fmt.Errorf("version %q is not canonical semver", version)
	}
	siblings := make(map[string]bool, len(mods))
	for _, m := range mods {
		siblings[m.Path] = true
	}
	for _, m := range mods {
		gomod, err := rewriteGoMod(m, siblings, version)
		if err != nil {
			return err
		}
		files, err := committable(m.Dir)
		if err != nil {
			return fmt.Errorf("%s: %w", m.Path, err)
		}
		for i, f := range files {
			if f.Path() == "go.mod" {
				files[i] = memFile{name: "go.mod", data: gomod}
			}
		}
		var z bytes.Buffer
		mv := module.Version{Path: m.Path, Version: version}
		if err := zip.Create(&z, mv, files); err != nil {
			return err
		}
		info, err := json.Marshal(struct {
			Version string
			Time    time.Time
		}{version, time.Now().UTC().Truncate(time.Second)})
		if err != nil {
			return err
		}
		escaped, err := module.EscapePath(m.Path)
		if err != nil {
			return err
		}
		vdir := filepath.Join(dir, filepath.FromSlash(escaped), "@v")
		if err := os.MkdirAll(vdir, 0o755); err != nil {
			return err
		}
		for name, data := range map[string][]byte{
			version + ".mod":  gomod,
			version + ".zip":  z.Bytes(),
			version + ".info": info,
			"list":            []byte(version + "\n"),
		} {
			if err := os.WriteFile(filepath.Join(vdir, name), data, 0o644); err != nil {
				return err
			}
		}
	}
	return nil
}

// rewriteGoMod returns m's go.mod with its requirements of siblings set to
// version.
func rewriteGoMod(m Module, siblings map[string]bool, version string) ([]byte, error) {
	name := filepath.Join(m.Dir, "go.mod")
	data, err := os.ReadFile(name)
	if err != nil {
		return nil, err
	}
	f, err := modfile.Parse(name, data, nil)
	if err != nil {
		return nil, err
	}
	if len(f.Replace) > 0 {
		r := f.Replace[0]
		return nil, fmt.Errorf("%s: replace %s => %s: a dependency's replace directives are ignored, and go install %s/...@version refuses them (develop through go.work)", name, r.Old.Path, r.New.Path, m.Path)
	}
	var release string
	for _, r := range f.Require {
		if !siblings[r.Mod.Path] {
			continue
		}
		v := r.Mod.Version
		if module.IsPseudoVersion(v) || semver.Prerelease(v) != "" || semver.Build(v) != "" {
			return nil, fmt.Errorf("%s: requires %s %s, not a release version: require the version of the release this module is tagged with", name, r.Mod.Path, v)
		}
		if release != "" && v != release {
			return nil, fmt.Errorf("%s: requires sibling modules at %s and %s: all are released together, at one version", name, release, v)
		}
		release = v
		if err := f.AddRequire(r.Mod.Path, version); err != nil {
			return nil, err
		}
	}
	f.Cleanup()
	return f.Format()
}

// committable lists the files git would commit below dir (tracked and
// present, or untracked and not ignored), so that build outputs and
// ignored files in a working tree are not published.
func committable(dir string) ([]zip.File, error) {
	cmd := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--deduplicate", ".")
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("git ls-files: %v: %s", err, stderr.Bytes())
	}
	var files []zip.File
	for _, rel := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		if rel == "" {
			continue
		}
		full := filepath.Join(dir, filepath.FromSlash(rel))
		info, err := os.Lstat(full)
		if errors.Is(err, fs.ErrNotExist) {
			continue // deleted in the working tree, not yet committed
		}
		if err != nil {
			return nil, err
		}
		files = append(files, dirFile{name: path.Clean(rel), full: full, info: info})
	}
	return files, nil
}

type dirFile struct {
	name, full string
	info       fs.FileInfo
}

func (f dirFile) Path() string                 { return f.name }
func (f dirFile) Lstat() (fs.FileInfo, error)  { return f.info, nil }
func (f dirFile) Open() (io.ReadCloser, error) { return os.Open(f.full) }

// memFile is a rewritten go.mod.
type memFile struct {
	name string
	data []byte
}

func (f memFile) Path() string                 { return f.name }
func (f memFile) Lstat() (fs.FileInfo, error)  { return memInfo(f), nil }
func (f memFile) Open() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(f.data)), nil }

type memInfo memFile

func (i memInfo) Name() string       { return i.name }
func (i memInfo) Size() int64        { return int64(len(i.data)) }
func (i memInfo) Mode() fs.FileMode  { return 0o644 }
func (i memInfo) ModTime() time.Time { return time.Time{} }
func (i memInfo) IsDir() bool        { return false }
func (i memInfo) Sys() any           { return nil }
