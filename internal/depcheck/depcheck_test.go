// Package depcheck guards the packages' shape (docs/packages.md describes
// it): which of kubeatlas's packages may import which (allowed, below), and that the heavy server code behind the
// fake API server stays out of what users link.
package depcheck

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/kubeatlas/kubeatlas/"

// allowed lists, for each library package, the kubeatlas packages it may
// depend on (internal ones included by prefix).
var allowed = map[string][]string{
	"diskcache":          {},
	"discovery/surface":  {"internal/"},
	"discovery":          {"discovery/surface", "diskcache", "internal/"},
	"discovery/metaview": {"discovery", "discovery/surface", "diskcache", "internal/"},
	"discovery/watch":    {"discovery", "discovery/surface", "diskcache", "internal/"},
	"discovery/clientgo": {"discovery", "discovery/surface", "discovery/metaview", "diskcache", "internal/"},
	"consistency":        {"discovery", "discovery/surface", "diskcache", "internal/"},
	"restmapper":         {"discovery", "discovery/surface", "discovery/metaview", "diskcache", "internal/"},
	"openapi3":           {"diskcache", "internal/"},
	"openapi3/clientgo":  {"openapi3", "diskcache", "internal/"},
	"fleet":              {"discovery", "discovery/surface", "discovery/metaview", "restmapper", "openapi3", "diskcache", "internal/"},
	"shared":             {"discovery", "discovery/surface", "discovery/metaview", "discovery/watch", "restmapper", "openapi3", "diskcache", "internal/"},
}

// banned everywhere in the library: the real server code and the test double.
var banned = []string{"k8s.io/apiserver/", module + "discovery/discoverytest"}

// heavy is what a program that imports discovery, consistency, diskcache,
// restmapper, openapi3 or fleet does not link: client-go's discovery and
// informer factory, and through them every typed clientset and built-in
// API type (their package initialisation alone costs a process about 10
// MB). The client-go adapters that need them live in discovery/clientgo
// and openapi3/clientgo.
var heavy = []string{"k8s.io/client-go/discovery", "k8s.io/client-go/informers", "k8s.io/client-go/kubernetes", "k8s.io/api/core/"}

// deps lists what the kubeatlas package pkg links, itself included.
func deps(t *testing.T, pkg string) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", module+pkg).CombinedOutput()
	if err != nil {
		t.Fatalf("go list %s: %v\n%s", pkg, err, out)
	}
	return strings.Fields(string(out))
}

// under reports whether dep is prefix or below it ("a/b" matches "a/b" and
// "a/b/c"; "a/" matches everything below a).
func under(dep, prefix string) bool {
	if strings.HasSuffix(prefix, "/") {
		return strings.HasPrefix(dep, prefix)
	}
	return dep == prefix || strings.HasPrefix(dep, prefix+"/")
}

func TestDiscoveryIsLean(t *testing.T) {
	for _, pkg := range []string{"discovery", "discovery/surface", "discovery/metaview", "discovery/watch", "consistency", "diskcache", "restmapper", "openapi3", "fleet", "shared"} {
		for _, dep := range deps(t, pkg) {
			for _, h := range heavy {
				if under(dep, h) {
					t.Errorf("%s links %s", pkg, dep)
				}
			}
		}
	}
}

func TestDependencies(t *testing.T) {
	for pkg, ok := range allowed {
		for _, dep := range deps(t, pkg) {
			for _, b := range banned {
				if strings.HasPrefix(dep, b) {
					t.Errorf("%s depends on %s", pkg, dep)
				}
			}
			own, isOurs := strings.CutPrefix(dep, module)
			if !isOurs || own == pkg {
				continue
			}
			permitted := false
			for _, a := range ok {
				permitted = permitted || own == a || (strings.HasSuffix(a, "/") && strings.HasPrefix(own, a))
			}
			if !permitted {
				t.Errorf("%s imports %s, which allowed (internal/depcheck) does not permit: a new edge changes the packages' shape (docs/packages.md), to argue in its commit", pkg, own)
			}
		}
	}
}

// maxDiscoveryDeps bounds the non-standard packages (a dot in the first
// path element) a program that imports only discovery links, discovery
// itself included: 110, down from 131 when Watch was a method of Client
// and linked client-go's informers, dynamic and metadata clients, which now
// only discovery/watch's users link; 111 since discovery.Surfaces holds its
// surfaces in internal/weakmap (ours, 50 lines, importing only the
// standard library), as openapi3.Documents and restmapper.Indexes do,
// instead of a copy of it. Of the 111, 6 are kubeatlas's own and 105 come
// from other modules, all but one (k8s.io/api/apidiscovery/v2) through
// k8s.io/client-go/rest, which New(*rest.Config) needs.
const maxDiscoveryDeps = 111

func TestDiscoveryLinksLittle(t *testing.T) {
	var nonStandard []string
	for _, dep := range deps(t, "discovery") {
		if first, _, _ := strings.Cut(dep, "/"); strings.Contains(first, ".") {
			nonStandard = append(nonStandard, dep)
		}
	}
	if len(nonStandard) > maxDiscoveryDeps {
		t.Errorf("a program that imports discovery links %d non-standard packages, more than %d:\n%s",
			len(nonStandard), maxDiscoveryDeps, strings.Join(nonStandard, "\n"))
	}
	for _, dep := range nonStandard {
		for _, watchOnly := range []string{"k8s.io/client-go/tools/cache", "k8s.io/client-go/dynamic", "k8s.io/client-go/metadata"} {
			if under(dep, watchOnly) {
				t.Errorf("discovery links %s, which only discovery/watch needs", dep)
			}
		}
	}
}

// TestDocsSayTheBound: docs/discovery.md tells users how many packages a
// program that imports discovery links; it said 110 after the bound became
// 111.
func TestDocsSayTheBound(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "docs", "discovery.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`such a program links (\d+)\s+non-standard packages`).FindSubmatch(data)
	if m == nil || string(m[1]) != strconv.Itoa(maxDiscoveryDeps) {
		t.Errorf("docs/discovery.md says %q, want %d non-standard packages (maxDiscoveryDeps)", m, maxDiscoveryDeps)
	}
}

// TestInternalStaysInside: a package under internal/ imports no kubeatlas
// package outside internal/, tests included, so that every library package
// may use any internal one without an import cycle or a dependency the
// design does not draw.
func TestInternalStaysInside(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}{{range .TestImports}} {{.}}{{end}}{{range .XTestImports}} {{.}}{{end}}`, module+"internal/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list internal/...: %v\n%s", err, out)
	}
	pkgs := 0
	for line := range strings.Lines(string(out)) {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		// internal/withfake holds the library packages' own tests (a
		// module of its own, for the fake server), which import them.
		if strings.HasPrefix(fields[0], module+"internal/withfake/") {
			continue
		}
		pkgs++
		for _, imp := range fields[1:] {
			if own, isOurs := strings.CutPrefix(imp, module); isOurs && !strings.HasPrefix(own, "internal/") {
				t.Errorf("%s imports %s, outside internal/", fields[0], imp)
			}
		}
	}
	if pkgs < 5 {
		t.Fatalf("go list found %d internal packages: is this the module's go list?\n%s", pkgs, out)
	}
}

// TestCommandsAreLight: the example commands run the embedded fake cluster
// as a child process (examples/fake-apiserver) instead of linking the real
// server code behind it, which would double their size and start-up; and
// api-resources, the README's first command, whose embedded cluster is the
// light internal/docserver in its own process, links at most
// firstCommandPackages packages, as a cold first run compiles them all.
func TestCommandsAreLight(t *testing.T) {
	// The examples are a module of their own (they need the fake server's
	// module): only the root go.work puts them beside the core.
	if out, err := exec.Command("go", "env", "GOWORK").Output(); err != nil || strings.TrimSpace(string(out)) == "" || strings.TrimSpace(string(out)) == "off" {
		t.Skip("no go.work: the examples module is not in this build (run from the repository's root workspace)")
	}
	for _, cmd := range []string{"examples/api-resources", "examples/explain", "examples/watch-apis", "examples/fleet", "examples/consistency"} {
		ds := deps(t, cmd)
		for _, dep := range ds {
			for _, b := range banned {
				if strings.HasPrefix(dep, b) {
					t.Errorf("%s links %s", cmd, dep)
				}
			}
		}
		if cmd == "examples/api-resources" && len(ds) > firstCommandPackages {
			t.Errorf("%s links %d packages, more than %d: a cold `go run` of the README's first command compiles each of them", cmd, len(ds), firstCommandPackages)
		}
	}
}

// firstCommandPackages bounds what examples/api-resources links: 329
// packages without an embedded cluster, 412 with the light one (its
// OpenAPI handler: kube-openapi's handler3, gnostic, protobuf), and some
// room for the dependencies' growth. The real-handler fake it no longer
// builds would be 900 with it.
const firstCommandPackages = 450

// TestFakeLinksNoServedAPI: the fake API server, and the command that
// runs it, do not link the served discovery API (the apiserver module) or
// k8s.io/apiserver's generic server behind it: with them, every test that
// imported the fake linked 440 more packages (examples/fake-apiserver 118
// MB instead of 67). apiserver/servedtest serves that API on the fake.
func TestFakeLinksNoServedAPI(t *testing.T) {
	if out, err := exec.Command("go", "env", "GOWORK").Output(); err != nil || strings.TrimSpace(string(out)) == "" || strings.TrimSpace(string(out)) == "off" {
		t.Skip("no go.work: the fake's module is not in this build (run from the repository's root workspace)")
	}
	for _, pkg := range []string{"discovery/discoverytest", "examples/fake-apiserver"} {
		for _, dep := range deps(t, pkg) {
			if under(dep, module+"apiserver") || dep == "k8s.io/apiserver/pkg/server" || under(dep, "k8s.io/kube-aggregator") {
				t.Errorf("%s links %s", pkg, dep)
			}
		}
	}
}

// TestFrameworksStayOut: controller-runtime, cli-runtime and Helm are
// required by the integrations module only, and go-redis by the redisstore
// module only, never by the core module that users of discovery and
// restmapper require.
func TestFrameworksStayOut(t *testing.T) {
	for _, mod := range coreModuleGraph(t) {
		for _, fw := range []string{"sigs.k8s.io/controller-runtime", "k8s.io/cli-runtime", "helm.sh/helm", "github.com/redis/"} {
			if under(mod, fw) {
				t.Errorf("the core module's graph has %s", mod)
			}
		}
	}
}

// coreModuleGraph is go list -m all of the core module alone, as a module
// requiring it sees it: without the root go.work, which adds the fake
// server's, the examples' and internal/withfake's requirements.
func coreModuleGraph(t *testing.T) []string {
	t.Helper()
	cmd := exec.Command("go", "list", "-m", "all")
	cmd.Env = append(os.Environ(), "GOWORK=off")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list -m all: %v\n%s", err, out)
	}
	mods := strings.Fields(string(out))
	if !slices.Contains(mods, "k8s.io/client-go") {
		t.Fatalf("the core module's graph lacks client-go: is this its go list? %v", mods[:min(5, len(mods))])
	}
	return mods
}

// TestServerStaysOut: the core's go.mod does not require k8s.io/apiserver
// or what it brings (grpc, otel, prometheus, cel-go), so a program that
// imports discovery does not get them in its module graph, where minimal
// version selection would raise its own versions of them. The fake server
// that needs k8s.io/apiserver (discovery/discoverytest), and every test
// that runs it (internal/withfake), are modules of their own; a test of
// the core that imported them would not build without the go.work.
func TestServerStaysOut(t *testing.T) {
	for _, mod := range coreModuleGraph(t) {
		for _, heavy := range []string{"k8s.io/apiserver", "google.golang.org/grpc", "go.opentelemetry.io/otel", "github.com/prometheus/client_golang", "github.com/google/cel-go"} {
			if under(mod, heavy) {
				t.Errorf("the core module's graph has %s", mod)
			}
		}
	}
}

// TestIntegrationsNeedNoHelm: Helm takes cliruntime's getter as any
// RESTClientGetter, so the integrations module does not import Helm, which
// would add about 130 modules (registries, credential helpers, SQL
// drivers) to every controller-runtime user's graph. Helm is tested in the
// integration tier's own module.
func TestIntegrationsNeedNoHelm(t *testing.T) {
	cmd := exec.Command("go", "list", "-m", "all")
	cmd.Dir = "../../integrations"
	// Its own go.work (the core of this checkout), even when this test runs
	// with GOWORK=off: the core it requires is not published.
	cmd.Env = append(os.Environ(), "GOWORK=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list -m all in integrations: %v\n%s", err, out)
	}
	mods := strings.Fields(string(out))
	if !slices.ContainsFunc(mods, func(m string) bool { return under(m, "sigs.k8s.io/controller-runtime") }) {
		t.Fatalf("the integrations module's graph lacks controller-runtime: is this its go list? %v", mods[:min(5, len(mods))])
	}
	for _, mod := range mods {
		if under(mod, "helm.sh/helm") {
			t.Errorf("the integrations module's graph has %s", mod)
		}
	}
}

// TestOpenAPIWithoutApplyTypes: openapi3 does not link what openapi3/typed
// builds types with, which is why typed is a package of its own. (fleet
// links structured-merge-diff's value package through apimachinery, and
// openapi3/clientgo client-go's openapi package, which has client-go's
// type converter.)
func TestOpenAPIWithoutApplyTypes(t *testing.T) {
	for _, pkg := range []string{"openapi3"} {
		for _, dep := range deps(t, pkg) {
			// (structured-merge-diff's value package comes with apimachinery.)
			for _, h := range []string{"sigs.k8s.io/structured-merge-diff/v6/typed", "sigs.k8s.io/structured-merge-diff/v6/schema", "sigs.k8s.io/structured-merge-diff/v6/merge",
				"k8s.io/kube-openapi/pkg/schemaconv", "k8s.io/apimachinery/pkg/util/managedfields"} {
				if under(dep, h) {
					t.Errorf("%s links %s", pkg, dep)
				}
			}
		}
	}
}
