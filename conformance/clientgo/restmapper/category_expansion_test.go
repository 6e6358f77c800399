/*
Copyright 2017 The Kubernetes Authors.

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

// Ported from k8s.io/client-go v0.37.2, restmapper/category_expansion_test.go:
// each test runs on client-go's expander and on kubeatlas's restmapper.New
// (its Expand) over discovery serving the same data over HTTP (sides).

package restmapper

import (
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	. "k8s.io/client-go/restmapper"

	"github.com/kubeatlas/kubeatlas/conformance/clientgo/sides"
)

func TestCategoryExpansion(t *testing.T) { sides.Run(t, testCategoryExpansion) }

func testCategoryExpansion(t *testing.T, side sides.Side) {
	tests := []struct {
		name string
		arg  string

		expected   []schema.GroupResource
		expectedOk bool
	}{
		{
			name:     "no-replacement",
			arg:      "service",
			expected: nil,
		},
		{
			name: "all-replacement",
			arg:  "all",
			expected: []schema.GroupResource{
				{Resource: "one"},
				{Resource: "two"},
				{Resource: "three", Group: "alpha"},
				{Resource: "four", Group: "bravo"},
			},
			expectedOk: true,
		},
	}

	for _, test := range tests {
		simpleCategoryExpander := SimpleCategoryExpander{
			Expansions: map[string][]schema.GroupResource{
				"all": {
					{Group: "", Resource: "one"},
					{Group: "", Resource: "two"},
					{Group: "alpha", Resource: "three"},
					{Group: "bravo", Resource: "four"},
				},
			},
		}

		var expander CategoryExpander = simpleCategoryExpander
		if side.Kubeatlas {
			// kubeatlas has no static expander: the same expansions as
			// categories the server lists.
			expander = sides.NewMapper(t, sides.Serve(t, sides.Lists{Resources: func() []*metav1.APIResourceList {
				return categoryLists(simpleCategoryExpander.Expansions)
			}}))
		}
		actual, actualOk := expander.Expand(test.arg)
		if e, a := test.expected, actual; !reflect.DeepEqual(e, a) {
			t.Errorf("%s:  expected %s, got %s", test.name, e, a)
		}
		if e, a := test.expectedOk, actualOk; e != a {
			t.Errorf("%s:  expected %v, got %v", test.name, e, a)
		}
	}
}

// categoryLists serves expansions as resources in a group-version v1 of
// their group, each resource in the categories that list it.
func categoryLists(expansions map[string][]schema.GroupResource) []*metav1.APIResourceList {
	var lists []*metav1.APIResourceList
	index := map[schema.GroupResource]*metav1.APIResource{}
	for category, grs := range expansions {
		for _, gr := range grs {
			if r, ok := index[gr]; ok {
				r.Categories = append(r.Categories, category)
				continue
			}
			gv := schema.GroupVersion{Group: gr.Group, Version: "v1"}.String()
			var list *metav1.APIResourceList
			for _, l := range lists {
				if l.GroupVersion == gv {
					list = l
				}
			}
			if list == nil {
				list = &metav1.APIResourceList{GroupVersion: gv}
				lists = append(lists, list)
			}
			list.APIResources = append(list.APIResources, metav1.APIResource{Name: gr.Resource, Kind: gr.Resource, Categories: []string{category}})
			index[gr] = &list.APIResources[len(list.APIResources)-1]
		}
	}
	return lists
}

func TestDiscoveryCategoryExpander(t *testing.T) { sides.Run(t, testDiscoveryCategoryExpander) }

func testDiscoveryCategoryExpander(t *testing.T, side sides.Side) {
	tests := []struct {
		category       string
		serverResponse []*metav1.APIResourceList
		expected       []schema.GroupResource
	}{
		{
			category: "all",
			serverResponse: []*metav1.APIResourceList{
				{
					GroupVersion: "batch/v1",
					APIResources: []metav1.APIResource{
						{
							Name:       "jobs",
							ShortNames: []string{"jz"},
							Categories: []string{"all"},
						},
					},
				},
			},
			expected: []schema.GroupResource{
				{
					Group:    "batch",
					Resource: "jobs",
				},
			},
		},
		{
			category: "all",
			serverResponse: []*metav1.APIResourceList{
				{
					GroupVersion: "batch/v1",
					APIResources: []metav1.APIResource{
						{
							Name:       "jobs",
							ShortNames: []string{"jz"},
						},
					},
				},
			},
		},
		{
			category: "targaryens",
			serverResponse: []*metav1.APIResourceList{
				{
					GroupVersion: "batch/v1",
					APIResources: []metav1.APIResource{
						{
							Name:       "jobs",
							ShortNames: []string{"jz"},
							Categories: []string{"all"},
						},
					},
				},
			},
		},
	}

	dc := &fakeDiscoveryClient{}
	for _, test := range tests {
		dc.serverResourcesHandler = func() ([]*metav1.APIResourceList, error) {
			return test.serverResponse, nil
		}
		expander := newDiscoveryCategoryExpander(t, side, dc)
		expanded, _ := expander.Expand(test.category)
		if !reflect.DeepEqual(expanded, test.expected) {
			t.Errorf("expected %v, got %v", test.expected, expanded)
		}
	}

}
