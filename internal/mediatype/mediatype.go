// Package mediatype names where OpenAPI v3 documents are served, for
// openapi3 and the fake servers alike. (The media types of discovery
// documents are package discovery/surface's: Source.MediaType and
// ParseMediaType.)
package mediatype

// OpenAPIPath is the path under /openapi/v3 of a group-version's document:
// "api/v1" for the core group, "apis/<group>/<version>" otherwise.
func OpenAPIPath(group, version string) string {
	if group == "" {
		return "api/" + version
	}
	return "apis/" + group + "/" + version
}
