package openapi3_test

import (
	"strings"
	"testing"
	"time"

	"github.com/kubeatlas/kubeatlas/openapi3"
)

// TestOptionGivenTwice: an option given twice (which would be silently
// last-wins) is a constructor error that names it.
func TestOptionGivenTwice(t *testing.T) {
	for name, opt := range map[string]func() openapi3.Option{
		"WithMaxAge":      func() openapi3.Option { return openapi3.WithMaxAge(time.Second) },
		"WithConcurrency": func() openapi3.Option { return openapi3.WithConcurrency(2) },
		"WithDocuments":   func() openapi3.Option { return openapi3.WithDocuments(openapi3.NewDocuments()) },
	} {
		if _, err := openapi3.NewForHTTPClient(nil, "https://c.invalid", opt()); err != nil {
			t.Errorf("%s once: %v", name, err)
		}
		if _, err := openapi3.NewForHTTPClient(nil, "https://c.invalid", opt(), opt()); err == nil || !strings.Contains(err.Error(), name+" given twice") {
			t.Errorf("%s twice: %v, want an error naming it", name, err)
		}
	}
}
