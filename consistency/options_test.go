package consistency_test

import (
	"context"
	"strings"
	"testing"

	"github.com/kubeatlas/kubeatlas/consistency"
	"github.com/kubeatlas/kubeatlas/discovery"
)

// TestOptionGivenTwice: an option given twice (which would be silently
// last-wins) is Check's error, naming it, before any request.
func TestOptionGivenTwice(t *testing.T) {
	c, err := discovery.NewForHTTPClient(nil, "https://c.invalid")
	if err != nil {
		t.Fatal(err)
	}
	_, err = consistency.Check(context.Background(), c, consistency.WithSamples(2), consistency.WithSamples(3))
	if err == nil || !strings.Contains(err.Error(), "WithSamples given twice") {
		t.Errorf("twice: %v, want an error naming it", err)
	}
	if n := c.Stats().Requests; n != 0 {
		t.Errorf("%d requests sent", n)
	}
}

// TestWithAPIServersNeedsAddresses: an address that is not host:port is
// Check's error, before any request.
func TestWithAPIServersNeedsAddresses(t *testing.T) {
	c, err := discovery.NewForHTTPClient(nil, "https://c.invalid")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := consistency.Check(context.Background(), c, consistency.WithAPIServers("10.0.0.1")); err == nil || !strings.Contains(err.Error(), "host:port") {
		t.Errorf("an address without a port: %v, want an error", err)
	}
	if n := c.Stats().Requests; n != 0 {
		t.Errorf("%d requests sent", n)
	}
}
