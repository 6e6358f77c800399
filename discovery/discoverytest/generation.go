package discoverytest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	apidiscoveryv2beta1 "k8s.io/api/apidiscovery/v2beta1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	apidiscoveryv2conversion "k8s.io/apiserver/pkg/apis/apidiscovery/v2"
	"k8s.io/apiserver/pkg/endpoints/handlers/negotiation"
	"k8s.io/apiserver/pkg/endpoints/handlers/responsewriters"
)

// Generation selects which discovery formats the server speaks, like a
// kube-apiserver of a given minor version.
type Generation int

const (
	// GenerationV2 is a server of 1.33 or later: aggregated discovery v2 and
	// legacy discovery; a request for v2beta1 alone gets 406. The default.
	GenerationV2 Generation = iota
	// GenerationV2AndV2Beta1 is a 1.30–1.32 server: v2, v2beta1 and legacy.
	GenerationV2AndV2Beta1
	// GenerationV2Beta1 is a 1.26–1.29 server: v2beta1 and legacy.
	GenerationV2Beta1
	// GenerationLegacy is a server older than 1.26: legacy discovery only,
	// one request per group-version.
	GenerationLegacy
)

func (g Generation) String() string {
	switch g {
	case GenerationV2:
		return "v2"
	case GenerationV2AndV2Beta1:
		return "v2+v2beta1"
	case GenerationV2Beta1:
		return "v2beta1"
	case GenerationLegacy:
		return "legacy"
	}
	return fmt.Sprintf("Generation(%d)", int(g))
}

// ParseGeneration is the inverse of String, for command-line flags.
func ParseGeneration(s string) (Generation, error) {
	for g := GenerationV2; g <= GenerationLegacy; g++ {
		if g.String() == s {
			return g, nil
		}
	}
	return 0, fmt.Errorf("discoverytest: unknown generation %q (want v2, v2+v2beta1, v2beta1 or legacy)", s)
}

// gitVersion is what /version reports for each generation.
func (g Generation) gitVersion() (major, minor, git string) {
	switch g {
	case GenerationV2AndV2Beta1:
		return "1", "31", "v1.31.14"
	case GenerationV2Beta1:
		return "1", "28", "v1.28.15"
	case GenerationLegacy:
		return "1", "25", "v1.25.16"
	}
	return "1", "36", "v1.36.3"
}

// The real handler stopped serving v2beta1 in 1.35 (its feature gate is
// locked on), so older generations get this thin layer in front of it: it
// negotiates among the versions the generation speaks, passes v2 to the real
// handler, and answers v2beta1 by converting the real handler's v2 document
// with the conversions k8s.io/apiserver registers for that purpose.

// discoveryRestrictions admits exactly the aggregated discovery versions a
// generation serves, in the role aggregated.DiscoveryEndpointRestrictions
// plays for the current one.
type discoveryRestrictions struct{ v2, v2beta1 bool }

func (d discoveryRestrictions) AllowsMediaTypeTransform(_, _ string, gvk *schema.GroupVersionKind) bool {
	if gvk == nil || gvk.Group != apidiscoveryv2.SchemeGroupVersion.Group || gvk.Kind != "APIGroupDiscoveryList" {
		return false
	}
	return (gvk.Version == "v2" && d.v2) || (gvk.Version == "v2beta1" && d.v2beta1)
}
func (discoveryRestrictions) AllowsServerVersion(string) bool  { return false }
func (discoveryRestrictions) AllowsStreamSchema(s string) bool { return s == "watch" }

type olderGeneration struct {
	restrictions discoveryRestrictions
	codecs       serializer.CodecFactory
	v2           http.Handler // the real wrapped handler; nil for GenerationV2Beta1
	aggregated   http.Handler // the real aggregated handler, source of the document
	legacy       http.Handler
}

func newOlderGeneration(gen Generation, v2, aggregated, legacy http.Handler) *olderGeneration {
	scheme := runtime.NewScheme()
	utilruntime.Must(apidiscoveryv2.AddToScheme(scheme))
	utilruntime.Must(apidiscoveryv2beta1.AddToScheme(scheme))
	utilruntime.Must(apidiscoveryv2conversion.RegisterConversions(scheme))
	o := &olderGeneration{
		restrictions: discoveryRestrictions{v2: gen == GenerationV2AndV2Beta1, v2beta1: true},
		codecs:       serializer.NewCodecFactory(scheme),
		aggregated:   aggregated,
		legacy:       legacy,
	}
	if o.restrictions.v2 {
		o.v2 = v2
	}
	return o
}

func (o *olderGeneration) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	mediaType, ok := negotiation.NegotiateMediaTypeOptions(r.Header.Get("Accept"), o.codecs.SupportedMediaTypes(), o.restrictions)
	switch {
	case !ok || mediaType.Convert == nil:
		o.legacy.ServeHTTP(w, r)
	case mediaType.Convert.Version == "v2":
		o.v2.ServeHTTP(w, r)
	default:
		o.serveV2Beta1(w, r)
	}
}

func (o *olderGeneration) serveV2Beta1(w http.ResponseWriter, r *http.Request) {
	// Read the current v2 document from the real handler, in process.
	inner := httptest.NewRequest(http.MethodGet, r.URL.Path, nil).WithContext(r.Context())
	inner.Header.Set("Accept", "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList")
	rec := httptest.NewRecorder()
	o.aggregated.ServeHTTP(rec, inner)
	var list apidiscoveryv2.APIGroupDiscoveryList
	if rec.Code != http.StatusOK {
		responsewriters.InternalError(w, r, fmt.Errorf("aggregated discovery answered %d", rec.Code))
		return
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &list); err != nil {
		responsewriters.InternalError(w, r, err)
		return
	}
	// A 1.26–1.32 server hashed the object before conversion, so v2 and
	// v2beta1 responses share an ETag, as JSON and protobuf do.
	etag := rec.Header().Get("ETag")
	w.Header().Set("ETag", etag)
	w.Header().Set("Vary", "Accept")
	w.Header().Set("Cache-Control", "public")
	if r.Header.Get("If-None-Match") == etag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	responsewriters.WriteObjectNegotiated(o.codecs, o.restrictions, apidiscoveryv2beta1.SchemeGroupVersion, w, r, http.StatusOK, &list, true)
}
