package discovery

import (
	"net/http"
	"reflect"
	"strings"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/kubeatlas/kubeatlas/internal/restconfigtest"
)

// TestHeldConfigIsTheClients: clients that share a Surfaces table hold
// their configs compactly (heldConfig), and each one's Config and
// Connection are still its own: for every field of rest.Config (walked by
// reflection, so that a field client-go adds is tried), two clients
// whose configs differ in that field and in their tokens each get back
// their own value and token, and a client whose config is the first's but
// for its token and impersonation holds only those.
func TestHeldConfigIsTheClients(t *testing.T) {
	base := func(token string) *rest.Config {
		return &rest.Config{Host: "https://api.example:6443", BearerToken: token, UserAgent: "test",
			TLSClientConfig: rest.TLSClientConfig{CAData: []byte("ca")}}
	}
	leaves := restconfigtest.Leaves()
	if len(leaves) < 40 {
		t.Fatalf("only %d fields found: %v", len(leaves), leaves)
	}
	for _, path := range leaves {
		t.Run(path, func(t *testing.T) {
			tbl := NewSurfaces()
			c1, c2, c3 := base("tok-1"), base("tok-2"), base("tok-3")
			v1 := restconfigtest.Set(t, c1, path, 1)
			restconfigtest.Set(t, c2, path, 2)
			restconfigtest.SetTo(c3, path, v1)
			var clients []*Client
			for _, cfg := range []*rest.Config{c1, c2, c3} {
				c, err := NewForConfigAndClient(cfg, http.DefaultClient, WithSurfaces(tbl))
				if err != nil {
					t.Fatal(err)
				}
				clients = append(clients, c)
			}
			for i, cfg := range []*rest.Config{c1, c2, c3} {
				got := clients[i].Config()
				_, conn := clients[i].Connection()
				for name, g := range map[string]*rest.Config{"Config": got, "Connection": conn} {
					if !sameLeaf(g, cfg, path) || !sameLeaf(g, cfg, "BearerToken") {
						t.Errorf("client %d's %s has %s %v and token %q, want %v and %q", i+1, name,
							path, leaf(g, path), g.BearerToken, leaf(cfg, path), cfg.BearerToken)
					}
					for _, other := range restconfigtest.Leaves() {
						if !sameLeaf(g, cfg, other) {
							t.Errorf("client %d's %s: %s is %v, want %v", i+1, name, other, leaf(g, other), leaf(cfg, other))
						}
					}
				}
			}
			// The third's config is the first's but for what a client
			// holds of its own: it is held compactly, unless the field is
			// a credential the table does not keep, a function (never
			// the same as another) or a value that cannot be compared (a
			// CodecFactory in an interface).
			wantCompact := !isCredential(path) && leafKind(path) != reflect.Func && path != "ContentConfig.NegotiatedSerializer"
			if compact := clients[2].config.who != nil; compact != wantCompact {
				t.Errorf("the third client (%s the first's) holds its config compactly: %v, want %v", path, compact, wantCompact)
			}
			if clients[1].config.who != nil && !strings.HasPrefix(path, "Impersonate.") && path != "BearerToken" {
				t.Errorf("the second client (another %s) holds the table's config", path)
			}
		})
	}
}

// TestHeldConfigCopiesAreOwn: what a caller does to a config that Config
// returns changes neither the client's nor the other clients' of its
// table.
func TestHeldConfigCopiesAreOwn(t *testing.T) {
	tbl := NewSurfaces()
	cfg := func(token, user string) *rest.Config {
		return &rest.Config{Host: "https://api.example:6443", BearerToken: token,
			Impersonate: rest.ImpersonationConfig{UserName: user, Groups: []string{"g"}}}
	}
	a, err := NewForConfigAndClient(cfg("tok-a", "alice"), http.DefaultClient, WithSurfaces(tbl))
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewForConfigAndClient(cfg("tok-b", "bob"), http.DefaultClient, WithSurfaces(tbl))
	if err != nil {
		t.Fatal(err)
	}
	if a.config.who == nil || b.config.who == nil {
		t.Fatal("the clients do not share their table's config")
	}
	got := b.Config()
	got.Host, got.BearerToken, got.Impersonate.UserName, got.QPS = "https://elsewhere", "tok-x", "mallory", 99
	for _, c := range []struct {
		c           *Client
		token, user string
	}{{a, "tok-a", "alice"}, {b, "tok-b", "bob"}} {
		g := c.c.Config()
		if g.Host != "https://api.example:6443" || g.BearerToken != c.token || g.Impersonate.UserName != c.user || g.QPS != 0 {
			t.Errorf("after a change to a copy, a client's config is %s, %q, %q, QPS %v", g.Host, g.BearerToken, g.Impersonate.UserName, g.QPS)
		}
	}
}

// TestTableHoldsNoSecret pins Surfaces' promise: the config its clients
// share holds no client's token, impersonation, password, key, auth
// provider or exec plugin; a client whose config carries one of the last
// four holds its own whole copy.
func TestTableHoldsNoSecret(t *testing.T) {
	tbl := NewSurfaces()
	for _, cfg := range []*rest.Config{
		{Host: "https://api.example:6443", Username: "alice", Password: "secret"},
		{Host: "https://api.example:6443", TLSClientConfig: rest.TLSClientConfig{CertData: []byte("cert"), KeyData: []byte("key")}},
		{Host: "https://api.example:6443", BearerToken: "tok-a", Impersonate: rest.ImpersonationConfig{UserName: "alice", Groups: []string{"admins"}}},
	} {
		c, err := NewForConfigAndClient(cfg, http.DefaultClient, WithSurfaces(tbl))
		if err != nil {
			t.Fatal(err)
		}
		if got := c.Config(); !reflect.DeepEqual(got.Impersonate, cfg.Impersonate) || got.BearerToken != cfg.BearerToken ||
			got.Password != cfg.Password || string(got.KeyData) != string(cfg.KeyData) {
			t.Errorf("a client's config came back as %+v", got)
		}
	}
	tbl.mu.Lock()
	defer tbl.mu.Unlock()
	if c := tbl.config; c == nil || c.BearerToken != "" || !reflect.ValueOf(c.Impersonate).IsZero() ||
		c.Username != "" || c.Password != "" || len(c.CertData) != 0 || len(c.KeyData) != 0 {
		t.Errorf("the table's config is %+v", c)
	}
}

func isCredential(path string) bool {
	switch path {
	case "Username", "Password", "TLSClientConfig.CertData", "TLSClientConfig.KeyData", "AuthConfigPersister":
		return true
	}
	return strings.HasPrefix(path, "AuthProvider.") || strings.HasPrefix(path, "ExecProvider.")
}

func leafKind(path string) reflect.Kind {
	return leaf(&rest.Config{}, path).Kind()
}

// leaf is the field of cfg at path, as restconfigtest names it; the
// zero Value when a struct on the way is nil.
func leaf(cfg *rest.Config, path string) reflect.Value {
	v := reflect.ValueOf(cfg).Elem()
	segs := strings.Split(path, ".")
	for _, seg := range segs[:len(segs)-1] {
		f := v.FieldByName(seg)
		switch f.Kind() {
		case reflect.Pointer:
			if f.IsNil() {
				return reflect.Zero(fieldType(reflect.TypeOf(cfg).Elem(), segs))
			}
			f = f.Elem()
		case reflect.Slice:
			if f.Len() == 0 {
				return reflect.Zero(fieldType(reflect.TypeOf(cfg).Elem(), segs))
			}
			f = f.Index(0)
		}
		v = f
	}
	return v.FieldByName(segs[len(segs)-1])
}

func fieldType(t reflect.Type, segs []string) reflect.Type {
	for _, seg := range segs {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
			t = t.Elem()
		}
		f, _ := t.FieldByName(seg)
		t = f.Type
	}
	return t
}

// sameLeaf: a function is the same function; anything else the same
// value (a pointer's target compared, which a shallow copy keeps).
func sameLeaf(a, b *rest.Config, path string) bool {
	x, y := leaf(a, path), leaf(b, path)
	if x.Kind() == reflect.Func {
		return x.IsNil() == y.IsNil() && x.Pointer() == y.Pointer()
	}
	return reflect.DeepEqual(x.Interface(), y.Interface())
}
