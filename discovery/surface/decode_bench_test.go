package surface

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	cgdiscovery "k8s.io/client-go/discovery"
	"k8s.io/klog/v2"

	"github.com/kubeatlas/kubeatlas/internal/docserver"
)

// BenchmarkDecode isolates decoding /apis from the network: kubeatlas from
// JSON and from protobuf into a snapshot's groups, and client-go's own path
// (encoding/json, then SplitGroupsAndResources).
func BenchmarkDecode(b *testing.B) {
	klog.LogToStderr(false)
	for _, n := range []int{0, 1000, 3000} {
		srv, err := docserver.NewServer(docserver.WithCRDs(n, max(1, n/12)))
		if err != nil {
			b.Fatal(err)
		}
		ts := httptest.NewServer(srv)
		jsonBody := fetchBody(b, ts.URL+"/apis", Source{Format: FormatAggregatedV2}.MediaType(""))
		pbBody := fetchBody(b, ts.URL+"/apis", Source{Format: FormatAggregatedV2, Protobuf: true}.MediaType(""))
		ts.Close()
		for _, tc := range []struct {
			name string
			body []byte
			mt   string
		}{
			{"json", jsonBody, Source{Format: FormatAggregatedV2}.MediaType("")},
			{"protobuf", pbBody, Source{Format: FormatAggregatedV2, Protobuf: true}.MediaType("")},
		} {
			b.Run(fmt.Sprintf("crds=%d/kubeatlas-%s", n, tc.name), func(b *testing.B) {
				b.SetBytes(int64(len(tc.body)))
				b.ReportAllocs()
				for b.Loop() {
					if _, _, _, err := DecodeAggregated(tc.body, tc.mt, ""); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
		b.Run(fmt.Sprintf("crds=%d/client-go-json", n), func(b *testing.B) {
			b.SetBytes(int64(len(jsonBody)))
			b.ReportAllocs()
			for b.Loop() {
				var list apidiscoveryv2.APIGroupDiscoveryList
				if err := json.Unmarshal(jsonBody, &list); err != nil {
					b.Fatal(err)
				}
				cgdiscovery.SplitGroupsAndResources(list)
			}
		})
	}
}

func fetchBody(b testing.TB, url, accept string) []byte {
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Accept", accept)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		b.Fatal(err)
	}
	return body
}
