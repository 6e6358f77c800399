package apiserver_test

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"

	"github.com/kubeatlas/kubeatlas/apiserver/apis/discovery/v1alpha1"
)

// Every manifest in deploy/ decodes strictly (an unknown or misspelt field
// fails) into a known type, and they say what the server needs.
func TestDeployManifests(t *testing.T) {
	s := runtime.NewScheme()
	if err := scheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := apiregistrationv1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	decoder := serializer.NewCodecFactory(s, serializer.EnableStrict).UniversalDeserializer()
	files, err := filepath.Glob("../deploy/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests: %v", err)
	}
	kinds := map[string]int{}
	var apiService *apiregistrationv1.APIService
	var roles []*rbacv1.ClusterRole
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		r := utilyaml.NewYAMLReader(bufioReader(data))
		for {
			doc, err := r.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if len(bytes.TrimSpace(doc)) == 0 {
				continue
			}
			obj, gvk, err := decoder.Decode(doc, nil, nil)
			if err != nil {
				t.Fatalf("%s: %v\n%s", f, err, doc)
			}
			kinds[gvk.Kind]++
			switch o := obj.(type) {
			case *apiregistrationv1.APIService:
				apiService = o
			case *rbacv1.ClusterRole:
				roles = append(roles, o)
			}
		}
	}
	for _, k := range []string{"Deployment", "Service", "APIService", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "RoleBinding"} {
		if kinds[k] == 0 {
			t.Errorf("no %s in deploy/", k)
		}
	}
	if apiService == nil || apiService.Spec.Group != v1alpha1.GroupName || apiService.Spec.Version != v1alpha1.SchemeGroupVersion.Version ||
		apiService.Name != v1alpha1.SchemeGroupVersion.Version+"."+v1alpha1.GroupName {
		t.Errorf("APIService %+v does not name %s", apiService, v1alpha1.SchemeGroupVersion)
	}
	// The readers' role covers every served resource.
	served := []string{"apigroups", "apiservers", "clusterconsistencies"}
	covered := false
	for _, r := range roles {
		for _, rule := range r.Rules {
			if slices.Contains(rule.APIGroups, v1alpha1.GroupName) {
				for _, res := range served {
					if !slices.Contains(rule.Resources, res) {
						t.Errorf("ClusterRole %s does not cover %s", r.Name, res)
					}
				}
				covered = true
			}
		}
	}
	if !covered {
		t.Error("no ClusterRole lets users read the served API")
	}
}

func bufioReader(b []byte) *bufio.Reader { return bufio.NewReader(bytes.NewReader(b)) }
