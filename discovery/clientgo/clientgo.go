// Package clientgo adapts kubeatlas's discovery to client-go's discovery
// interfaces, for code that takes those: client-go's restmapper, dynamic
// informers, controller-runtime, kubectl-style commands.
//
// It is a package of its own so that a program that imports only
// discovery does not link client-go's discovery package and, through it,
// every built-in API type (client-go's scheme).
//
// # Files
//
// clientgo.go: [Discovery] (the adapter) and [View] (a snapshot in
// client-go's types).
package clientgo

import (
	"context"
	"errors"
	"sync/atomic"

	openapi_v2 "github.com/google/gnostic-models/openapiv2"
	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"
	cgdiscovery "k8s.io/client-go/discovery"
	"k8s.io/client-go/openapi"
	"k8s.io/client-go/rest"

	"github.com/kubeatlas/kubeatlas/discovery"
	"github.com/kubeatlas/kubeatlas/discovery/metaview"
	"github.com/kubeatlas/kubeatlas/internal/httpx"
)

// Discovery adapts a discovery.Client to client-go's discovery interfaces, so that
// restmapper.NewDeferredDiscoveryRESTMapper, dynamic informers,
// controller-runtime and kubectl-style code accept kubeatlas unchanged.
//
// Reads come from the client's snapshot, converted to client-go's types once
// per snapshot. Invalidate makes the next read revalidate, which costs two
// 304s on an unchanged cluster instead of a full download. Where it differs
// from client-go: a Stale group-version keeps its last known resources (and
// is still reported failed), so kinds served by a briefly unreachable
// aggregated API server keep their REST mappings; one with none (never
// reached) is left out of its group, as client-go leaves every Stale one. ServerVersion, OpenAPI v2
// and RESTClient are client-go's own, on the same connection; so is OpenAPI
// v3 unless WithOpenAPIV3 gives another client (kubeatlas's, say:
// openapi3/clientgo.New).
//
// Other differences, each for a reason a user sees: the Accept header asks
// for protobuf v2 first, then JSON v2, v2beta1 and legacy JSON (smaller,
// faster reads; client-go asks for JSON v2 then legacy JSON); a legacy
// document that names another group-version than the one asked for is an
// error (client-go files its resources under the name it gives, mixing two
// versions); GroupsAndMaybeResources returns resources and failures from
// legacy servers too (one snapshot answers everything); a group a legacy
// server lists twice is one group with the versions of both (client-go
// answers both entries; a snapshot has one group per name and drops no
// version). client-go v0.37.2's
// own tests run against this adapter in conformance/clientgo.
//
// The conversion of the latest snapshot is kept (one per adapter); a
// refresh that found nothing changed (two 304s) keeps the same generation
// and so the same conversion.
//
// As with client-go's memory cache, returned objects are shared between
// callers: do not modify them.
type Discovery struct {
	c           *discovery.Client
	delegate    *cgdiscovery.DiscoveryClient
	openAPIV3   openapi.Client // nil: the delegate's
	invalidated atomic.Bool
	retry       atomic.Bool // the last read saw a failure that may pass
	last        atomic.Pointer[converted]
}

// converted is the conversion of one snapshot generation.
type converted struct {
	generation uint64
	view       *view
	transient  bool // a group-version failed for a reason that may pass
}

// Option configures a Discovery.
type Option func(*Discovery) error

// WithOpenAPIV3 makes OpenAPIV3 (and OpenAPIV3WithContext) return oc, so
// that code reading OpenAPI v3 through the discovery interface, as kubectl
// explain does, gets kubeatlas's documents (openapi3/clientgo.New(oc): one
// root read, the disk cache, documents indexed) instead of client-go's.
// Default: client-go's own OpenAPI v3 client on the same connection.
func WithOpenAPIV3(oc openapi.Client) Option {
	return func(a *Discovery) error { a.openAPIV3 = oc; return nil }
}

var (
	_ cgdiscovery.DiscoveryInterface                      = (*Discovery)(nil)
	_ cgdiscovery.DiscoveryInterfaceWithContext           = (*Discovery)(nil)
	_ cgdiscovery.CachedDiscoveryInterface                = (*Discovery)(nil)
	_ cgdiscovery.CachedDiscoveryInterfaceWithContext     = (*Discovery)(nil)
	_ cgdiscovery.AggregatedDiscoveryInterface            = (*Discovery)(nil)
	_ cgdiscovery.AggregatedDiscoveryInterfaceWithContext = (*Discovery)(nil)
)

// New wraps c for client-go. What kubeatlas does not replace goes through
// c's connection (discovery.Client.Connection).
func New(c *discovery.Client, opts ...Option) (*Discovery, error) {
	hc, cfg := c.Connection()
	delegate, err := cgdiscovery.NewDiscoveryClientForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, err
	}
	a := &Discovery{c: c, delegate: delegate}
	for _, opt := range opts {
		if err := opt(a); err != nil {
			return nil, err
		}
	}
	return a, nil
}

// view is a snapshot in client-go's types.
type view = metaview.View

func (a *Discovery) view(ctx context.Context) (*view, error) {
	var s *discovery.Snapshot
	var err error
	if a.invalidated.Swap(false) || a.retry.Swap(false) {
		s, err = a.c.Refresh(ctx)
	} else {
		s, err = a.c.Snapshot(ctx)
	}
	if s == nil {
		// Nothing to answer with: as client-go's memory cache, the next
		// read asks the server again.
		a.retry.Store(true)
		return nil, err
	}
	last := a.last.Load()
	if last == nil || last.generation != s.Generation() {
		last = &converted{generation: s.Generation(), view: toClientGo(metaview.Of(s))}
		last.transient = hasTransient(s)
		a.last.Store(last)
	}
	if last.transient {
		// A group-version failed for a reason that may pass (a 5xx, a
		// reset connection): as client-go's memory cache, the next read
		// asks again rather than answering the failure until
		// Invalidate or the max age.
		a.retry.Store(true)
	}
	return last.view, nil
}

// hasTransient reports whether a group-version of s failed for a reason
// that may pass.
func hasTransient(s *discovery.Snapshot) bool {
	var partial *discovery.PartialError
	if !errors.As(s.Err(), &partial) {
		return false
	}
	for _, gve := range partial.Errors {
		if !errors.Is(gve.Err, discovery.ErrStale) && httpx.IsTransient(gve.Err) {
			return true
		}
	}
	return false
}

// toClientGo gives v's failures client-go's types: a Stale group-version's
// is client-go's StaleGroupVersionError, as client-go's aggregated
// discovery reports it.
func toClientGo(v *view) *view {
	for gv, err := range v.Failed {
		if errors.Is(err, discovery.ErrStale) {
			v.Failed[gv] = staleGroupVersionError(gv)
		}
	}
	return v
}

// staleGroupVersionError is client-go's StaleGroupVersionError for gv,
// which only client-go's package can build (its field is unexported): it
// is taken from client-go's own conversion of a Stale group-version.
func staleGroupVersionError(gv schema.GroupVersion) error {
	_, _, failed := cgdiscovery.SplitGroupsAndResources(apidiscoveryv2.APIGroupDiscoveryList{Items: []apidiscoveryv2.APIGroupDiscovery{{
		ObjectMeta: metav1.ObjectMeta{Name: gv.Group},
		Versions:   []apidiscoveryv2.APIVersionDiscovery{{Version: gv.Version, Freshness: apidiscoveryv2.DiscoveryFreshnessStale}},
	}}})
	return failed[gv]
}

// View is the snapshot in client-go's types, exactly as Discovery answers
// GroupsAndMaybeResources for it: the groups in server order, each
// group-version's resources, and the group-versions that are not current.
// Each call converts anew.
func View(s *discovery.Snapshot) (*metav1.APIGroupList, map[schema.GroupVersion]*metav1.APIResourceList, map[schema.GroupVersion]error) {
	v := metaview.Of(s)
	return v.Groups, v.Resources, v.Failed
}

// GroupsAndMaybeResourcesWithContext answers from the snapshot: every group,
// every group-version's resources, and the group-versions that are not
// current.
func (a *Discovery) GroupsAndMaybeResourcesWithContext(ctx context.Context) (*metav1.APIGroupList, map[schema.GroupVersion]*metav1.APIResourceList, map[schema.GroupVersion]error, error) {
	v, err := a.view(ctx)
	if v == nil {
		return nil, nil, nil, err
	}
	return v.Groups, v.Resources, v.Failed, nil
}

func (a *Discovery) GroupsAndMaybeResources() (*metav1.APIGroupList, map[schema.GroupVersion]*metav1.APIResourceList, map[schema.GroupVersion]error, error) {
	return a.GroupsAndMaybeResourcesWithContext(context.Background())
}

func (a *Discovery) ServerGroupsWithContext(ctx context.Context) (*metav1.APIGroupList, error) {
	v, err := a.view(ctx)
	if v == nil {
		return nil, err
	}
	return v.Groups, nil
}

func (a *Discovery) ServerGroups() (*metav1.APIGroupList, error) {
	return a.ServerGroupsWithContext(context.Background())
}

func (a *Discovery) ServerResourcesForGroupVersionWithContext(ctx context.Context, groupVersion string) (*metav1.APIResourceList, error) {
	gv, err := schema.ParseGroupVersion(groupVersion)
	if err != nil {
		return nil, err
	}
	v, err := a.view(ctx)
	if v == nil {
		return nil, err
	}
	if list, ok := v.Resources[gv]; ok {
		return list, nil
	}
	if err, ok := v.Failed[gv]; ok {
		return nil, err
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Group: gv.Group, Resource: "groupversion"}, gv.String())
}

func (a *Discovery) ServerResourcesForGroupVersion(groupVersion string) (*metav1.APIResourceList, error) {
	return a.ServerResourcesForGroupVersionWithContext(context.Background(), groupVersion)
}

// ServerGroupsAndResourcesWithContext answers as client-go's function of
// that name, the resources in the groups' and versions' order (client-go's
// order for legacy servers, which it does not keep for aggregated ones).
func (a *Discovery) ServerGroupsAndResourcesWithContext(ctx context.Context) ([]*metav1.APIGroup, []*metav1.APIResourceList, error) {
	v, err := a.view(ctx)
	if v == nil {
		return nil, nil, err
	}
	groups := make([]*metav1.APIGroup, 0, len(v.Groups.Groups))
	resources := []*metav1.APIResourceList{}
	for i := range v.Groups.Groups {
		g := &v.Groups.Groups[i]
		groups = append(groups, g)
		for _, ver := range g.Versions {
			if l, ok := v.Resources[schema.GroupVersion{Group: g.Name, Version: ver.Version}]; ok {
				resources = append(resources, l)
			}
		}
	}
	if len(v.Failed) > 0 {
		return groups, resources, &cgdiscovery.ErrGroupDiscoveryFailed{Groups: v.Failed}
	}
	return groups, resources, nil
}

func (a *Discovery) ServerGroupsAndResources() ([]*metav1.APIGroup, []*metav1.APIResourceList, error) {
	return a.ServerGroupsAndResourcesWithContext(context.Background())
}

func (a *Discovery) ServerPreferredResourcesWithContext(ctx context.Context) ([]*metav1.APIResourceList, error) {
	return cgdiscovery.ServerPreferredResourcesWithContext(ctx, a)
}

func (a *Discovery) ServerPreferredResources() ([]*metav1.APIResourceList, error) {
	return a.ServerPreferredResourcesWithContext(context.Background())
}

func (a *Discovery) ServerPreferredNamespacedResourcesWithContext(ctx context.Context) ([]*metav1.APIResourceList, error) {
	return cgdiscovery.ServerPreferredNamespacedResourcesWithContext(ctx, a)
}

func (a *Discovery) ServerPreferredNamespacedResources() ([]*metav1.APIResourceList, error) {
	return a.ServerPreferredNamespacedResourcesWithContext(context.Background())
}

// Fresh is false until the first read and after Invalidate, until the next
// read has revalidated.
func (a *Discovery) Fresh() bool { return a.c.Current() != nil && !a.invalidated.Load() }

func (a *Discovery) FreshWithContext(context.Context) bool { return a.Fresh() }

// Invalidate makes the next read revalidate with the server (conditionally).
func (a *Discovery) Invalidate() { a.invalidated.Store(true) }

func (a *Discovery) InvalidateWithContext(context.Context) { a.Invalidate() }

func (a *Discovery) RESTClient() rest.Interface { return a.delegate.RESTClient() }

func (a *Discovery) ServerVersion() (*version.Info, error) { return a.delegate.ServerVersion() }

func (a *Discovery) ServerVersionWithContext(ctx context.Context) (*version.Info, error) {
	return a.delegate.ServerVersionWithContext(ctx)
}

func (a *Discovery) OpenAPISchema() (*openapi_v2.Document, error) { return a.delegate.OpenAPISchema() }

func (a *Discovery) OpenAPISchemaWithContext(ctx context.Context) (*openapi_v2.Document, error) {
	return a.delegate.OpenAPISchemaWithContext(ctx)
}

func (a *Discovery) OpenAPIV3() openapi.Client {
	if a.openAPIV3 != nil {
		return a.openAPIV3
	}
	return a.delegate.OpenAPIV3()
}

func (a *Discovery) OpenAPIV3WithContext(ctx context.Context) openapi.ClientWithContext {
	if a.openAPIV3 != nil {
		return openapi.ToClientWithContext(a.openAPIV3)
	}
	return a.delegate.OpenAPIV3WithContext(ctx)
}

// WithLegacy is client-go's legacy-only discovery client on the same
// connection.
func (a *Discovery) WithLegacy() cgdiscovery.DiscoveryInterface { return a.delegate.WithLegacy() }

func (a *Discovery) WithLegacyWithContext(ctx context.Context) cgdiscovery.DiscoveryInterfaceWithContext {
	return a.delegate.WithLegacyWithContext(ctx)
}
