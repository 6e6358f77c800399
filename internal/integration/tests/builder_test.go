package tests

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/resource"

	"github.com/kubeatlas/kubeatlas/integrations/cliruntime"
)

// TestBuilderThroughGetter: cli-runtime's resource builder, the heart of
// kubectl get and of kubectl plugins, resolves through the kubeatlas getter
// what it resolves through ConfigFlags alone on a real server: several
// types at once, short names, a category, a CRD's kind, resource.group and
// type/name, listing the same objects.
func TestBuilderThroughGetter(t *testing.T) {
	c := startCluster(t)
	ctx := context.Background()
	dyn := installWidgets(t, c)
	kubeconfig := c.writeKubeconfig(t, t.TempDir())
	flags := func() *genericclioptions.ConfigFlags {
		f := genericclioptions.NewConfigFlags(true)
		cacheDir := t.TempDir()
		f.KubeConfig, f.CacheDir = &kubeconfig, &cacheDir
		return f
	}
	list := func(getter genericclioptions.RESTClientGetter, args ...string) ([]string, error) {
		infos, err := resource.NewBuilder(getter).Unstructured().
			NamespaceParam("kube-system").DefaultNamespace().AllNamespaces(false).
			ResourceTypeOrNameArgs(true, args...).ContinueOnError().Latest().Flatten().Do().Infos()
		var out []string
		for _, info := range infos {
			out = append(out, info.Mapping.Resource.String()+" "+info.Namespace+"/"+info.Name)
		}
		slices.Sort(out)
		return out, err
	}
	// Ours lives through the whole test, as in a long-running plugin or
	// Helm; ConfigFlags is new for each comparison, as a new kubectl
	// process is (one kept would not see the CRD: its discovery is cached
	// in memory and on disk).
	ours := cliruntime.NewGetter(flags())
	eventually(t, "the widget CRD is listed by both", 30*time.Second, func() (bool, string) {
		a, aerr := list(ours, "widgets")
		b, berr := list(flags(), "widgets")
		return aerr == nil && berr == nil, fmt.Sprintf("%v %v %v %v", a, aerr, b, berr)
	})
	widget := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "w1", "namespace": "kube-system"},
		"spec":     map[string]any{"size": int64(3)},
	}}
	if _, err := dyn.Resource(schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}).Namespace("kube-system").Create(ctx, widget, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"deploy,svc"}, {"po,cm,sa"}, {"all"}, {"widgets"}, {"Widget"}, {"wdg"}, {"widgets.example.com"},
		{"configmaps", "extension-apiserver-authentication"}, {"serviceaccounts/default"}, {"deployments.apps,secrets"}, {"nosuchthings"},
	} {
		got, gerr := list(ours, args...)
		want, werr := list(flags(), args...)
		if !slices.Equal(got, want) || (gerr == nil) != (werr == nil) {
			t.Errorf("%v: %v (%v); ConfigFlags: %v (%v)", args, got, gerr, want, werr)
		}
		if werr == nil && (args[0] == "po,cm,sa" || args[0] == "wdg") && len(want) == 0 {
			t.Errorf("%v listed nothing: the comparison proves little", args)
		}
	}
}
