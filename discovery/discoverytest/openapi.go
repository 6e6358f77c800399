package discoverytest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/kube-openapi/pkg/cached"
	"k8s.io/kube-openapi/pkg/handler3"
	"k8s.io/kube-openapi/pkg/spec3"

	"github.com/kubeatlas/kubeatlas/internal/mediatype"
)

// openAPIPath is the key handler3 serves a group-version under:
// "api/v1" or "apis/<group>/<version>".
func openAPIPath(gv schema.GroupVersion) string { return mediatype.OpenAPIPath(gv.Group, gv.Version) }

// registerOpenAPI publishes one group-version's synthetic document to the
// real handler3 service. The document is generated lazily, once, on the
// first request that needs it (the root needs them all, for their hashes),
// and once per fleet when shared is not nil.
func registerOpenAPI(svc *handler3.OpenAPIService, gv schema.GroupVersion, v apidiscoveryv2.APIVersionDiscovery, revision int, shared *specCache) {
	v = *v.DeepCopy()
	key := fmt.Sprintf("%s@%d", gv, revision)
	doc := cached.Once(cached.Func(func() (*spec3.OpenAPI, string, error) {
		doc, err := syntheticOpenAPI(gv, v, revision)
		return doc, key, err
	}))
	if shared != nil {
		doc = shared.get(key, v, doc)
	}
	svc.UpdateGroupVersionLazy(openAPIPath(gv), doc)
}

// registerOpenAPIExtra publishes a small document for a non-group-version
// path, like the real server's "apis/apps" or "version" documents.
func registerOpenAPIExtra(svc *handler3.OpenAPIService, path string) {
	svc.UpdateGroupVersionLazy(path, cached.Once(cached.Func(func() (*spec3.OpenAPI, string, error) {
		doc, err := toOpenAPI(path, map[string]any{
			"openapi": "3.0.0",
			"info":    map[string]any{"title": "Kubernetes", "version": "v1.36.3"},
			"paths": map[string]any{
				"/" + path + "/": map[string]any{"get": map[string]any{
					"operationId": "getAPIResources",
					"description": "get information of " + path,
					"responses":   map[string]any{"200": map[string]any{"description": "OK"}},
				}},
			},
		})
		return doc, path, err
	})))
}

// openAPIFront adapts handler3 to what a kube-apiserver answers in front of
// it (the kube-aggregator's OpenAPI v3 proxy): an unknown group-version is a
// 404, and the root is served as sniffed text without an ETag, so
// If-None-Match never matches it.
type openAPIFront struct {
	svc   *handler3.OpenAPIService
	known func(path string) bool
}

func (o openAPIFront) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/openapi/v3" {
		r = r.Clone(r.Context())
		r.Header.Del("If-None-Match")
		o.svc.HandleDiscovery(rootHeaderWriter{w}, r)
		return
	}
	if !o.known(strings.TrimPrefix(r.URL.Path, "/openapi/v3/")) {
		w.WriteHeader(http.StatusNotFound)
		return
	}
	o.svc.HandleGroupVersion(w, r)
}

// rootHeaderWriter rewrites the root's headers as they are written.
type rootHeaderWriter struct{ http.ResponseWriter }

func (w rootHeaderWriter) WriteHeader(code int) {
	w.Header().Del("Etag")
	if w.Header().Get("Content-Type") == "application/json" {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w rootHeaderWriter) Write(b []byte) (int, error) {
	if w.Header().Get("Etag") != "" {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}

// definitionPrefix names a group-version's schemas the way the real server
// does for built-in groups (io.k8s.api.apps.v1) and CRDs (reversed domain).
func definitionPrefix(gv schema.GroupVersion) string {
	switch {
	case gv.Group == "":
		return "io.k8s.api.core." + gv.Version
	case !strings.Contains(gv.Group, "."):
		return "io.k8s.api." + gv.Group + "." + gv.Version
	case strings.HasSuffix(gv.Group, ".k8s.io"):
		return "io.k8s.api." + strings.SplitN(gv.Group, ".", 2)[0] + "." + gv.Version
	}
	labels := strings.Split(gv.Group, ".")
	slices.Reverse(labels)
	return strings.Join(labels, ".") + "." + gv.Version
}

const (
	metaPrefix = "io.k8s.apimachinery.pkg.apis.meta.v1."
	corePrefix = "io.k8s.api.core.v1."
	filler     = "The value is validated by the API server on create and update; when omitted the server applies its default, " +
		"and clients should not depend on the exact format of the value, which may change between releases. More info: " +
		"https://kubernetes.io/docs/concepts/overview/working-with-objects/"
)

func ref(name string) map[string]any { return map[string]any{"$ref": "#/components/schemas/" + name} }

// wrapped is how Kubernetes attaches a description to a reference.
func wrapped(name, description string) map[string]any {
	return map[string]any{"allOf": []any{ref(name)}, "default": map[string]any{}, "description": description}
}

func field(typ, description string) map[string]any {
	return map[string]any{"type": typ, "description": description}
}

// syntheticOpenAPI builds a group-version document shaped like the real
// server's: one schema per kind carrying x-kubernetes-group-version-kind,
// spec/status/list schemas, the shared metadata and pod template types, and
// get/list paths per resource. Revision is folded into descriptions so that
// a schema change changes the document's hash.
func syntheticOpenAPI(gv schema.GroupVersion, v apidiscoveryv2.APIVersionDiscovery, revision int) (*spec3.OpenAPI, error) {
	prefix := definitionPrefix(gv)
	schemas := sharedSchemas()
	paths := map[string]any{}
	base := "/apis/" + gv.String()
	if gv.Group == "" {
		base = "/api/" + gv.Version
	}
	for _, r := range v.Resources {
		if r.ResponseKind == nil || r.ResponseKind.Kind == "" {
			continue
		}
		kind := r.ResponseKind.Kind
		gvk := []any{map[string]any{"group": gv.Group, "version": gv.Version, "kind": kind}}
		name := prefix + "." + kind
		schemas[name] = map[string]any{
			"description": fmt.Sprintf("%s is a synthetic kind served by %s (schema revision %d). %s", kind, gv, revision, filler),
			"type":        "object",
			"properties": map[string]any{
				"apiVersion": field("string", "APIVersion defines the versioned schema of this representation of an object. "+filler),
				"kind":       field("string", "Kind is a string value representing the REST resource this object represents. "+filler),
				"metadata":   wrapped(metaPrefix+"ObjectMeta", "Standard object's metadata. "+filler),
				"spec":       wrapped(name+"Spec", "Spec defines the desired state of the "+kind+". "+filler),
				"status":     wrapped(name+"Status", "Status is the most recently observed status of the "+kind+". "+filler),
			},
			"x-kubernetes-group-version-kind": gvk,
		}
		// A kind's spec named like a shared type (Pod's PodSpec) is the
		// shared type, as in the real server's documents, where a schema
		// name means the same thing in every group-version.
		if _, shared := schemas[name+"Spec"]; !shared {
			schemas[name+"Spec"] = kindSpec(kind)
		}
		schemas[name+"Status"] = kindStatus(kind)
		schemas[name+"List"] = map[string]any{
			"description": kind + "List is a list of " + kind + ".",
			"type":        "object",
			"required":    []any{"items"},
			"properties": map[string]any{
				"apiVersion": field("string", "APIVersion defines the versioned schema of this representation of an object."),
				"kind":       field("string", "Kind is a string value representing the REST resource this object represents."),
				"metadata":   wrapped(metaPrefix+"ListMeta", "Standard list metadata."),
				"items":      map[string]any{"type": "array", "description": "Items is the list of " + kind + ".", "items": wrapped(name, "")},
			},
			"x-kubernetes-group-version-kind": []any{map[string]any{"group": gv.Group, "version": gv.Version, "kind": kind + "List"}},
		}
		collection := base + "/" + r.Resource
		if r.Scope == apidiscoveryv2.ScopeNamespace {
			collection = base + "/namespaces/{namespace}/" + r.Resource
		}
		paths[collection] = map[string]any{"get": operation("list", "list"+kind, "list or watch objects of kind "+kind, name+"List", gvk)}
		paths[collection+"/{name}"] = map[string]any{"get": operation("get", "read"+kind, "read the specified "+kind, name, gvk)}
	}
	doc := map[string]any{
		"openapi":    "3.0.0",
		"info":       map[string]any{"title": "Kubernetes", "version": "v1.36.3"},
		"paths":      paths,
		"components": map[string]any{"schemas": schemas},
	}
	return toOpenAPI(gv.String(), doc)
}

func toOpenAPI(name string, doc map[string]any) (*spec3.OpenAPI, error) {
	raw, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	out := &spec3.OpenAPI{}
	if err := json.Unmarshal(raw, out); err != nil {
		return nil, fmt.Errorf("discoverytest: synthetic OpenAPI for %s: %w", name, err)
	}
	return out, nil
}

func operation(action, id, description, schemaName string, gvk []any) map[string]any {
	return map[string]any{
		"operationId": id,
		"description": description,
		"responses": map[string]any{
			"200": map[string]any{
				"description": "OK",
				"content": map[string]any{
					"application/json": map[string]any{"schema": ref(schemaName)},
				},
			},
			"401": map[string]any{"description": "Unauthorized"},
		},
		"x-kubernetes-action":             action,
		"x-kubernetes-group-version-kind": gvk[0],
	}
}

func kindSpec(kind string) map[string]any {
	props := map[string]any{
		"replicas": field("integer", "Number of desired replicas of the "+kind+". "+filler),
		"selector": wrapped(metaPrefix+"LabelSelector", "Label query over the objects this "+kind+" manages. "+filler),
		"template": wrapped(corePrefix+"PodTemplateSpec", "Template describes the pods that will be created. "+filler),
	}
	types := []string{"string", "integer", "boolean"}
	for i := range 24 {
		props[fmt.Sprintf("setting%02d", i)] = field(types[i%3], fmt.Sprintf("Setting %d of the %s. %s", i, kind, filler))
	}
	props["tags"] = map[string]any{"type": "array", "items": map[string]any{"type": "string", "default": ""}, "description": "Tags of the " + kind + ". " + filler}
	return map[string]any{"type": "object", "description": kind + "Spec is the specification of a " + kind + ".", "properties": props}
}

func kindStatus(kind string) map[string]any {
	props := map[string]any{
		"observedGeneration": field("integer", "The generation observed by the controller. "+filler),
		"conditions": map[string]any{
			"type":        "array",
			"description": "Conditions of the " + kind + ". " + filler,
			"items":       wrapped(metaPrefix+"Condition", ""),
		},
	}
	for i := range 12 {
		props[fmt.Sprintf("observed%02d", i)] = field("string", fmt.Sprintf("Observation %d of the %s. %s", i, kind, filler))
	}
	return map[string]any{"type": "object", "description": kind + "Status is the observed state of a " + kind + ".", "properties": props}
}

// sharedSchemas are the metadata and pod types that every real group-version
// document repeats; aggregating documents must de-duplicate them.
func sharedSchemas() map[string]any {
	str := func(d string) map[string]any { return field("string", d+" "+filler) }
	stringMap := func(d string) map[string]any {
		return map[string]any{"type": "object", "additionalProperties": map[string]any{"type": "string", "default": ""}, "description": d}
	}
	return map[string]any{
		metaPrefix + "Time": map[string]any{"type": "string", "format": "date-time", "description": "Time is a wrapper around time.Time which supports correct marshaling to YAML and JSON."},
		metaPrefix + "ObjectMeta": map[string]any{
			"type":        "object",
			"description": "ObjectMeta is metadata that all persisted resources must have, which includes all objects users must create.",
			"properties": map[string]any{
				"name":              str("Name must be unique within a namespace."),
				"namespace":         str("Namespace defines the space within which each name must be unique."),
				"uid":               str("UID is the unique in time and space value for this object."),
				"resourceVersion":   str("An opaque value that represents the internal version of this object."),
				"generation":        field("integer", "A sequence number representing a specific generation of the desired state."),
				"labels":            stringMap("Map of string keys and values that can be used to organize and categorize objects."),
				"annotations":       stringMap("Annotations is an unstructured key value map stored with a resource."),
				"creationTimestamp": wrapped(metaPrefix+"Time", "CreationTimestamp is a timestamp representing the server time when this object was created."),
				// As the real server's: server-side apply tooling (openapi3/typed's
				// Extractor) converts a whole object, its managedFields included.
				"managedFields": map[string]any{
					"type":                   "array",
					"description":            "ManagedFields maps workflow-id and version to the set of fields that are managed by that workflow.",
					"items":                  map[string]any{"allOf": []any{ref(metaPrefix + "ManagedFieldsEntry")}, "default": map[string]any{}},
					"x-kubernetes-list-type": "atomic",
				},
			},
		},
		metaPrefix + "ManagedFieldsEntry": map[string]any{
			"type":        "object",
			"description": "ManagedFieldsEntry is a workflow-id, a FieldSet and the group version of the resource that the fieldset applies to.",
			"properties": map[string]any{
				"manager":     str("Manager is an identifier of the workflow managing these fields."),
				"operation":   str("Operation is the type of operation which lead to this ManagedFieldsEntry being created."),
				"apiVersion":  str("APIVersion defines the version of this resource that this field set applies to."),
				"time":        wrapped(metaPrefix+"Time", "Time is the timestamp of when the ManagedFields entry was added."),
				"fieldsType":  str("FieldsType is the discriminator for the different fields format and version."),
				"fieldsV1":    wrapped(metaPrefix+"FieldsV1", "FieldsV1 holds the first JSON version format as described in the \"FieldsV1\" type."),
				"subresource": str("Subresource is the name of the subresource used to update that object."),
			},
		},
		metaPrefix + "FieldsV1": map[string]any{"type": "object", "description": "FieldsV1 stores a set of fields in a data structure like a Trie, in JSON format."},
		metaPrefix + "ListMeta": map[string]any{
			"type":        "object",
			"description": "ListMeta describes metadata that synthetic resources must have.",
			"properties": map[string]any{
				"continue":        str("continue may be set if the user set a limit on the number of items returned."),
				"resourceVersion": str("String that identifies the server's internal version of this object."),
			},
		},
		metaPrefix + "LabelSelector": map[string]any{
			"type":                  "object",
			"description":           "A label selector is a label query over a set of resources.",
			"properties":            map[string]any{"matchLabels": stringMap("matchLabels is a map of {key,value} pairs.")},
			"x-kubernetes-map-type": "atomic",
		},
		metaPrefix + "Condition": map[string]any{
			"type":        "object",
			"description": "Condition contains details for one aspect of the current state of this API Resource.",
			"required":    []any{"type", "status"},
			"properties": map[string]any{
				"type":    str("type of condition in CamelCase or in foo.example.com/CamelCase."),
				"status":  str("status of the condition, one of True, False, Unknown."),
				"reason":  str("reason contains a programmatic identifier indicating the reason for the condition's last transition."),
				"message": str("message is a human readable message indicating details about the transition."),
			},
		},
		corePrefix + "PodTemplateSpec": map[string]any{
			"type":        "object",
			"description": "PodTemplateSpec describes the data a pod should have when created from a template",
			"properties": map[string]any{
				"metadata": wrapped(metaPrefix+"ObjectMeta", "Standard object's metadata."),
				"spec":     wrapped(corePrefix+"PodSpec", "Specification of the desired behavior of the pod."),
			},
		},
		corePrefix + "PodSpec": map[string]any{
			"type":        "object",
			"description": "PodSpec is a description of a pod.",
			"required":    []any{"containers"},
			"properties": map[string]any{
				"containers": map[string]any{
					"type":        "array",
					"description": "List of containers belonging to the pod. " + filler,
					"items":       wrapped(corePrefix+"Container", ""),
				},
				"nodeName":           str("NodeName indicates in which node this pod is scheduled."),
				"serviceAccountName": str("ServiceAccountName is the name of the ServiceAccount to use to run this pod."),
			},
		},
		corePrefix + "Container": map[string]any{
			"type":        "object",
			"description": "A single application container that you want to run within a pod.",
			"required":    []any{"name"},
			"properties": map[string]any{
				"name":  str("Name of the container specified as a DNS_LABEL."),
				"image": str("Container image name."),
				"args":  map[string]any{"type": "array", "items": map[string]any{"type": "string", "default": ""}, "description": "Arguments to the entrypoint. " + filler},
			},
		},
	}
}
