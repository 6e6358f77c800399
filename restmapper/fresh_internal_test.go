package restmapper

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestFollowedMapperMakesNoFreshness: a mapper makes what lookups without
// a version need to revalidate (freshness) at the first such lookup while
// its client is not followed; a followed client's mapper, package
// shared's identities' under the server's watch, makes none, however many
// such lookups it answers.
func TestFollowedMapperMakesNoFreshness(t *testing.T) {
	m := newTestMapper(t, nil)
	pods := schema.GroupKind{Kind: "Pod"}
	if _, err := m.RESTMapping(pods, "v1"); err != nil {
		t.Fatal(err)
	}
	stop := m.client.Follow()
	for range 10 {
		if _, err := m.RESTMapping(pods); err != nil {
			t.Fatal(err)
		}
	}
	if m.fresh.Load() != nil {
		t.Error("a followed mapper made its freshness")
	}
	stop()
	if _, err := m.RESTMapping(pods); err != nil {
		t.Fatal(err)
	}
	if m.fresh.Load() == nil {
		t.Error("a mapper no longer followed answered a lookup without a version with no freshness")
	}
}
