// Package mediatype names the media types of Kubernetes discovery and
// parses the Content-Type a server answers with.
package mediatype

import (
	"fmt"
	"mime"
)

const (
	JSON     = "application/json"
	Protobuf = "application/vnd.kubernetes.protobuf"

	discoveryParams = ";g=apidiscovery.k8s.io;v=%s;as=APIGroupDiscoveryList"
)

// Aggregated returns the media type of aggregated discovery in the given
// version ("v2" or "v2beta1"), as JSON or protobuf, with an optional
// profile parameter (KEP-4020's "nopeer").
func Aggregated(version string, protobuf bool, profile string) string {
	base := JSON
	if protobuf {
		base = Protobuf
	}
	s := base + fmt.Sprintf(discoveryParams, version)
	if profile != "" {
		s += ";profile=" + profile
	}
	return s
}

// Discovery is what a discovery response's Content-Type says about its body.
type Discovery struct {
	// Aggregated is true for an APIGroupDiscoveryList, false for legacy
	// discovery (APIVersions, APIGroupList, APIResourceList).
	Aggregated bool
	Version    string // "v2" or "v2beta1" when Aggregated
	Protobuf   bool
}

// ParseDiscovery reads a Content-Type header. It fails for anything that is
// not JSON or Kubernetes protobuf, and for aggregated types it does not know.
func ParseDiscovery(contentType string) (Discovery, error) {
	base, params, err := mime.ParseMediaType(contentType)
	if err != nil {
		return Discovery{}, fmt.Errorf("content type %q: %w", contentType, err)
	}
	var d Discovery
	switch base {
	case JSON:
	case Protobuf:
		d.Protobuf = true
	default:
		return Discovery{}, fmt.Errorf("content type %q is neither JSON nor Kubernetes protobuf", contentType)
	}
	g, v, as := params["g"], params["v"], params["as"]
	if g == "" && v == "" && as == "" {
		return d, nil
	}
	if g != "apidiscovery.k8s.io" || as != "APIGroupDiscoveryList" || (v != "v2" && v != "v2beta1") {
		return Discovery{}, fmt.Errorf("content type %q is not a known aggregated discovery type", contentType)
	}
	d.Aggregated, d.Version = true, v
	return d, nil
}

// OpenAPIPath is the path under /openapi/v3 of a group-version's document:
// "api/v1" for the core group, "apis/<group>/<version>" otherwise.
func OpenAPIPath(group, version string) string {
	if group == "" {
		return "api/" + version
	}
	return "apis/" + group + "/" + version
}
