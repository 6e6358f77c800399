package main

import (
	"testing"
)

// TestStrip: every description string is emptied, anything else is kept
// as it was, in its order: a property named description, numbers as
// written, escapes that mean the same.
func TestStrip(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{"b":1,"description":"upstream prose","a":[{"description":"more"}]}`, `{"b":1,"description":"","a":[{"description":""}]}`},
		{`{"properties":{"description":{"type":"string","description":"The description."}}}`, `{"properties":{"description":{"type":"string","description":""}}}`},
		{` {"n": 1.50, "big": 12345678901234567890, "s": "a<b>&\u00e9", "t": true, "z": null, "e": [], "o": {}} `, `{"n":1.50,"big":12345678901234567890,"s":"a<b>&é","t":true,"z":null,"e":[],"o":{}}`},
		{`{"summary":"kept","x-description":"kept"}`, `{"summary":"kept","x-description":"kept"}`},
	} {
		got, err := Strip([]byte(c.in))
		if err != nil || string(got) != c.want {
			t.Errorf("Strip(%s) = %s, %v; want %s", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{`{"a":`, `{} {}`, `{"a" 1}`} {
		if got, err := Strip([]byte(bad)); err == nil {
			t.Errorf("Strip(%s) = %s, want an error", bad, got)
		}
	}
}
