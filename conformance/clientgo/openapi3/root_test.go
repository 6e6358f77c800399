/*
Copyright 2023 The Kubernetes Authors.

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

// Ported from k8s.io/client-go v0.37.2, openapi3/root_test.go: each test
// runs on client-go's NewRoot over upstream's fake OpenAPI client and over
// kubeatlas's openapi3.Client (through openapi3/clientgo.New) reading the
// fake's documents from a kube-openapi handler over HTTP (servePaths).
// TestOpenAPIV3Root_GroupVersionToPath and TestOpenAPIV3Root_PathToGroupVersion
// test client-go's unexported helpers, which NewRoot uses whatever the
// client: they are not ported.

package openapi3

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/openapi"
	"k8s.io/client-go/openapi/openapitest"
	. "k8s.io/client-go/openapi3"

	"github.com/kubeatlas/kubeatlas/conformance/clientgo/sides"
)

func TestOpenAPIV3Root_GroupVersions(t *testing.T) { sides.Run(t, testOpenAPIV3Root_GroupVersions) }

func testOpenAPIV3Root_GroupVersions(t *testing.T, side sides.Side) {
	tests := []struct {
		name        string
		paths       map[string]openapi.GroupVersion
		expectedGVs []schema.GroupVersion
		forcedErr   error
	}{
		{
			name:        "OpenAPI V3 Root: No openapi.Paths() equals no GroupVersions.",
			expectedGVs: []schema.GroupVersion{},
		},
		{
			name: "OpenAPI V3 Root: Single openapi.Path equals one GroupVersion.",
			paths: map[string]openapi.GroupVersion{
				"apis/apps/v1": nil,
			},
			expectedGVs: []schema.GroupVersion{
				{Group: "apps", Version: "v1"},
			},
		},
		{
			name: "OpenAPI V3 Root: Multiple openapi.Paths equals multiple GroupVersions.",
			paths: map[string]openapi.GroupVersion{
				"apis/apps/v1":       nil,
				"api/v1":             nil,
				"apis/batch/v1beta1": nil,
			},
			// Alphabetical ordering, since GV's are returned sorted.
			expectedGVs: []schema.GroupVersion{
				{Group: "apps", Version: "v1"},
				{Group: "batch", Version: "v1beta1"},
				{Group: "", Version: "v1"},
			},
		},
		{
			name: "Multiple GroupVersions, some invalid",
			paths: map[string]openapi.GroupVersion{
				"apis/batch/v1beta1":              nil,
				"api/v1":                          nil,
				"foo/apps/v1":                     nil, // bad prefix
				"apis/networking.k8s.io/v1alpha1": nil,
				"api":                             nil, // No version
				"apis/apps":                       nil, // Missing Version
				"apis/apps/v1":                    nil,
			},
			// Alphabetical ordering, since GV's are returned sorted.
			expectedGVs: []schema.GroupVersion{
				{Group: "apps", Version: "v1"},
				{Group: "batch", Version: "v1beta1"},
				{Group: "networking.k8s.io", Version: "v1alpha1"},
				{Group: "", Version: "v1"},
			},
		},
		{
			name:      "OpenAPI V3 Root: Forced error returns error.",
			forcedErr: fmt.Errorf("openapi client error"),
		},
	}

	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			fakeClient := openapi.Client(openapitest.FakeClient{
				PathsMap:  test.paths,
				ForcedErr: test.forcedErr,
			})
			if side.Kubeatlas {
				fakeClient = servePaths(t, fakeClient)
			}
			root := NewRoot(fakeClient)
			actualGVs, err := root.GroupVersions()
			if test.forcedErr != nil {
				require.Error(t, err)
			} else {
				require.NoError(t, err)
			}
			if !reflect.DeepEqual(test.expectedGVs, actualGVs) {
				t.Errorf("expected GroupVersions (%s), got (%s): (%s)\n",
					test.expectedGVs, actualGVs, err)
			}
		})
	}
}

func TestOpenAPIV3Root_GVSpec(t *testing.T) { sides.Run(t, testOpenAPIV3Root_GVSpec) }

func testOpenAPIV3Root_GVSpec(t *testing.T, side sides.Side) {
	tests := []struct {
		name          string
		gv            schema.GroupVersion
		expectedPaths []string
		err           error
	}{
		{
			name: "OpenAPI V3 for apps/v1 works",
			gv:   schema.GroupVersion{Group: "apps", Version: "v1"},
			expectedPaths: []string{
				"/apis/apps/v1/",
				"/apis/apps/v1/deployments",
				"/apis/apps/v1/replicasets",
				"/apis/apps/v1/daemonsets",
			},
		},
		{
			name: "OpenAPI V3 for networking/v1alpha1 works",
			gv:   schema.GroupVersion{Group: "networking.k8s.io", Version: "v1alpha1"},
			expectedPaths: []string{
				"/apis/networking.k8s.io/v1alpha1/",
			},
		},
		{
			name: "OpenAPI V3 for batch/v1 works",
			gv:   schema.GroupVersion{Group: "batch", Version: "v1"},
			expectedPaths: []string{
				"/apis/batch/v1/",
				"/apis/batch/v1/jobs",
				"/apis/batch/v1/cronjobs",
			},
		},
		{
			name: "OpenAPI V3 spec not found",
			gv:   schema.GroupVersion{Group: "not", Version: "found"},
			err:  groupVersionNotFoundError(schema.GroupVersion{Group: "not", Version: "found"}),
		},
	}

	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			client := openapitest.NewEmbeddedFileClient()
			if side.Kubeatlas {
				client = servePaths(t, client)
			}
			root := NewRoot(client)
			gvSpec, err := root.GVSpec(test.gv)
			if test.err != nil {
				assert.True(t, reflect.DeepEqual(test.err, err))
				return
			}
			require.NoError(t, err)
			for _, path := range test.expectedPaths {
				if _, found := gvSpec.Paths.Paths[path]; !found {
					assert.True(t, found, "expected path not found (%s)\n", path)
				}
			}
		})
	}
}

func TestOpenAPIV3Root_GVSpecAsMap(t *testing.T) { sides.Run(t, testOpenAPIV3Root_GVSpecAsMap) }

func testOpenAPIV3Root_GVSpecAsMap(t *testing.T, side sides.Side) {
	tests := []struct {
		name          string
		gv            schema.GroupVersion
		expectedPaths []string
		err           error
	}{
		{
			name: "OpenAPI V3 for apps/v1 works",
			gv:   schema.GroupVersion{Group: "apps", Version: "v1"},
			expectedPaths: []string{
				"/apis/apps/v1/",
				"/apis/apps/v1/deployments",
				"/apis/apps/v1/replicasets",
				"/apis/apps/v1/daemonsets",
			},
		},
		{
			name: "OpenAPI V3 for networking/v1alpha1 works",
			gv:   schema.GroupVersion{Group: "networking.k8s.io", Version: "v1alpha1"},
			expectedPaths: []string{
				"/apis/networking.k8s.io/v1alpha1/",
			},
		},
		{
			name: "OpenAPI V3 for batch/v1 works",
			gv:   schema.GroupVersion{Group: "batch", Version: "v1"},
			expectedPaths: []string{
				"/apis/batch/v1/",
				"/apis/batch/v1/jobs",
				"/apis/batch/v1/cronjobs",
			},
		},
		{
			name: "OpenAPI V3 spec not found",
			gv:   schema.GroupVersion{Group: "not", Version: "found"},
			err:  groupVersionNotFoundError(schema.GroupVersion{Group: "not", Version: "found"}),
		},
	}

	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			client := openapitest.NewEmbeddedFileClient()
			if side.Kubeatlas {
				client = servePaths(t, client)
			}
			root := NewRoot(client)
			gvSpecAsMap, err := root.GVSpecAsMap(test.gv)
			if test.err != nil {
				assert.True(t, reflect.DeepEqual(test.err, err))
				return
			}
			require.NoError(t, err)
			for _, path := range test.expectedPaths {
				pathsMap := gvSpecAsMap["paths"]
				if _, found := pathsMap.(map[string]interface{})[path]; !found {
					assert.True(t, found, "expected path not found (%s)\n", path)
				}
			}
		})
	}
}
