package discovery_test

import (
	"log/slog"
	"strings"
	"testing"

	"k8s.io/utils/clock"

	"github.com/kubeatlas/kubeatlas/discovery"
	"github.com/kubeatlas/kubeatlas/diskcache/diskcachetest"
)

// TestOptionErrors: an option that cannot mean anything, options that
// contradict each other, and an option given twice (which would be
// silently last-wins) are constructor errors, each saying which.
func TestOptionErrors(t *testing.T) {
	store := &diskcachetest.Memory{}
	for name, tc := range map[string]struct {
		opts []discovery.Option
		says string
	}{
		"legacy and nopeer":     {[]discovery.Option{discovery.WithLegacyOnly(), discovery.WithNoPeer()}, "WithNoPeer"},
		"legacy and disk cache": {[]discovery.Option{discovery.WithDiskCache(store), discovery.WithLegacyOnly()}, "WithDiskCache"},
		"legacy and surfaces":   {[]discovery.Option{discovery.WithLegacyOnly(), discovery.WithSurfaces(discovery.NewSurfaces())}, "WithSurfaces"},
		"negative max age":      {[]discovery.Option{discovery.WithMaxAge(-1)}, "max age"},
		"zero timeout":          {[]discovery.Option{discovery.WithRefreshTimeout(0)}, "refresh timeout"},
		"zero concurrency":      {[]discovery.Option{discovery.WithConcurrency(0)}, "concurrency"},
		"zero size":             {[]discovery.Option{discovery.WithMaxResponseBytes(0)}, "max response bytes"},
		"negative retries":      {[]discovery.Option{discovery.WithMaxRetries(-1)}, "max retries"},
	} {
		_, err := discovery.NewForHTTPClient(nil, "http://127.0.0.1:1", tc.opts...)
		if err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: %v, want an error about %s", name, err, tc.says)
		}
	}
	if _, err := discovery.NewForHTTPClient(nil, "not a url"); err == nil {
		t.Errorf("relative base URL accepted")
	}
}

// TestOptionGivenTwice: each option given twice is an error that names
// it, even with the same value (a second one is most often a wrapper's
// default and a user's choice, of which one would silently win).
func TestOptionGivenTwice(t *testing.T) {
	table := discovery.NewSurfaces()
	for name, opt := range map[string]func() discovery.Option{
		"WithMaxAge":           func() discovery.Option { return discovery.WithMaxAge(0) },
		"WithRefreshTimeout":   func() discovery.Option { return discovery.WithRefreshTimeout(1) },
		"WithConcurrency":      func() discovery.Option { return discovery.WithConcurrency(1) },
		"WithMaxResponseBytes": func() discovery.Option { return discovery.WithMaxResponseBytes(1) },
		"WithMaxRetries":       func() discovery.Option { return discovery.WithMaxRetries(0) },
		"WithLegacyOnly":       discovery.WithLegacyOnly,
		"WithJSONOnly":         discovery.WithJSONOnly,
		"WithNoPeer":           discovery.WithNoPeer,
		"WithLogger":           func() discovery.Option { return discovery.WithLogger(slog.Default()) },
		"WithClock":            func() discovery.Option { return discovery.WithClock(clock.RealClock{}) },
		"WithDiskCache":        func() discovery.Option { return discovery.WithDiskCache(&diskcachetest.Memory{}) },
		"WithSurfaces":         func() discovery.Option { return discovery.WithSurfaces(table) },
	} {
		if _, err := discovery.NewForHTTPClient(nil, "http://127.0.0.1:1", opt()); err != nil {
			t.Errorf("%s once: %v", name, err)
		}
		_, err := discovery.NewForHTTPClient(nil, "http://127.0.0.1:1", opt(), opt())
		if err == nil || !strings.Contains(err.Error(), name+" given twice") {
			t.Errorf("%s twice: %v, want an error naming it", name, err)
		}
	}
}
