package discovery_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/kubeatlas/kubeatlas/discovery"
	"github.com/kubeatlas/kubeatlas/discovery/discoverytest"
	"github.com/kubeatlas/kubeatlas/discovery/surface"
)

// document reads path from base as a server sends it to accept.
func document(t *testing.T, base, path, accept string) discovery.Document {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", accept)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s %v", path, resp.Status, err)
	}
	return discovery.Document{Body: body, ContentType: resp.Header.Get("Content-Type"), ETag: resp.Header.Get("ETag")}
}

// TestNewSnapshot: the documents a server sent, read by someone else,
// make the snapshot a Client reads (JSON or protobuf), with their ETags
// and the time given; legacy discovery, and a body its Content-Type does
// not describe, are a *ResponseError.
func TestNewSnapshot(t *testing.T) {
	_, base := discoverytest.Start(t, discoverytest.WithCRDs(20, 3))
	want, err := newClient(t, base).Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	at := time.Unix(1000, 0)
	for _, protobuf := range []bool{false, true} {
		accept := surface.Source{Format: surface.FormatAggregatedV2, Protobuf: protobuf}.MediaType("")
		s, err := discovery.NewSnapshot(document(t, base, "/api", accept), document(t, base, "/apis", accept), at)
		if err != nil {
			t.Fatal(err)
		}
		wantAPI, wantAPIs := want.ETags()
		if api, apis := s.ETags(); api != wantAPI || apis != wantAPIs || !slices.Equal(flatten(s), flatten(want)) || !slices.Equal(groupOrder(s), groupOrder(want)) {
			t.Errorf("protobuf %v: ETags %s %s, %d resources; want the client's snapshot", protobuf, api, apis, len(flatten(s)))
		}
		if _, src := s.Sources(); src.Protobuf != protobuf || !s.Fetched().Equal(at) || !s.Validated().Equal(at) || s.Err() != nil {
			t.Errorf("protobuf %v: source %v, fetched %v, validated %v, err %v", protobuf, src, s.Fetched(), s.Validated(), s.Err())
		}
	}

	aggregated := surface.Source{Format: surface.FormatAggregatedV2}.MediaType("")
	core := document(t, base, "/api", aggregated)
	var re *discovery.ResponseError
	legacy := document(t, base, "/apis", surface.Source{Format: surface.FormatLegacy}.MediaType(""))
	if _, err := discovery.NewSnapshot(core, legacy, at); !errors.As(err, &re) || re.Path != "/apis" {
		t.Errorf("legacy /apis: %v, want a *ResponseError for /apis", err)
	}
	garbage := core
	garbage.Body = []byte(`{"kind":"Status"}`)
	if _, err := discovery.NewSnapshot(garbage, document(t, base, "/apis", aggregated), at); !errors.As(err, &re) || re.Path != "/api" {
		t.Errorf("a body that is not discovery: %v, want a *ResponseError for /api", err)
	}
}
