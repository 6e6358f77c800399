package apiserver_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer/cbor"
	"k8s.io/apimachinery/pkg/runtime/serializer/cbor/direct"
	"k8s.io/apiserver/pkg/features"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/rest"
	featuregatetesting "k8s.io/component-base/featuregate/testing"

	"github.com/kubeatlas/kubeatlas/apiserver"
	"github.com/kubeatlas/kubeatlas/apiserver/apis/discovery/v1alpha1"
)

// TestCBOR: with k8s.io/apiserver's CBOR gate on (kubeatlas-apiserver turns
// it on), a client that asks for application/cbor gets lists and watch
// events in CBOR; JSON stays the default.
func TestCBOR(t *testing.T) {
	featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.CBORServingAndStorage, true)
	_, url := startFake(t)
	s := serve(t, url, serveOptions{})
	hc, err := rest.HTTPClientFor(s.Config)
	if err != nil {
		t.Fatal(err)
	}
	get := func(path, accept string) *http.Response {
		t.Helper()
		req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, s.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		if resp.StatusCode != http.StatusOK {
			b, _ := io.ReadAll(resp.Body)
			t.Fatalf("GET %s (Accept %q): %d %s", path, accept, resp.StatusCode, b)
		}
		return resp
	}
	const list = "/apis/discovery.kubeatlas.io/v1alpha1/apigroups"
	if ct := get(list, "").Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("without Accept: Content-Type %q, want application/json", ct)
	}
	scheme := apiserver.NewScheme()
	ser := cbor.NewSerializer(scheme, scheme)
	resp := get(list, "application/cbor")
	if ct := resp.Header.Get("Content-Type"); ct != "application/cbor" {
		t.Fatalf("Accept application/cbor: Content-Type %q", ct)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	obj, _, err := ser.Decode(body, nil, nil)
	if err != nil {
		t.Fatalf("decoding the CBOR list: %v", err)
	}
	l, ok := obj.(*v1alpha1.GroupList)
	if !ok || len(l.Items) == 0 {
		t.Fatalf("CBOR list: %T %+v, want a GroupList with the fake's groups", obj, obj)
	}

	// A watch in CBOR: a sequence of CBOR-encoded watch events.
	resp = get(list+"?watch=true&resourceVersion=0", "application/cbor")
	if ct := resp.Header.Get("Content-Type"); ct != "application/cbor-seq" && ct != "application/cbor" {
		t.Fatalf("CBOR watch: Content-Type %q", ct)
	}
	fr := cbor.NewFramer().NewFrameReader(io.NopCloser(bufio.NewReader(resp.Body)))
	buf := make([]byte, 1<<20)
	n, err := fr.Read(buf)
	if err != nil {
		t.Fatalf("reading the first CBOR watch event: %v", err)
	}
	var ev metav1.WatchEvent
	if err := direct.Unmarshal(buf[:n], &ev); err != nil {
		t.Fatalf("decoding the first CBOR watch event: %v", err)
	}
	if ev.Type != "ADDED" || len(ev.Object.Raw) == 0 {
		t.Fatalf("first CBOR watch event: %q with %d bytes, want ADDED with an object", ev.Type, len(ev.Object.Raw))
	}
}
