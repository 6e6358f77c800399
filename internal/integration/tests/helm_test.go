package tests

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/loader"
	"helm.sh/helm/v4/pkg/kube"
	release "helm.sh/helm/v4/pkg/release/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/kubeatlas/kubeatlas/integrations/cliruntime"
)

// The chart of TestHelmThroughGetter: a CRD in crds/ (Helm installs it
// before rendering), a custom resource of it, and a ConfigMap whose data
// branches on .Capabilities.APIVersions.Has, which Helm fills from
// discovery (ServerGroupsAndResources) after installing the CRDs.
var gadgetChart = map[string]string{
	"Chart.yaml":  "apiVersion: v2\nname: gadgets\nversion: 0.1.0\n",
	"values.yaml": "size: 1\n",
	"crds/gadgets.yaml": `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gadgets.helm.kubeatlas.test
spec:
  group: helm.kubeatlas.test
  scope: Namespaced
  names: {plural: gadgets, singular: gadget, kind: Gadget, shortNames: [gdg]}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer}
`,
	"templates/gadget.yaml": `apiVersion: helm.kubeatlas.test/v1
kind: Gadget
metadata:
  name: {{ .Release.Name }}-gadget
spec:
  size: {{ .Values.size }}
`,
	"templates/capabilities.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-capabilities
data:
  gadget: {{ .Capabilities.APIVersions.Has "helm.kubeatlas.test/v1/Gadget" | quote }}
  gadgetGroupVersion: {{ .Capabilities.APIVersions.Has "helm.kubeatlas.test/v1" | quote }}
  deployment: {{ .Capabilities.APIVersions.Has "apps/v1/Deployment" | quote }}
  missing: {{ .Capabilities.APIVersions.Has "nosuch.kubeatlas.test/v1" | quote }}
  kubeVersion: {{ .Capabilities.KubeVersion.Version | quote }}
`,
}

// request is one HTTP request a helm run made, as the server answered it.
type request struct {
	method, path, agent string
	status              int
}

// kind sorts a request: discovery (/api, /apis and their group and
// group-version documents), version, openapi, or other (objects, release
// storage).
func (r request) kind() string {
	parts := strings.Split(strings.Trim(r.path, "/"), "/")
	switch {
	case r.path == "/version":
		return "version"
	case parts[0] == "openapi":
		return "openapi"
	case r.method == http.MethodGet && parts[0] == "api" && len(parts) <= 2,
		r.method == http.MethodGet && parts[0] == "apis" && len(parts) <= 3:
		return "discovery"
	}
	return "other"
}

// recorder keeps the requests of one helm run, through the WrapConfigFn of
// its ConfigFlags: every client Helm builds from the getter's rest.Config,
// its status waiter's own REST mapper included, goes through it.
type recorder struct {
	mu   sync.Mutex
	reqs []request
}

func (rec *recorder) wrap(next http.RoundTripper) http.RoundTripper {
	return roundTripper(func(r *http.Request) (*http.Response, error) {
		resp, err := next.RoundTrip(r)
		if err == nil {
			rec.mu.Lock()
			rec.reqs = append(rec.reqs, request{r.Method, r.URL.Path, r.UserAgent(), resp.StatusCode})
			rec.mu.Unlock()
		}
		return resp, err
	})
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// count is the number of requests of a kind, and how many were 304s.
func (rec *recorder) count(kind string) (n, notModified int) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, r := range rec.reqs {
		if r.kind() == kind {
			n++
			if r.status == http.StatusNotModified {
				notModified++
			}
		}
	}
	return n, notModified
}

func (rec *recorder) list(kind string) []string {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	var out []string
	for _, r := range rec.reqs {
		if r.kind() == kind {
			out = append(out, fmt.Sprintf("%s %d (%s)", r.path, r.status, r.agent))
		}
	}
	return out
}

// TestHelmThroughGetter: Helm's install, upgrade and uninstall of a chart
// that ships a CRD and a custom resource of it, and branches on
// .Capabilities, against the real server, once through ConfigFlags alone
// (Helm's default) and once through the kubeatlas getter. Each helm
// command runs as in its own process: a new getter and a new action
// configuration over the same cache directory. Both give the same
// releases, objects and capabilities; the discovery requests of each are
// counted, and an upgrade of an unchanged release on a warm cache costs
// kubeatlas at most its two 304s.
func TestHelmThroughGetter(t *testing.T) {
	c := startCluster(t)
	ctx := context.Background()
	kubeconfig := c.writeKubeconfig(t, t.TempDir())
	chartDir := t.TempDir()
	for name, body := range gadgetChart {
		path := filepath.Join(chartDir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	chrt, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(c.config)
	if err != nil {
		t.Fatal(err)
	}
	gadgets := schema.GroupVersionResource{Group: "helm.kubeatlas.test", Version: "v1", Resource: "gadgets"}
	// A dead aggregated API server (Helm's "orphaned API service", a dead
	// metrics server): its group-version is Stale in discovery.
	apiservice := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
		"metadata": map[string]any{"name": "v1beta1.metrics.kubeatlas.test"},
		"spec": map[string]any{
			"group": "metrics.kubeatlas.test", "version": "v1beta1",
			"service":              map[string]any{"namespace": "default", "name": "nosuch"},
			"groupPriorityMinimum": int64(100), "versionPriority": int64(100), "insecureSkipTLSVerify": true,
		},
	}}
	apiservices := schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}
	if _, err := dyn.Resource(apiservices).Create(ctx, apiservice, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	const ns, name = "helm", "atlas"

	type side struct {
		name   string
		getter func(*genericclioptions.ConfigFlags) genericclioptions.RESTClientGetter
	}
	sides := []side{
		{"ConfigFlags", func(f *genericclioptions.ConfigFlags) genericclioptions.RESTClientGetter { return f }},
		{"kubeatlas", func(f *genericclioptions.ConfigFlags) genericclioptions.RESTClientGetter {
			return cliruntime.NewGetter(f)
		}},
	}
	steps := []string{"install", "upgrade size=2", "upgrade unchanged", "uninstall"}
	manifests := map[string][]string{}    // side → the release manifest of each step
	counts := map[string][]*recorder{}    // side → the requests of each step
	capabilities := map[string][]string{} // side → .Capabilities.APIVersions after the install
	for _, s := range sides {
		cacheDir := t.TempDir()
		// run is one helm command in a process of its own.
		run := func(step string, do func(*action.Configuration) (*release.Release, error)) {
			t.Helper()
			rec := &recorder{}
			f := genericclioptions.NewConfigFlags(true)
			f.KubeConfig, f.CacheDir = &kubeconfig, &cacheDir
			namespace := ns
			f.Namespace = &namespace
			f.WrapConfigFn = func(cfg *rest.Config) *rest.Config { cfg.Wrap(rec.wrap); return cfg }
			cfg := action.NewConfiguration(action.ConfigurationSetLogger(slog.NewTextHandler(testWriter{t, s.name + " " + step}, &slog.HandlerOptions{Level: slog.LevelWarn})))
			if err := cfg.Init(s.getter(f), ns, "secret"); err != nil {
				t.Fatalf("%s: %s: Init: %v", s.name, step, err)
			}
			rel, err := do(cfg)
			if err != nil {
				t.Fatalf("%s: %s: %v", s.name, step, err)
			}
			manifest := ""
			if rel != nil {
				manifest = rel.Manifest
			}
			manifests[s.name] = append(manifests[s.name], manifest)
			counts[s.name] = append(counts[s.name], rec)
		}
		upgrade := func(size int) func(*action.Configuration) (*release.Release, error) {
			return func(cfg *action.Configuration) (*release.Release, error) {
				u := action.NewUpgrade(cfg)
				u.Namespace, u.Timeout, u.WaitStrategy, u.ServerSideApply = ns, time.Minute, kube.HookOnlyStrategy, "auto"
				r, err := u.RunWithContext(ctx, name, chrt, map[string]any{"size": size})
				if err != nil {
					return nil, err
				}
				return r.(*release.Release), nil
			}
		}
		run(steps[0], func(cfg *action.Configuration) (*release.Release, error) {
			i := action.NewInstall(cfg)
			i.Namespace, i.ReleaseName, i.CreateNamespace = ns, name, true
			i.Timeout, i.WaitStrategy, i.ServerSideApply = time.Minute, kube.HookOnlyStrategy, true
			r, err := i.RunWithContext(ctx, chrt, nil)
			if err != nil {
				return nil, err
			}
			return r.(*release.Release), nil
		})
		obj, err := dyn.Resource(gadgets).Namespace(ns).Get(ctx, name+"-gadget", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("%s: the custom resource the chart installs: %v", s.name, err)
		}
		if size, _, _ := unstructured.NestedInt64(obj.Object, "spec", "size"); size != 1 {
			t.Errorf("%s: gadget size %d after the install, want 1", s.name, size)
		}
		// .Capabilities.APIVersions as Helm computes it, through this getter.
		f := genericclioptions.NewConfigFlags(true)
		f.KubeConfig, f.CacheDir = &kubeconfig, &cacheDir
		dc, err := s.getter(f).ToDiscoveryClient()
		if err != nil {
			t.Fatal(err)
		}
		dc.Invalidate()
		vs, err := action.GetVersionSet(dc)
		if err != nil {
			t.Fatalf("%s: GetVersionSet: %v", s.name, err)
		}
		set := []string(vs)
		slices.Sort(set)
		capabilities[s.name] = set

		run(steps[1], upgrade(2))
		obj, err = dyn.Resource(gadgets).Namespace(ns).Get(ctx, name+"-gadget", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("%s: the custom resource after the upgrade: %v", s.name, err)
		}
		if size, _, _ := unstructured.NestedInt64(obj.Object, "spec", "size"); size != 2 {
			t.Errorf("%s: gadget size %d after the upgrade, want 2", s.name, size)
		}
		run(steps[2], upgrade(2))
		run(steps[3], func(cfg *action.Configuration) (*release.Release, error) {
			u := action.NewUninstall(cfg)
			u.Timeout, u.WaitStrategy = time.Minute, kube.HookOnlyStrategy
			_, err := u.Run(name)
			return nil, err
		})
		if _, err := dyn.Resource(gadgets).Namespace(ns).Get(ctx, name+"-gadget", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("%s: the custom resource after the uninstall: %v, want not found", s.name, err)
		}
		// Helm leaves CRDs installed; the next side starts without it.
		if err := dyn.Resource(crdGVR).Delete(ctx, "gadgets.helm.kubeatlas.test", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the gadget CRD is gone", time.Minute, func() (bool, string) {
			_, err := dyn.Resource(crdGVR).Get(ctx, "gadgets.helm.kubeatlas.test", metav1.GetOptions{})
			return apierrors.IsNotFound(err), fmt.Sprint(err)
		})
	}

	// The same answers: releases, and the capabilities templates see.
	want, got := manifests["ConfigFlags"], manifests["kubeatlas"]
	for i, step := range steps {
		if got[i] != want[i] {
			t.Errorf("%s: release manifest through kubeatlas:\n%s\nthrough ConfigFlags:\n%s", step, got[i], want[i])
		}
	}
	for _, line := range []string{`gadget: "true"`, `gadgetGroupVersion: "true"`, `deployment: "true"`, `missing: "false"`, `kubeVersion: "v1.36.3"`} {
		if !strings.Contains(got[0], line) {
			t.Errorf("the installed release's capabilities ConfigMap lacks %q:\n%s", line, got[0])
		}
	}
	if !slices.Equal(capabilities["kubeatlas"], capabilities["ConfigFlags"]) {
		t.Errorf(".Capabilities.APIVersions through kubeatlas (%d):\n%v\nthrough ConfigFlags (%d):\n%v",
			len(capabilities["kubeatlas"]), capabilities["kubeatlas"], len(capabilities["ConfigFlags"]), capabilities["ConfigFlags"])
	}
	if !slices.Contains(capabilities["kubeatlas"], "helm.kubeatlas.test/v1/Gadget") {
		t.Errorf(".Capabilities.APIVersions lacks the chart's CRD kind: %v", capabilities["kubeatlas"])
	}

	// The requests, side by side.
	t.Logf("%-18s %-34s %-34s", "helm command", "ConfigFlags: discovery (304) / openapi (304) / version", "kubeatlas: discovery (304) / openapi (304) / version")
	for i, step := range steps {
		cell := func(rec *recorder) string {
			d, d304 := rec.count("discovery")
			o, o304 := rec.count("openapi")
			v, _ := rec.count("version")
			return fmt.Sprintf("%3d (%3d) / %2d (%2d) / %d", d, d304, o, o304, v)
		}
		t.Logf("%-18s %-34s %-34s", step, cell(counts["ConfigFlags"][i]), cell(counts["kubeatlas"][i]))
		if testing.Verbose() {
			for _, s := range sides {
				for _, kind := range []string{"discovery", "openapi", "version"} {
					t.Logf("    %s %s: %s", s.name, kind, strings.Join(counts[s.name][i].list(kind), ", "))
				}
			}
		}
	}
	unchanged := counts["kubeatlas"][2]
	if n, n304 := unchanged.count("discovery"); n > 2 || n304 != n {
		t.Errorf("helm upgrade of an unchanged release on a warm cache made %d discovery requests through kubeatlas (%d of them 304s), want at most the two 304s:\n%s",
			n, n304, strings.Join(unchanged.list("discovery"), "\n"))
	}
}

// testWriter sends Helm's log lines to the test's log.
type testWriter struct {
	t      *testing.T
	prefix string
}

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Logf("%s: %s", w.prefix, strings.TrimSpace(string(p)))
	return len(p), nil
}
