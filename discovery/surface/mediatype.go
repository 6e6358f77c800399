package surface

import (
	"fmt"
	"mime"
)

// The media types of discovery documents, which a client lists in its
// Accept header and a server names in its Content-Type: plain JSON or
// Kubernetes protobuf for legacy discovery, and the same with the
// apidiscovery.k8s.io parameters for aggregated discovery.
const (
	jsonType     = "application/json"
	protobufType = "application/vnd.kubernetes.protobuf"
)

// MediaType is the media type of a document of s's form, with an optional
// profile parameter for aggregated discovery (KEP-4020's "nopeer"):
// "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
// for Source{Format: FormatAggregatedV2}, "application/json" for
// Source{Format: FormatLegacy}.
func (s Source) MediaType(profile string) string {
	base := jsonType
	if s.Protobuf {
		base = protobufType
	}
	version := "v2"
	switch s.Format {
	case FormatLegacy:
		return base
	case FormatAggregatedV2Beta1:
		version = "v2beta1"
	}
	t := base + ";g=apidiscovery.k8s.io;v=" + version + ";as=APIGroupDiscoveryList"
	if profile != "" {
		t += ";profile=" + profile
	}
	return t
}

// ParseMediaType reads the Content-Type of a discovery response: the
// form of the document it names, legacy (FormatLegacy) or aggregated. It
// fails for anything that is not JSON or Kubernetes protobuf, and for
// aggregated types it does not know.
func ParseMediaType(contentType string) (Source, error) {
	base, params, err := mime.ParseMediaType(contentType)
	if err != nil {
		return Source{}, fmt.Errorf("content type %q: %w", contentType, err)
	}
	var s Source
	switch base {
	case jsonType:
	case protobufType:
		s.Protobuf = true
	default:
		return Source{}, fmt.Errorf("content type %q is neither JSON nor Kubernetes protobuf", contentType)
	}
	g, v, as := params["g"], params["v"], params["as"]
	switch {
	case g == "" && v == "" && as == "":
		s.Format = FormatLegacy
	case g != "apidiscovery.k8s.io" || as != "APIGroupDiscoveryList":
		return Source{}, fmt.Errorf("content type %q is not a known aggregated discovery type", contentType)
	case v == "v2":
		s.Format = FormatAggregatedV2
	case v == "v2beta1":
		s.Format = FormatAggregatedV2Beta1
	default:
		return Source{}, fmt.Errorf("content type %q is not a known aggregated discovery type", contentType)
	}
	return s, nil
}

// apiVersion is the apiVersion of an aggregated document of s's form.
func (s Source) apiVersion() string {
	if s.Format == FormatAggregatedV2Beta1 {
		return "apidiscovery.k8s.io/v2beta1"
	}
	return "apidiscovery.k8s.io/v2"
}
