package typed_test

import (
	"context"
	"testing"

	"k8s.io/client-go/openapi"

	"github.com/kubeatlas/kubeatlas/openapi3/typed"
)

// BenchmarkFirstTypedValue: a new process's first typed value of a
// Deployment on the recorded v1.36.3 documents (served by kube-openapi's
// handler on loopback, no disk cache), side by side: client-go's
// openapi.NewTypeConverter (every document read and parsed first) and a
// Converter (the root and apps/v1's document).
func BenchmarkFirstTypedValue(b *testing.B) {
	srv := newServer(b)
	b.Run("client-go", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			tc, err := openapi.NewTypeConverter(srv.clientGo(b), false)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := tc.ObjectToTyped(deployment()); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("kubeatlas", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			conv, err := typed.New(srv.client(b))
			if err != nil {
				b.Fatal(err)
			}
			if _, err := conv.ObjectToTyped(deployment()); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkTypedValue: one more typed value of a Deployment once the
// types are built (the per-object cost of an extract loop).
func BenchmarkTypedValue(b *testing.B) {
	srv := newServer(b)
	tc, err := openapi.NewTypeConverter(srv.clientGo(b), false)
	if err != nil {
		b.Fatal(err)
	}
	conv, err := typed.New(srv.client(b))
	if err != nil {
		b.Fatal(err)
	}
	if _, err := conv.Type(context.Background(), deploymentGVK); err != nil {
		b.Fatal(err)
	}
	b.Run("client-go", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := tc.ObjectToTyped(deployment()); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("kubeatlas", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := conv.ObjectToTyped(deployment()); err != nil {
				b.Fatal(err)
			}
		}
	})
}
