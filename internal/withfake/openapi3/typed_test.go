package openapi3_test

import (
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubeatlas/kubeatlas/discovery/discoverytest"
	"github.com/kubeatlas/kubeatlas/openapi3"
	"github.com/kubeatlas/kubeatlas/openapi3/typed"
)

// TestExtractOnFake: the fake's ObjectMeta declares managedFields, as the
// real server's does, so openapi3/typed's Extractor, which converts the
// whole object (its managedFields included), works on the fake's schemas;
// the README's typed quick start runs on them. Without that field, Extract
// failed with ".metadata.managedFields: field not declared in schema".
func TestExtractOnFake(t *testing.T) {
	_, url := discoverytest.Start(t)
	oc, err := openapi3.NewForHTTPClient(nil, url)
	if err != nil {
		t.Fatal(err)
	}
	conv, err := typed.New(oc)
	if err != nil {
		t.Fatal(err)
	}
	var obj unstructured.Unstructured
	if err := obj.UnmarshalJSON([]byte(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","labels":{"tier":"front"},"managedFields":[
		{"manager":"deployer","operation":"Apply","apiVersion":"apps/v1","time":"2026-12-01T00:00:00Z","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{"f:replicas":{}}}},
		{"manager":"labeller","operation":"Apply","apiVersion":"apps/v1","fieldsType":"FieldsV1","fieldsV1":{"f:metadata":{"f:labels":{"f:tier":{}}}}}]},
		"spec":{"replicas":3}}`)); err != nil {
		t.Fatal(err)
	}
	got, err := conv.Extractor().Extract(&obj, "deployer")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": map[string]any{"name": "web"}, "spec": map[string]any{"replicas": int64(3)}}
	if !reflect.DeepEqual(got.Object, want) {
		t.Errorf("deployer's configuration: got %v, want %v", got.Object, want)
	}
}
