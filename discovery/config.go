package discovery

import (
	"reflect"

	"k8s.io/client-go/rest"
)

// heldConfig is the rest.Config a client was built from, of which Config
// and Connection hand out copies. A rest.Config is 576 bytes held; the
// clients of one Surfaces table (package shared's identities, a thousand
// of one server) mostly differ in who they send requests as: a client
// whose config is, but for its bearer token and impersonation, the one
// the table holds (the first such config given it; tableConfig) holds
// only those two and the table's config, and a copy puts them back.
// Any other difference, or any other credential, keeps a whole copy.
type heldConfig struct {
	base *rest.Config // the client's whole config, or the table's when who is set
	who  *configWho   // nil: base is the client's own copy
}

// configWho is what a client whose config is its table's holds of its
// own: who its requests are sent as.
type configWho struct {
	token       string
	impersonate *rest.ImpersonationConfig // nil: none
}

// hold makes the held form of cfg (copied: the caller may change cfg),
// sharing t's config when cfg is t's but for its token and impersonation.
func hold(cfg *rest.Config, t *Surfaces) heldConfig {
	if t == nil || !shareableConfig(cfg) {
		return heldConfig{base: rest.CopyConfig(cfg)}
	}
	base := t.tableConfig(cfg)
	if !sameConfig(withoutWho(cfg), *base) {
		return heldConfig{base: rest.CopyConfig(cfg)}
	}
	who := &configWho{token: cfg.BearerToken}
	if !reflect.ValueOf(cfg.Impersonate).IsZero() {
		imp := cfg.Impersonate // as rest.CopyConfig copies it
		who.impersonate = &imp
	}
	return heldConfig{base: base, who: who}
}

// copy is a copy of the client's config; nil for a client built with
// none.
func (h *heldConfig) copy() *rest.Config {
	if h.base == nil {
		return nil
	}
	cfg := rest.CopyConfig(h.base)
	if h.who != nil {
		cfg.BearerToken = h.who.token
		if h.who.impersonate != nil {
			cfg.Impersonate = *h.who.impersonate
		}
	}
	return cfg
}

// shareableConfig reports whether cfg carries no credential but a bearer
// token and impersonation, the two a client holds of its own: a table's
// config keeps no other credential of the client that gave it first.
func shareableConfig(cfg *rest.Config) bool {
	return cfg.Username == "" && cfg.Password == "" &&
		len(cfg.CertData) == 0 && len(cfg.KeyData) == 0 &&
		cfg.AuthProvider == nil && cfg.AuthConfigPersister == nil && cfg.ExecProvider == nil
}

// withoutWho is cfg without what configWho holds.
func withoutWho(cfg *rest.Config) rest.Config {
	c := *cfg
	c.BearerToken, c.Impersonate = "", rest.ImpersonationConfig{}
	return c
}

// tableConfig is the config t's compact clients share: the first
// shareable one given, without its token and impersonation.
func (t *Surfaces) tableConfig(cfg *rest.Config) *rest.Config {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.config == nil {
		c := withoutWho(cfg)
		t.config = rest.CopyConfig(&c)
	}
	return t.config
}

// sameConfig reports whether a copy of b is a copy of a: every field
// equal by value, except that a pointer, a function, a channel or an
// interface holding one is equal only to itself (a rate limiter, a
// warning handler or a transport is an object, not a value), and a
// function other than nil to nothing. It errs on the side of different,
// which only costs a whole copy.
func sameConfig(a, b rest.Config) bool {
	return sameValue(reflect.ValueOf(a), reflect.ValueOf(b))
}

func sameValue(a, b reflect.Value) bool {
	switch a.Kind() {
	case reflect.Struct:
		for i := range a.NumField() {
			if !sameValue(a.Field(i), b.Field(i)) {
				return false
			}
		}
		return true
	case reflect.Slice:
		if a.IsNil() != b.IsNil() || a.Len() != b.Len() {
			return false
		}
		for i := range a.Len() {
			if !sameValue(a.Index(i), b.Index(i)) {
				return false
			}
		}
		return true
	case reflect.Map:
		if a.IsNil() != b.IsNil() || a.Len() != b.Len() {
			return false
		}
		for _, k := range a.MapKeys() {
			bv := b.MapIndex(k)
			if !bv.IsValid() || !sameValue(a.MapIndex(k), bv) {
				return false
			}
		}
		return true
	case reflect.Pointer, reflect.Chan, reflect.UnsafePointer:
		return a.Pointer() == b.Pointer()
	case reflect.Func:
		return a.IsNil() && b.IsNil()
	case reflect.Interface:
		if a.IsNil() || b.IsNil() {
			return a.IsNil() && b.IsNil()
		}
		ae, be := a.Elem(), b.Elem()
		if ae.Type() != be.Type() {
			return false
		}
		switch ae.Kind() {
		case reflect.Pointer, reflect.Chan, reflect.UnsafePointer:
			return ae.Pointer() == be.Pointer() // an object, by identity
		case reflect.Func, reflect.Map, reflect.Slice:
			return false // not comparable, nor worth comparing
		}
		return ae.Comparable() && ae.Equal(be)
	case reflect.String:
		return a.String() == b.String()
	case reflect.Bool:
		return a.Bool() == b.Bool()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return a.Int() == b.Int()
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return a.Uint() == b.Uint()
	case reflect.Float32, reflect.Float64:
		return a.Float() == b.Float()
	}
	return false // a kind rest.Config does not hold: different
}
