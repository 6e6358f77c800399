// Command delegated is the smallest k8s.io/apiserver-based aggregated
// server: RecommendedOptions without etcd or admission, delegated
// authentication and authorization, no API group installed. It serves
// /apis/test.kubeatlas.io/v1 (what the aggregator's availability check
// reads) and /apis/test.kubeatlas.io/v1/whoami, which answers the name of
// the user the server authenticated, behind the server's own filters.
//
// The integration tier builds it to prove that aggregation.serverArgs
// start a server built like kubeatlas-apiserver inside the network
// namespace: the same flags, the same delegation to the kube-apiserver.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"

	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apiserver/pkg/endpoints/request"
	genericapiserver "k8s.io/apiserver/pkg/server"
	genericoptions "k8s.io/apiserver/pkg/server/options"
	"k8s.io/apiserver/pkg/util/compatibility"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run() error {
	scheme := runtime.NewScheme()
	metav1.AddToGroupVersion(scheme, schema.GroupVersion{Version: "v1"})
	codecs := serializer.NewCodecFactory(scheme)

	o := genericoptions.NewRecommendedOptions("/unused", codecs.LegacyCodec())
	o.Etcd = nil      // nothing stored
	o.Admission = nil // nothing written
	fs := pflag.NewFlagSet("delegated", pflag.ContinueOnError)
	o.AddFlags(fs)
	if err := fs.Parse(os.Args[1:]); err != nil {
		return err
	}
	if errs := o.Validate(); len(errs) > 0 {
		return fmt.Errorf("flags: %v", errs)
	}

	cfg := genericapiserver.NewRecommendedConfig(codecs)
	cfg.EffectiveVersion = compatibility.DefaultBuildEffectiveVersion()
	if err := o.ApplyTo(cfg); err != nil {
		return err
	}
	srv, err := cfg.Complete().New("delegated", genericapiserver.NewEmptyDelegate())
	if err != nil {
		return err
	}
	mux := srv.Handler.NonGoRestfulMux
	mux.HandleFunc("/apis/test.kubeatlas.io/v1", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"}, GroupVersion: "test.kubeatlas.io/v1",
			APIResources: []metav1.APIResource{{Name: "whoami", Kind: "WhoAmI", Verbs: metav1.Verbs{"list"}}}})
	})
	mux.HandleFunc("/apis/test.kubeatlas.io/v1/whoami", func(w http.ResponseWriter, r *http.Request) {
		u, ok := request.UserFrom(r.Context())
		if !ok {
			http.Error(w, "no user", http.StatusInternalServerError)
			return
		}
		writeJSON(w, map[string]any{"user": u.GetName(), "groups": u.GetGroups()})
	})
	return srv.PrepareRun().RunWithContext(context.Background())
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
