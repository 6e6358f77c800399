package consistency_test

import (
	"crypto/sha512"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"time"
)

// newExampleCluster starts two API servers, v1.36.3 and v1.37.1, each at an
// address of its own, behind a front that sends every request to the first
// (as a load balancer holding one connection does), and returns the
// front's URL. Both serve the discovery a kube-apiserver v1.36.3 served
// (testdata/k8s-v1.36.3); the upgraded one also serves
// upgraded.example.com/v1. The front lists their identity leases, which
// name each server's address, as kube-apiserver's do in kube-system.
func newExampleCluster() (front string, stop func()) {
	upgraded := `{"metadata":{"name":"upgraded.example.com"},"versions":[{"version":"v1","freshness":"Current",` +
		`"resources":[{"resource":"upgrades","responseKind":{"group":"upgraded.example.com","version":"v1","kind":"Upgrade"},` +
		`"scope":"Namespaced","singularResource":"upgrade","verbs":["get","list"]}]}]}`
	var servers []*httptest.Server
	var leases []string
	for i, version := range []string{"v1.36.3", "v1.37.1"} {
		extra := ""
		if i == 1 {
			extra = upgraded
		}
		srv := httptest.NewServer(exampleAPIServer(version, extra))
		servers = append(servers, srv)
		leases = append(leases, fmt.Sprintf(`{"metadata":{"name":"apiserver-%[1]d-identity",`+
			`"labels":{"apiserver.kubernetes.io/identity":"kube-apiserver","kubernetes.io/hostname":"apiserver-%[1]d"},`+
			`"annotations":{"kubernetes.io/peer-advertise-address":%[2]q}},`+
			`"spec":{"renewTime":%[3]q,"leaseDurationSeconds":3600}}`,
			i, srv.Listener.Addr().String(), time.Now().UTC().Format(time.RFC3339Nano)))
	}
	first, _ := url.Parse(servers[0].URL)
	proxy := httputil.NewSingleHostReverseProxy(first)
	fr := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases" {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"kind":"LeaseList","apiVersion":"coordination.k8s.io/v1","items":[%s]}`, strings.Join(leases, ","))
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	return fr.URL, func() {
		fr.Close()
		for _, s := range servers {
			s.Close()
		}
	}
}

// exampleAPIServer answers /version and aggregated discovery (JSON) as an
// API server of version does, with extra (a group) added to /apis.
func exampleAPIServer(version, extra string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/version" {
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(map[string]string{"major": "1", "minor": strings.Split(version, ".")[1], "gitVersion": version})
			return
		}
		body, err := os.ReadFile("testdata/k8s-v1.36.3" + r.URL.Path + ".v2.json")
		if err != nil {
			http.NotFound(w, r)
			return
		}
		if extra != "" && r.URL.Path == "/apis" {
			body = []byte(strings.Replace(string(body), `"items":[`, `"items":[`+extra+",", 1))
		}
		w.Header().Set("Content-Type", "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList")
		// A server's discovery has an ETag of its content, which tells
		// views apart.
		w.Header().Set("ETag", fmt.Sprintf("%q", fmt.Sprintf("%X", sha512.Sum512(body))))
		w.Write(body)
	})
}
