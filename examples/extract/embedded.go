package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/kube-openapi/pkg/handler3"
	"k8s.io/kube-openapi/pkg/spec3"

	"github.com/kubeatlas/kubeatlas/internal/docserver"
	"github.com/kubeatlas/kubeatlas/openapi3"
	"github.com/kubeatlas/kubeatlas/openapi3/typed"
)

// The OpenAPI v3 documents of api/v1 and apps/v1 a real v1.36.3 server
// served, with every description removed (openapi3/testdata).
//
//go:embed testdata/*.json.gz
var documents embed.FS

var deployments = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}

// startEmbedded serves, in this process: the recorded discovery
// (internal/docserver), the two OpenAPI documents through kube-openapi's
// handler3, and GETs of the objects of a client-go fake ObjectTracker with
// field management on a typed.Converter, where two managers applied to
// default/web.
func startEmbedded(io.Writer) (url string, stop func(), err error) {
	ds, err := docserver.NewServer(docserver.WithCRDs(200, 20)) // as the message Config prints says
	if err != nil {
		return "", nil, err
	}
	svc := handler3.NewOpenAPIService()
	for path, file := range map[string]string{"api/v1": "api-v1", "apis/apps/v1": "apis-apps-v1"} {
		doc, err := readDocument("testdata/" + file + ".json.gz")
		if err != nil {
			return "", nil, err
		}
		svc.UpdateGroupVersion(path, doc)
	}
	var tracker clienttesting.ObjectTracker
	mux := http.NewServeMux()
	mux.HandleFunc("/openapi/v3", svc.HandleDiscovery)
	mux.HandleFunc("/openapi/v3/", svc.HandleGroupVersion)
	mux.HandleFunc("GET /apis/apps/v1/namespaces/{ns}/deployments/{name}", func(w http.ResponseWriter, r *http.Request) {
		obj, err := tracker.Get(deployments, r.PathValue("ns"), r.PathValue("name"))
		if err != nil {
			// A Status as the API server sends it, so that the client says
			// which object is missing (a message with quotes pasted into
			// JSON by hand did not decode, and the client said only "the
			// server could not find the requested resource").
			status := apierrors.NewInternalError(err).Status()
			var apiStatus apierrors.APIStatus
			if errors.As(err, &apiStatus) {
				status = apiStatus.Status()
			}
			status.Kind, status.APIVersion = "Status", "v1"
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(int(status.Code))
			_ = json.NewEncoder(w).Encode(status)
			return
		}
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		u["apiVersion"], u["kind"] = "apps/v1", "Deployment"
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(u)
	})
	mux.Handle("/", ds)

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ErrorLog: log.New(io.Discard, "", 0)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(l)
	}()
	url = "http://" + l.Addr().String()
	stop = func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if srv.Shutdown(ctx) != nil {
			_ = srv.Close()
		}
		<-done
	}
	if tracker, err = seed(url); err != nil {
		stop()
		return "", nil, err
	}
	return url, stop, nil
}

// seed is a field-managed ObjectTracker on a typed.Converter over url's
// OpenAPI, where two managers applied to default/web, as client-go's fake
// clientsets with field management do (NewFieldManagedObjectTracker).
func seed(url string) (clienttesting.ObjectTracker, error) {
	oc, err := openapi3.NewForHTTPClient(nil, url)
	if err != nil {
		return nil, err
	}
	conv, err := typed.New(oc)
	if err != nil {
		return nil, err
	}
	tracker := clienttesting.NewFieldManagedObjectTracker(scheme.Scheme, serializer.NewCodecFactory(scheme.Scheme).UniversalDecoder(), conv)
	react := clienttesting.ObjectReaction(tracker)
	for _, a := range []struct{ manager, patch string }{
		{"deployer", `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","labels":{"app":"web"}},"spec":{"replicas":3,
			"selector":{"matchLabels":{"app":"web"}},"template":{"metadata":{"labels":{"app":"web"}},"spec":{"containers":[
			{"name":"web","image":"nginx:1.27","ports":[{"containerPort":80,"protocol":"TCP"}]}]}}}}`},
		{"sidecar-injector", `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","annotations":{"injected":"true"}},
			"spec":{"template":{"spec":{"containers":[{"name":"proxy","image":"envoy:1.31"}]}}}}`},
	} {
		action := clienttesting.NewPatchActionWithOptions(deployments, "default", "web", types.ApplyPatchType, []byte(a.patch),
			metav1.PatchOptions{FieldManager: a.manager})
		if _, _, err := react(action); err != nil {
			return nil, fmt.Errorf("applying as %s: %w", a.manager, err)
		}
	}
	return tracker, nil
}

func readDocument(name string) (*spec3.OpenAPI, error) {
	gz, err := documents.ReadFile(name)
	if err != nil {
		return nil, err
	}
	r, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		return nil, err
	}
	body, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	var doc spec3.OpenAPI
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", strings.TrimSuffix(name, ".json.gz"), err)
	}
	return &doc, nil
}
