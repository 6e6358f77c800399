package surface_test

import (
	"os"
	"reflect"
	"testing"

	"github.com/kubeatlas/kubeatlas/discovery/surface"
)

// TestEncodeLastKnownReadsBack: the last known group-versions of a
// recorded v1.36.3 /apis, encoded, decode to the same resources (what a
// warm start reads back), and the current ones are left out.
func TestEncodeLastKnownReadsBack(t *testing.T) {
	body, err := os.ReadFile("testdata/k8s-v1.36.3/apis.v2.pb")
	if err != nil {
		t.Fatal(err)
	}
	groups, _, _, err := surface.DecodeAggregated(body, surface.Source{Format: surface.FormatAggregatedV2, Protobuf: true}.MediaType(""), "")
	if err != nil {
		t.Fatal(err)
	}
	if none, err := surface.EncodeLastKnown(groups); none != nil || err != nil {
		t.Fatalf("nothing last known: %d bytes, %v; want none", len(none), err)
	}
	want := map[string][]surface.Resource{}
	for gi := range groups {
		if gi%3 == 0 { // some groups' first version is last known
			v := &groups[gi].Versions[0]
			v.LastKnown = true
			want[groups[gi].Name+"/"+v.Version] = v.Resources
		}
	}
	b, err := surface.EncodeLastKnown(groups)
	if err != nil {
		t.Fatal(err)
	}
	back, _, _, err := surface.DecodeAggregated(b, surface.Source{Format: surface.FormatAggregatedV2}.MediaType(""), "")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]surface.Resource{}
	for _, g := range back {
		for _, v := range g.Versions {
			got[g.Name+"/"+v.Version] = v.Resources
		}
	}
	if len(got) != len(want) || len(want) == 0 {
		t.Fatalf("%d group-versions read back, want the %d last known", len(got), len(want))
	}
	for gv, rs := range want {
		if !reflect.DeepEqual(got[gv], rs) {
			t.Errorf("%s: resources differ after a round trip", gv)
		}
	}
}
