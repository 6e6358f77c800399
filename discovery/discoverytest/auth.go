package discoverytest

import (
	"fmt"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/endpoints/handlers/responsewriters"
)

// WithBearerToken makes the server authenticate as a kube-apiserver with a
// token file does: the token is an admin's; a request without one is
// system:anonymous, which may read /version and the health endpoints only
// (403 elsewhere); a wrong token is a 401. Default: no authentication.
func WithBearerToken(token string) Option {
	return func(o *options) error {
		if token == "" {
			return fmt.Errorf("discoverytest: empty bearer token")
		}
		o.token = token
		return nil
	}
}

// publicPaths are what system:public-info-viewer may read.
var publicPaths = map[string]bool{"/version": true, "/healthz": true, "/livez": true, "/readyz": true}

func (s *Server) authenticate(next http.Handler) http.Handler {
	if s.token == "" {
		return next
	}
	codecs := legacyCodecs()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Header.Get("Authorization") {
		case "Bearer " + s.token:
			next.ServeHTTP(w, r)
		case "":
			if publicPaths[r.URL.Path] {
				next.ServeHTTP(w, r)
				return
			}
			//lint:ignore ST1005 the real kube-apiserver's wording, capital included
			err := apierrors.NewForbidden(schema.GroupResource{}, "", fmt.Errorf("User %q cannot get path %q", "system:anonymous", r.URL.Path))
			err.ErrStatus.Message = fmt.Sprintf("forbidden: User %q cannot get path %q", "system:anonymous", r.URL.Path)
			err.ErrStatus.Details = nil
			responsewriters.ErrorNegotiated(err, codecs, schema.GroupVersion{}, w, r)
		default:
			responsewriters.ErrorNegotiated(apierrors.NewUnauthorized("Unauthorized"), codecs, schema.GroupVersion{}, w, r)
		}
	})
}
