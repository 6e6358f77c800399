package fleet_test

import (
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/kubeatlas/kubeatlas/discovery"
	"github.com/kubeatlas/kubeatlas/diskcache/diskcachetest"
	"github.com/kubeatlas/kubeatlas/fleet"
	"github.com/kubeatlas/kubeatlas/openapi3"
)

// TestOptionsCannotReplaceTheFleets: options for the clusters' clients
// that would replace what the fleet owns (its table, store, timeout,
// documents), or contradict it, and any option given twice, are New's
// errors, each naming the option. Before, the user's were applied after
// the fleet's and silently replaced its sharing, store or JSON-only rule.
func TestOptionsCannotReplaceTheFleets(t *testing.T) {
	for name, tc := range map[string]struct {
		opts []fleet.Option
		says string
	}{
		"a table":            {[]fleet.Option{fleet.WithDiscoveryOptions(discovery.WithSurfaces(discovery.NewSurfaces()))}, "WithSurfaces given twice"},
		"a discovery store":  {[]fleet.Option{fleet.WithDiscoveryOptions(discovery.WithDiskCache(&diskcachetest.Memory{}))}, "WithDiskCache given twice"},
		"a refresh timeout":  {[]fleet.Option{fleet.WithDiscoveryOptions(discovery.WithRefreshTimeout(time.Second))}, "WithRefreshTimeout given twice"},
		"legacy discovery":   {[]fleet.Option{fleet.WithDiscoveryOptions(discovery.WithLegacyOnly())}, "WithLegacyOnly"},
		"documents":          {[]fleet.Option{fleet.WithOpenAPIOptions(openapi3.WithDocuments(openapi3.NewDocuments()))}, "WithDocuments given twice"},
		"an OpenAPI store":   {[]fleet.Option{fleet.WithOpenAPIOptions(openapi3.WithDiskCache(&diskcachetest.Memory{}))}, "WithDiskCache given twice"},
		"concurrency twice":  {[]fleet.Option{fleet.WithConcurrency(1), fleet.WithConcurrency(2)}, "WithConcurrency given twice"},
		"discovery twice":    {[]fleet.Option{fleet.WithDiscoveryOptions(), fleet.WithDiscoveryOptions()}, "WithDiscoveryOptions given twice"},
		"one option twice":   {[]fleet.Option{fleet.WithDiscoveryOptions(discovery.WithMaxAge(time.Second), discovery.WithMaxAge(time.Minute))}, "WithMaxAge given twice"},
		"an empty cache dir": {[]fleet.Option{fleet.WithCacheDir("")}, "WithCacheDir"},
	} {
		_, err := fleet.New(tc.opts...)
		if err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: %v, want an error saying %q", name, err, tc.says)
		}
	}
	// What does not replace the fleet's is taken.
	if _, err := fleet.New(fleet.WithCacheDir(t.TempDir()),
		fleet.WithDiscoveryOptions(discovery.WithJSONOnly(), discovery.WithMaxAge(time.Minute)),
		fleet.WithOpenAPIOptions(openapi3.WithStaleRootOnError(), openapi3.WithConcurrency(2))); err != nil {
		t.Errorf("options the fleet does not own: %v", err)
	}
	f, err := fleet.New()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Add("c", &rest.Config{Host: "https://c.invalid"}, fleet.WithLike("a"), fleet.WithLike("b")); err == nil || !strings.Contains(err.Error(), "WithLike given twice") {
		t.Errorf("WithLike twice: %v", err)
	}
}
