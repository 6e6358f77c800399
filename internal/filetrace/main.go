// Command filetrace counts the source files one discovery refresh runs
// through (issue 34: "one refresh visits at most 6 files, internal/httpx
// included, and returns to a file it left at most 3 times"), without
// touching the source tree: it writes copies of the non-test files of
// discovery, discovery/surface and internal/httpx in which every function
// (and function literal) begins with
//
//	defer rec.Enter("discovery/fetch.go", "fetchPart", false)();
//
// inserted after its opening brace, on the same line, so that line numbers
// stay; then it runs internal/withfake's TestFileTrace (build tag
// filetrace) with those copies laid over the originals (go test -overlay),
// which prints each case's walk. See docs/performance.md.
//
// Run it from the repository root:
//
//	go run ./internal/filetrace            # this tree
//	go run ./internal/filetrace -tree DIR  # another checkout (an older commit):
//	                                       # the recorder and the test are laid over it too
//	go run ./internal/filetrace -all       # every counting rule, not only the calibrated one
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// The packages instrumented, relative to the module root.
var pkgs = []string{"discovery", "discovery/surface", "internal/httpx"}

const recPath = "github.com/kubeatlas/kubeatlas/internal/filetrace/rec"

// What is laid over a tree that lacks them (an older checkout).
var own = []string{"internal/filetrace/rec/rec.go", "internal/withfake/filetrace_test.go"}

func main() {
	tree := flag.String("tree", ".", "root of the checkout to measure")
	all := flag.Bool("all", false, "print the walk by every counting rule")
	keep := flag.Bool("keep", false, "keep the instrumented copies (their directory is printed)")
	flag.Parse()
	log.SetFlags(0)
	root, err := filepath.Abs(*tree)
	if err != nil {
		log.Fatal(err)
	}
	tmp, err := os.MkdirTemp("", "filetrace")
	if err != nil {
		log.Fatal(err)
	}
	if *keep {
		log.Printf("instrumented copies in %s", tmp)
	} else {
		defer os.RemoveAll(tmp)
	}
	replace := map[string]string{}
	for _, p := range pkgs {
		if err := instrumentDir(root, p, tmp, replace); err != nil {
			log.Fatal(err)
		}
	}
	for _, f := range own {
		dst := filepath.Join(root, f)
		if _, err := os.Stat(dst); err == nil {
			continue
		}
		src, err := filepath.Abs(f)
		if err != nil {
			log.Fatal(err)
		}
		replace[dst] = src
	}
	overlay := filepath.Join(tmp, "overlay.json")
	b, err := json.Marshal(map[string]any{"Replace": replace})
	if err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(overlay, b, 0o644); err != nil {
		log.Fatal(err)
	}
	// -vet=off: vet cannot run on a package directory the overlay adds
	// (the recorder, in an older checkout).
	cmd := exec.Command("go", "test", "-tags", "filetrace", "-vet=off", "-overlay", overlay,
		"-count=1", "-run", "^TestFileTrace$", "-v", "./internal/withfake/")
	cmd.Dir = root
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	cmd.Env = os.Environ()
	if *all {
		cmd.Env = append(cmd.Env, "FILETRACE_ALL=1")
	}
	if err := cmd.Run(); err != nil {
		if !*keep {
			os.RemoveAll(tmp)
		}
		log.Fatal(err)
	}
}

// instrumentDir writes instrumented copies of package pkg's non-test Go
// files (those go list builds) to tmp and maps each original to its copy.
func instrumentDir(root, pkg, tmp string, replace map[string]string) error {
	out, err := exec.Command("go", "list", "-C", root, "-f", `{{.Dir}}{{range .GoFiles}} {{.}}{{end}}`, "./"+pkg).Output()
	if err != nil {
		return fmt.Errorf("go list %s: %w", pkg, err)
	}
	fields := strings.Fields(string(out))
	dir := fields[0]
	for _, name := range fields[1:] {
		path := filepath.Join(dir, name)
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		dst, err := instrument(src, pkg+"/"+name)
		if err != nil {
			return err
		}
		copyPath := filepath.Join(tmp, strings.ReplaceAll(pkg, "/", "_")+"_"+name)
		if err := os.WriteFile(copyPath, dst, 0o644); err != nil {
			return err
		}
		replace[path] = copyPath
	}
	return nil
}

// instrument inserts the recorder's call at the start of every function
// body of src (file names it), and the recorder's import after the package
// clause, each on the line where it goes: nothing else moves.
func instrument(src []byte, file string) ([]byte, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, file, src, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	type insert struct {
		at   int
		text string
	}
	var ins []insert
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		name := "init" // a literal in a package-level var
		if ok {
			name = fd.Name.Name
			if fd.Recv != nil && len(fd.Recv.List) > 0 {
				name = recvType(fd.Recv.List[0].Type) + "." + name
			}
			if fd.Body != nil {
				ins = append(ins, insert{fset.Position(fd.Body.Lbrace).Offset + 1, call(file, name, false)})
			}
		}
		n := 0
		ast.Inspect(d, func(x ast.Node) bool {
			if lit, ok := x.(*ast.FuncLit); ok {
				n++
				ins = append(ins, insert{fset.Position(lit.Body.Lbrace).Offset + 1, call(file, name+".func"+strconv.Itoa(n), true)})
			}
			return true
		})
	}
	if len(ins) == 0 {
		return src, nil
	}
	ins = append(ins, insert{fset.Position(f.Name.End()).Offset, "; import __ft " + strconv.Quote(recPath)})
	slices.SortFunc(ins, func(a, b insert) int { return b.at - a.at })
	out := bytes.Clone(src)
	for _, in := range ins {
		out = slices.Insert(out, in.at, []byte(in.text)...)
	}
	return out, nil
}

func call(file, fn string, lit bool) string {
	return fmt.Sprintf("defer __ft.Enter(%q, %q, %v)();", file, fn, lit)
}

// recvType is a method's receiver type's name: T of T, *T, T[P] or *T[P].
func recvType(x ast.Expr) string {
	for {
		switch t := x.(type) {
		case *ast.StarExpr:
			x = t.X
		case *ast.IndexExpr:
			x = t.X
		case *ast.IndexListExpr:
			x = t.X
		case *ast.Ident:
			return t.Name
		default:
			return "?"
		}
	}
}
