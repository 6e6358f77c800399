package typed

import (
	"fmt"
	"time"

	"github.com/kubeatlas/kubeatlas/internal/optset"
)

// DefaultTimeout bounds fetching a group-version's document for the
// methods that take no context (ObjectToTyped, Extract, ...): client-go's
// interfaces they implement have none.
const DefaultTimeout = 30 * time.Second

// Option configures a Converter.
type Option func(*options) error

type options struct {
	preserveUnknownFields bool
	timeout               time.Duration

	given optset.Given
}

func named(name string, set func(*options) error) Option {
	return optset.Named("typed", name, func(o *options) *optset.Given { return &o.given }, set)
}

// WithPreserveUnknownFields is managedfields.NewTypeConverter's flag
// (and client-go's openapi.NewTypeConverter's): every struct of the
// schemas keeps the fields it does not declare, as the API server's own
// converter for CRDs does not. Default: false, as client-go's extractor
// and kubectl's apply use it.
func WithPreserveUnknownFields(preserve bool) Option {
	return named("WithPreserveUnknownFields", func(o *options) error {
		o.preserveUnknownFields = preserve
		return nil
	})
}

// WithTimeout bounds the fetch of a document by the methods that take no
// context (ObjectToTyped, TypedToObject, Extract, ExtractStatus, and the
// lookups of PatchMeta's answer, which read the root again for a field
// its schema lacks). Default: DefaultTimeout (30s). Type and PatchMeta
// take the caller's context.
func WithTimeout(d time.Duration) Option {
	return named("WithTimeout", func(o *options) error {
		if d <= 0 {
			return fmt.Errorf("typed: timeout must be positive, got %v", d)
		}
		o.timeout = d
		return nil
	})
}
