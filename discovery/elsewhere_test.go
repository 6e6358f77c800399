package discovery_test

import (
	"testing"

	"k8s.io/client-go/rest"

	"github.com/kubeatlas/kubeatlas/discovery"
)

// TestConfig: a client built from a rest.Config gives a copy of it
// (changing it changes nothing of the client's); one built on an HTTP
// client has none to give.
func TestConfig(t *testing.T) {
	c, err := discovery.New(&rest.Config{Host: "https://cluster.example.com:6443", BearerToken: "t"})
	if err != nil {
		t.Fatal(err)
	}
	cfg := c.Config()
	if cfg == nil || cfg.Host != "https://cluster.example.com:6443" || cfg.BearerToken != "t" {
		t.Fatalf("%+v", cfg)
	}
	cfg.BearerToken = "changed"
	if c.Config().BearerToken != "t" {
		t.Errorf("Config is not a copy")
	}
	if cfg := newClient(t, "https://cluster.example.com").Config(); cfg != nil {
		t.Errorf("NewForHTTPClient: %+v, want none", cfg)
	}
}
