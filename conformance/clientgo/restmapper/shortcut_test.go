/*
Copyright 2016 The Kubernetes Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

// Ported from k8s.io/client-go v0.37.2, restmapper/shortcut_test.go: each
// test runs on client-go's shortcut expander and on kubeatlas's
// restmapper.New (which expands short names itself) over discovery reading
// the same data over HTTP (sides). Upstream calls the expander's unexported
// expandResourceShortcut; here client-go's side reads what its
// ResourceFor passes to the delegate (the same expansion), and kubeatlas's
// side compares its ResourceFor with client-go's unexpanded mapper's
// answer for upstream's expected expansion (unexpanded).

package restmapper

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	openapi_v2 "github.com/google/gnostic-models/openapiv2"
	"github.com/google/go-cmp/cmp"

	"k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/openapi"
	restclient "k8s.io/client-go/rest"
	"k8s.io/client-go/rest/fake"
	. "k8s.io/client-go/restmapper"
	"k8s.io/klog/v2/ktesting"

	"github.com/kubeatlas/kubeatlas/conformance/clientgo/sides"
	"github.com/kubeatlas/kubeatlas/restmapper"
)

func TestReplaceAliases(t *testing.T) { sides.Run(t, testReplaceAliases) }

func testReplaceAliases(t *testing.T, side sides.Side) {
	_, ctx := ktesting.NewTestContext(t)

	tests := []struct {
		name     string
		arg      string
		expected schema.GroupVersionResource
		srvRes   []*metav1.APIResourceList
	}{
		{
			name:     "storageclasses-no-replacement",
			arg:      "storageclasses",
			expected: schema.GroupVersionResource{Resource: "storageclasses"},
			srvRes:   []*metav1.APIResourceList{},
		},
		{
			name:     "hpa-priority",
			arg:      "hpa",
			expected: schema.GroupVersionResource{Resource: "superhorizontalpodautoscalers", Group: "autoscaling"},
			srvRes: []*metav1.APIResourceList{
				{
					GroupVersion: "autoscaling/v1",
					APIResources: []metav1.APIResource{
						{
							Name:       "superhorizontalpodautoscalers",
							ShortNames: []string{"hpa"},
						},
					},
				},
				{
					GroupVersion: "autoscaling/v1",
					APIResources: []metav1.APIResource{
						{
							Name:       "horizontalpodautoscalers",
							ShortNames: []string{"hpa"},
						},
					},
				},
			},
		},
		{
			name:     "resource-override",
			arg:      "dpl",
			expected: schema.GroupVersionResource{Resource: "deployments", Group: "foo"},
			srvRes: []*metav1.APIResourceList{
				{
					GroupVersion: "foo/v1",
					APIResources: []metav1.APIResource{
						{
							Name:       "deployments",
							ShortNames: []string{"dpl"},
						},
					},
				},
				{
					GroupVersion: "extension/v1beta1",
					APIResources: []metav1.APIResource{
						{
							Name:       "deployments",
							ShortNames: []string{"deploy"},
						},
					},
				},
			},
		},
		{
			name:     "resource-match-preferred",
			arg:      "pods",
			expected: schema.GroupVersionResource{Resource: "pods", Group: ""},
			srvRes: []*metav1.APIResourceList{
				{
					GroupVersion: "v1",
					APIResources: []metav1.APIResource{{Name: "pods", SingularName: "pod"}},
				},
				{
					GroupVersion: "acme.com/v1",
					APIResources: []metav1.APIResource{{Name: "poddlers", ShortNames: []string{"pods", "pod"}}},
				},
			},
		},
		{
			name:     "resource-match-singular-preferred",
			arg:      "pod",
			expected: schema.GroupVersionResource{Resource: "pod", Group: ""},
			srvRes: []*metav1.APIResourceList{
				{
					GroupVersion: "v1",
					APIResources: []metav1.APIResource{{Name: "pods", SingularName: "pod"}},
				},
				{
					GroupVersion: "acme.com/v1",
					APIResources: []metav1.APIResource{{Name: "poddlers", ShortNames: []string{"pods", "pod"}}},
				},
			},
		},
	}

	for _, test := range tests {
		ds := &fakeDiscoveryClient{}
		ds.serverResourcesHandler = func() ([]*metav1.APIResourceList, error) {
			return test.srvRes, nil
		}
		if side.Kubeatlas {
			srv := serveLists(t, ds)
			checkExpansion(t, test.name, sides.NewMapper(t, srv), unexpanded(t, srv), test.arg, test.expected)
			continue
		}
		mapper := newShortcutExpander(ds, nil)

		actual := mapper.expandResourceShortcut(ctx, schema.GroupVersionResource{Resource: test.arg})
		if actual != test.expected {
			t.Errorf("%s: unexpected argument: expected %s, got %s", test.name, test.expected, actual)
		}
	}
}

func TestKindFor(t *testing.T) { sides.Run(t, testKindFor) }

func testKindFor(t *testing.T, side sides.Side) {
	tests := []struct {
		in       schema.GroupVersionResource
		expected schema.GroupVersionResource
		srvRes   []*metav1.APIResourceList
	}{
		{
			in:       schema.GroupVersionResource{Group: "storage.k8s.io", Version: "", Resource: "sc"},
			expected: schema.GroupVersionResource{Group: "storage.k8s.io", Version: "", Resource: "storageclasses"},
			srvRes: []*metav1.APIResourceList{
				{
					GroupVersion: "storage.k8s.io/v1",
					APIResources: []metav1.APIResource{
						{
							Name:       "storageclasses",
							ShortNames: []string{"sc"},
						},
					},
				},
			},
		},
		{
			in:       schema.GroupVersionResource{Group: "", Version: "", Resource: "sc"},
			expected: schema.GroupVersionResource{Group: "storage.k8s.io", Version: "", Resource: "storageclasses"},
			srvRes: []*metav1.APIResourceList{
				{
					GroupVersion: "storage.k8s.io/v1",
					APIResources: []metav1.APIResource{
						{
							Name:       "storageclasses",
							ShortNames: []string{"sc"},
						},
					},
				},
			},
		},
	}

	for i, test := range tests {
		ds := &fakeDiscoveryClient{}
		ds.serverResourcesHandler = func() ([]*metav1.APIResourceList, error) {
			return test.srvRes, nil
		}

		if side.Kubeatlas {
			srv := serveLists(t, ds)
			m := sides.NewMapper(t, srv, restmapper.WithWarningHandler(func(a string) {
				t.Fatalf("unexpected warning message %s", a)
			}))
			got, err := m.KindFor(test.in)
			want, wantErr := unexpanded(t, srv).KindFor(test.expected)
			if got != want || errString(err) != errString(wantErr) {
				t.Errorf("%d: KindFor(%v) = %v, %v; want %v, %v (client-go's mapper for %v)", i, test.in, got, err, want, wantErr, test.expected)
			}
			continue
		}
		delegate := &fakeRESTMapper{}
		mapper := NewShortcutExpander(delegate, ds, func(a string) {
			t.Fatalf("unexpected warning message %s", a)
		})

		mapper.KindFor(test.in)
		if delegate.kindForInput != test.expected {
			t.Errorf("%d: unexpected data returned %#v, expected %#v", i, delegate.kindForInput, test.expected)
		}
	}
}

func TestKindForWithNewCRDs(t *testing.T) { sides.Run(t, testKindForWithNewCRDs) }

func testKindForWithNewCRDs(t *testing.T, side sides.Side) {
	tests := map[string]struct {
		in       schema.GroupVersionResource
		expected schema.GroupVersionKind
		srvRes   []*metav1.APIResourceList
	}{
		"": {
			in:       schema.GroupVersionResource{Group: "a", Version: "", Resource: "sc"},
			expected: schema.GroupVersionKind{Group: "a", Version: "v1", Kind: "StorageClass"},
			srvRes: []*metav1.APIResourceList{
				{
					GroupVersion: "a/v1",
					APIResources: []metav1.APIResource{
						{
							Name:       "storageclasses",
							ShortNames: []string{"sc"},
							Kind:       "StorageClass",
						},
					},
				},
			},
		},
	}

	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			invalidateCalled := false
			fakeDiscovery := &fakeDiscoveryClient{}
			fakeDiscovery.serverResourcesHandler = func() ([]*metav1.APIResourceList, error) {
				if invalidateCalled {
					return test.srvRes, nil
				}
				return []*metav1.APIResourceList{}, nil
			}
			fakeCachedDiscovery := &fakeCachedDiscoveryClient{DiscoveryInterface: fakeDiscovery}
			fakeCachedDiscovery.invalidateHandler = func() {
				invalidateCalled = true
			}
			fakeCachedDiscovery.freshHandler = func() bool {
				return invalidateCalled
			}

			// in real world the discovery client is fronted with a cache which
			// will answer the initial request, only failure to match will trigger
			// the cache invalidation and live discovery call
			var mapper meta.RESTMapper
			if side.Kubeatlas {
				// kubeatlas reads discovery again on a miss: the server
				// serves the CRD from its second read on, as the fake
				// does once invalidated. The first read is the cached
				// discovery, not fresh, upstream's fake answers from.
				srv := &countingServer{}
				srv.h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if r.URL.Path == "/apis" && srv.reads() > 1 {
						fakeCachedDiscovery.Invalidate()
					}
					serveLists(t, fakeDiscovery).Config.Handler.ServeHTTP(w, r)
				})
				hs := httptest.NewServer(srv)
				defer hs.Close()
				mapper = sides.NewStaleMapper(t, hs, restmapper.WithWarningHandler(func(a string) {
					t.Fatalf("unexpected warning message %s", a)
				}))
			} else {
				delegate := NewDeferredDiscoveryRESTMapper(fakeCachedDiscovery)
				mapper = NewShortcutExpander(delegate, fakeCachedDiscovery, func(a string) {
					t.Fatalf("unexpected warning message %s", a)
				})
			}

			gvk, err := mapper.KindFor(test.in)
			if err != nil {
				t.Errorf("unexpected error: %v", err)
			}
			if diff := cmp.Equal(gvk, test.expected); !diff {
				t.Errorf("unexpected data returned %#v, expected %#v", gvk, test.expected)
			}
		})
	}
}

func TestWarnAmbigious(t *testing.T) { sides.Run(t, testWarnAmbigious) }

func testWarnAmbigious(t *testing.T, side sides.Side) {
	_, ctx := ktesting.NewTestContext(t)

	tests := []struct {
		name                string
		arg                 string
		expected            schema.GroupVersionResource
		expectedWarningLogs []string
		srvRes              []*metav1.APIResourceList
	}{
		{
			name:                "warn ambiguity",
			arg:                 "hpa",
			expected:            schema.GroupVersionResource{Resource: "superhorizontalpodautoscalers", Group: "autoscaling"},
			expectedWarningLogs: []string{`short name "hpa" could also match lower priority resource horizontalpodautoscalers.autoscaling`},
			srvRes: []*metav1.APIResourceList{
				{
					GroupVersion: "autoscaling/v1",
					APIResources: []metav1.APIResource{
						{
							Name:       "superhorizontalpodautoscalers",
							ShortNames: []string{"hpa"},
						},
					},
				},
				{
					GroupVersion: "autoscaling/v1",
					APIResources: []metav1.APIResource{
						{
							Name:       "horizontalpodautoscalers",
							ShortNames: []string{"hpa"},
						},
					},
				},
			},
		},
		{
			name:                "warn-builtin-shortname-ambugity",
			arg:                 "po",
			expected:            schema.GroupVersionResource{Resource: "pods", Group: ""},
			expectedWarningLogs: []string{`short name "po" could also match lower priority resource poddlers.acme.com`},
			srvRes: []*metav1.APIResourceList{
				{
					GroupVersion: "v1",
					APIResources: []metav1.APIResource{{Name: "pods", SingularName: "pod", ShortNames: []string{"po"}}},
				},
				{
					GroupVersion: "acme.com/v1",
					APIResources: []metav1.APIResource{{Name: "poddlers", ShortNames: []string{"po"}}},
				},
			},
		},
		{
			name:                "warn-builtin-shortname-ambugity-multi-version",
			arg:                 "po",
			expected:            schema.GroupVersionResource{Resource: "pods", Group: ""},
			expectedWarningLogs: []string{`short name "po" could also match lower priority resource poddlers.acme.com`},
			srvRes: []*metav1.APIResourceList{
				{
					GroupVersion: "v1",
					APIResources: []metav1.APIResource{{Name: "pods", SingularName: "pod", ShortNames: []string{"po"}}},
				},
				{
					GroupVersion: "acme.com/v1",
					APIResources: []metav1.APIResource{{Name: "poddlers", ShortNames: []string{"po"}}},
				},
				{
					GroupVersion: "acme.com/v1beta1",
					APIResources: []metav1.APIResource{{Name: "poddlers", ShortNames: []string{"po"}}},
				},
			},
		},
		{
			name:     "resource-match-singular-preferred",
			arg:      "pod",
			expected: schema.GroupVersionResource{Resource: "pod", Group: ""},
			srvRes: []*metav1.APIResourceList{
				{
					GroupVersion: "v1",
					APIResources: []metav1.APIResource{{Name: "pods", SingularName: "pod"}},
				},
				{
					GroupVersion: "acme.com/v1",
					APIResources: []metav1.APIResource{{Name: "poddlers", ShortNames: []string{"pods", "pod"}}},
				},
			},
		},
		{
			name:                "resource-multiple-versions-shortform",
			arg:                 "hpa",
			expected:            schema.GroupVersionResource{Resource: "horizontalpodautoscalers", Group: "autoscaling"},
			expectedWarningLogs: []string{},
			srvRes: []*metav1.APIResourceList{
				{
					GroupVersion: "autoscaling/v1alphav1",
					APIResources: []metav1.APIResource{
						{
							Name:       "horizontalpodautoscalers",
							ShortNames: []string{"hpa"},
						},
					},
				},
				{
					GroupVersion: "autoscaling/v1",
					APIResources: []metav1.APIResource{
						{
							Name:       "horizontalpodautoscalers",
							ShortNames: []string{"hpa"},
						},
					},
				},
			},
		},
		{
			name:     "multi-resource-multiple-versions-shortform",
			arg:      "hpa",
			expected: schema.GroupVersionResource{Resource: "horizontalpodautoscalers", Group: "autoscaling"},
			expectedWarningLogs: []string{
				`short name "hpa" could also match lower priority resource foo.foo`,
				`short name "hpa" could also match lower priority resource bar.bar`,
			},
			srvRes: []*metav1.APIResourceList{
				{
					GroupVersion: "autoscaling/v1alphav1",
					APIResources: []metav1.APIResource{
						{
							Name:       "horizontalpodautoscalers",
							ShortNames: []string{"hpa"},
						},
					},
				},
				{
					GroupVersion: "autoscaling/v1",
					APIResources: []metav1.APIResource{
						{
							Name:       "horizontalpodautoscalers",
							ShortNames: []string{"hpa"},
						},
					},
				},
				{
					GroupVersion: "foo/v1",
					APIResources: []metav1.APIResource{
						{
							Name:       "foo",
							ShortNames: []string{"hpa"},
						},
					},
				},
				{
					GroupVersion: "foo/v1beta1",
					APIResources: []metav1.APIResource{
						{
							Name:       "foo",
							ShortNames: []string{"hpa"},
						},
					},
				},
				{
					GroupVersion: "bar/v1",
					APIResources: []metav1.APIResource{
						{
							Name:       "bar",
							ShortNames: []string{"hpa"},
						},
					},
				},
			},
		},
	}

	for _, test := range tests {
		ds := &fakeDiscoveryClient{}
		ds.serverResourcesHandler = func() ([]*metav1.APIResourceList, error) {
			return test.srvRes, nil
		}

		var actualWarnings []string
		if side.Kubeatlas {
			srv := serveLists(t, ds)
			m := sides.NewMapper(t, srv, restmapper.WithWarningHandler(func(a string) {
				actualWarnings = append(actualWarnings, a)
			}))
			checkExpansion(t, test.name, m, unexpanded(t, srv), test.arg, test.expected)
		} else {
			mapper := newShortcutExpander(ds, func(a string) {
				actualWarnings = append(actualWarnings, a)
			})

			actual := mapper.expandResourceShortcut(ctx, schema.GroupVersionResource{Resource: test.arg})
			if actual != test.expected {
				t.Errorf("%s: unexpected argument: expected %s, got %s", test.name, test.expected, actual)
			}
		}

		if len(actualWarnings) == 0 && len(test.expectedWarningLogs) == 0 {
			continue
		}

		if !cmp.Equal(test.expectedWarningLogs, actualWarnings) {
			t.Fatalf("expected warning message %s but got %s", test.expectedWarningLogs, actualWarnings)
		}
	}
}

type fakeRESTMapper struct {
	kindForInput     schema.GroupVersionResource
	resourceForInput schema.GroupVersionResource // not upstream's: see shortcutExpander
}

func (f *fakeRESTMapper) KindFor(resource schema.GroupVersionResource) (schema.GroupVersionKind, error) {
	f.kindForInput = resource
	return schema.GroupVersionKind{}, nil
}

func (f *fakeRESTMapper) KindsFor(resource schema.GroupVersionResource) ([]schema.GroupVersionKind, error) {
	return nil, nil
}

func (f *fakeRESTMapper) ResourceFor(input schema.GroupVersionResource) (schema.GroupVersionResource, error) {
	f.resourceForInput = input
	return schema.GroupVersionResource{}, nil
}

func (f *fakeRESTMapper) ResourcesFor(input schema.GroupVersionResource) ([]schema.GroupVersionResource, error) {
	return nil, nil
}

func (f *fakeRESTMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	return nil, nil
}

func (f *fakeRESTMapper) RESTMappings(gk schema.GroupKind, versions ...string) ([]*meta.RESTMapping, error) {
	return nil, nil
}

func (f *fakeRESTMapper) ResourceSingularizer(resource string) (singular string, err error) {
	return "", nil
}

type fakeDiscoveryClient struct {
	serverResourcesHandler func() ([]*metav1.APIResourceList, error)
}

var _ discovery.DiscoveryInterface = &fakeDiscoveryClient{}

func (c *fakeDiscoveryClient) RESTClient() restclient.Interface {
	return &fake.RESTClient{}
}

func (c *fakeDiscoveryClient) ServerGroups() (*metav1.APIGroupList, error) {
	return &metav1.APIGroupList{
		Groups: []metav1.APIGroup{
			{
				Name: "a",
				Versions: []metav1.GroupVersionForDiscovery{
					{
						GroupVersion: "a/v1",
						Version:      "v1",
					},
				},
				PreferredVersion: metav1.GroupVersionForDiscovery{
					GroupVersion: "a/v1",
					Version:      "v1",
				},
			},
		},
	}, nil
}

func (c *fakeDiscoveryClient) ServerResourcesForGroupVersion(groupVersion string) (*metav1.APIResourceList, error) {
	if groupVersion == "a/v1" {
		return &metav1.APIResourceList{APIResources: []metav1.APIResource{{Name: "widgets", Kind: "Widget"}}}, nil
	}

	return nil, errors.NewNotFound(schema.GroupResource{}, "")
}

func (c *fakeDiscoveryClient) ServerGroupsAndResources() ([]*metav1.APIGroup, []*metav1.APIResourceList, error) {
	sgs, err := c.ServerGroups()
	if err != nil {
		return nil, nil, err
	}
	resultGroups := []*metav1.APIGroup{}
	for i := range sgs.Groups {
		resultGroups = append(resultGroups, &sgs.Groups[i])
	}
	if c.serverResourcesHandler != nil {
		rs, err := c.serverResourcesHandler()
		return resultGroups, rs, err
	}
	return resultGroups, []*metav1.APIResourceList{}, nil
}

func (c *fakeDiscoveryClient) ServerPreferredResources() ([]*metav1.APIResourceList, error) {
	return nil, nil
}

func (c *fakeDiscoveryClient) ServerPreferredNamespacedResources() ([]*metav1.APIResourceList, error) {
	return nil, nil
}

func (c *fakeDiscoveryClient) ServerVersion() (*version.Info, error) {
	return &version.Info{}, nil
}

func (c *fakeDiscoveryClient) OpenAPISchema() (*openapi_v2.Document, error) {
	return &openapi_v2.Document{}, nil
}

func (c *fakeDiscoveryClient) OpenAPIV3() openapi.Client {
	panic("implement me")
}

func (c *fakeDiscoveryClient) WithLegacy() discovery.DiscoveryInterface {
	panic("implement me")
}

type fakeCachedDiscoveryClient struct {
	discovery.DiscoveryInterface
	freshHandler      func() bool
	invalidateHandler func()
}

var _ discovery.CachedDiscoveryInterface = &fakeCachedDiscoveryClient{}

func (c *fakeCachedDiscoveryClient) Fresh() bool {
	if c.freshHandler != nil {
		return c.freshHandler()
	}
	return true
}

func (c *fakeCachedDiscoveryClient) Invalidate() {
	if c.invalidateHandler != nil {
		c.invalidateHandler()
	}
}

// shortcutExpander reaches client-go's unexported expandResourceShortcut
// from outside its package: the expansion is what its ResourceFor passes
// to its delegate, a fakeRESTMapper.
type shortcutExpander struct {
	meta.RESTMapper
	delegate *fakeRESTMapper
}

// newShortcutExpander is upstream's NewShortcutExpander(&fakeRESTMapper{},
// ds, warn).(shortcutExpander).
func newShortcutExpander(ds discovery.DiscoveryInterface, warn func(string)) shortcutExpander {
	delegate := &fakeRESTMapper{}
	return shortcutExpander{RESTMapper: NewShortcutExpander(delegate, ds, warn), delegate: delegate}
}

func (e shortcutExpander) expandResourceShortcut(_ context.Context, resource schema.GroupVersionResource) schema.GroupVersionResource {
	_, _ = e.ResourceFor(resource)
	return e.delegate.resourceForInput
}

// checkExpansion is kubeatlas's side of an expansion check: its mapper's
// ResourceFor(arg) must be client-go's unexpanded mapper's answer for the
// expected expansion.
func checkExpansion(t *testing.T, name string, m meta.RESTMapper, unexpanded meta.RESTMapper, arg string, expected schema.GroupVersionResource) {
	t.Helper()
	got, err := m.ResourceFor(schema.GroupVersionResource{Resource: arg})
	want, wantErr := unexpanded.ResourceFor(expected)
	if got != want || errString(err) != errString(wantErr) {
		t.Errorf("%s: ResourceFor(%q) = %v, %v; want %v, %v (client-go's mapper for %v)", name, arg, got, err, want, wantErr, expected)
	}
}
