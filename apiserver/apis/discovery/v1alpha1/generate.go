package v1alpha1

// The generators run at the versions matching k8s.io/apiserver v0.37.2. The
// OpenAPI definitions (package apiserver/openapi, so that importing the
// types does not import kube-openapi) include apimachinery's (ObjectMeta,
// Condition, WatchEvent...), which k8s.io/apiserver needs to build the
// models behind server-side apply and kubectl explain.
//go:generate go run k8s.io/code-generator/cmd/deepcopy-gen@v0.37.2 --output-file zz_generated.deepcopy.go --go-header-file /dev/null .
//go:generate go run k8s.io/kube-openapi/cmd/openapi-gen@v0.0.0-20260721132016-d427ff9ee9ad --output-file zz_generated.openapi.go --output-dir ../../../openapi --output-pkg github.com/kubeatlas/kubeatlas/apiserver/openapi --go-header-file /dev/null --report-filename /dev/null . k8s.io/apimachinery/pkg/apis/meta/v1 k8s.io/apimachinery/pkg/runtime k8s.io/apimachinery/pkg/version
