package consistency_test

import (
	"os"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubeatlas/kubeatlas/consistency"
	"github.com/kubeatlas/kubeatlas/discovery"
)

// view is a server's own view: the recorded discovery of a real v1.36.3
// server, told apart from another by its /apis ETag, as a server's is.
func view(t *testing.T, etag string) *discovery.Snapshot {
	t.Helper()
	doc := func(path, etag string) discovery.Document {
		body, err := os.ReadFile("testdata/k8s-v1.36.3/" + path + ".v2.json")
		if err != nil {
			t.Fatal(err)
		}
		return discovery.Document{Body: body, ETag: etag, ContentType: "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"}
	}
	s, err := discovery.NewSnapshot(doc("api", `"core"`), doc("apis", etag), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestVerdict: a report is Consistent only when every live server was
// seen (asked directly, or told apart through the URL) and they agree;
// Inconsistent wherever servers were seen to differ, in their own views,
// in what one gets from its peers (its merged view against its own), or
// in storage versions, however few were seen; Unknown otherwise, and for
// a report that saw nothing (the zero value). Consistent() is true for
// Consistent alone.
func TestVerdict(t *testing.T) {
	a, b := view(t, `"a"`), view(t, `"b"`)
	fromPeer := []schema.GroupVersionResource{{Group: "resource.k8s.io", Version: "v1", Resource: "devicetaintrules"}}
	disagreement := []consistency.StorageVersionDisagreement{{Resource: schema.GroupResource{Group: "apps", Resource: "deployments"}, Encodings: map[string]string{"x": "apps/v1", "y": "apps/v2"}}}
	tests := []struct {
		name string
		r    consistency.Report
		want consistency.Verdict
	}{
		{"nothing seen", consistency.Report{}, consistency.Unknown},
		{"every server asked, agreeing", consistency.Report{Certainty: consistency.EveryServerAsked,
			Servers: []consistency.Server{{View: a}, {View: a}}}, consistency.Consistent},
		{"every server sampled, agreeing", consistency.Report{Certainty: consistency.EveryServerSampled,
			Servers: []consistency.Server{{View: a}, {View: a}}}, consistency.Consistent},
		{"every server asked, none answered", consistency.Report{Certainty: consistency.EveryServerAsked,
			Servers: []consistency.Server{{Alive: true}}}, consistency.Unknown},
		{"every answering server seen, agreeing", consistency.Report{Certainty: consistency.EveryAnsweringServerSeen,
			Servers: []consistency.Server{{View: a}, {View: a}, {Alive: true}}}, consistency.Unknown},
		{"not every server seen, agreeing", consistency.Report{Certainty: consistency.NotEveryServerSeen,
			Servers: []consistency.Server{{View: a}}}, consistency.Unknown},
		{"views differ", consistency.Report{Certainty: consistency.EveryServerAsked,
			Servers: []consistency.Server{{View: a}, {View: b}}}, consistency.Inconsistent},
		{"views differ, not every server seen", consistency.Report{Certainty: consistency.NotEveryServerSeen,
			Servers: []consistency.Server{{View: a}, {View: b}}}, consistency.Inconsistent},
		{"one server seen, a peer serves more", consistency.Report{Certainty: consistency.NotEveryServerSeen,
			Servers: []consistency.Server{{View: a, FromPeers: fromPeer}}}, consistency.Inconsistent},
		{"every server asked, a peer serves more", consistency.Report{Certainty: consistency.EveryServerAsked,
			Servers: []consistency.Server{{View: a, FromPeers: fromPeer}, {View: a}}}, consistency.Inconsistent},
		{"storage versions differ", consistency.Report{Certainty: consistency.EveryServerAsked,
			Servers: []consistency.Server{{View: a}, {View: a}}, StorageVersionAPI: true, StorageVersions: disagreement}, consistency.Inconsistent},
		{"storage versions differ, nothing seen", consistency.Report{Certainty: consistency.NotEveryServerSeen,
			StorageVersionAPI: true, StorageVersions: disagreement}, consistency.Inconsistent},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.r.Verdict(); got != tt.want {
				t.Errorf("Verdict() = %v, want %v", got, tt.want)
			}
			if got := tt.r.Consistent(); got != (tt.want == consistency.Consistent) {
				t.Errorf("Consistent() = %v with the verdict %v", got, tt.want)
			}
		})
	}
}

// TestVerdictString: each verdict has a name of its own; an unknown
// value says its number.
func TestVerdictString(t *testing.T) {
	for v, want := range map[consistency.Verdict]string{
		consistency.Unknown: "unknown", consistency.Consistent: "consistent", consistency.Inconsistent: "inconsistent", consistency.Verdict(7): "Verdict(7)",
	} {
		if got := v.String(); got != want {
			t.Errorf("%d: %q, want %q", int(v), got, want)
		}
	}
	var zero consistency.Verdict
	if zero != consistency.Unknown {
		t.Errorf("the zero Verdict is %v, want unknown", zero)
	}
}
