// Package restconfigtest sets any field of a rest.Config to test values,
// for the tests that walk every field by reflection (package shared's key,
// package discovery's held config), so that a field client-go adds is
// seen by them.
package restconfigtest

import (
	"context"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
)

// Leaves are the paths of every field of rest.Config that holds no struct:
// field names joined by dots, through structs, pointers to structs and
// slices of structs (a slice's elements named by the slice), as package
// shared's configField names them; a *schema.GroupVersion is one leaf.
func Leaves() []string {
	var leaves []string
	var walk func(typ reflect.Type, prefix string)
	walk = func(typ reflect.Type, prefix string) {
		for i := range typ.NumField() {
			f := typ.Field(i)
			ft := f.Type
			for ft.Kind() == reflect.Pointer || ft.Kind() == reflect.Slice {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct && ft != reflect.TypeFor[schema.GroupVersion]() {
				walk(ft, prefix+f.Name+".")
				continue
			}
			leaves = append(leaves, prefix+f.Name)
		}
	}
	walk(reflect.TypeFor[rest.Config](), "")
	return leaves
}

// Set sets the field of cfg at path (Leaves' form) to its
// n-th test value, allocating the structs and the one slice element on
// the way, and returns the value.
func Set(t testing.TB, cfg *rest.Config, path string, n int) reflect.Value {
	t.Helper()
	f := fieldAt(cfg, path)
	v := Value(t, f.Type(), n)
	f.Set(v)
	return v
}

// SetTo sets the field of cfg at path to v (one Set returned).
func SetTo(cfg *rest.Config, path string, v reflect.Value) {
	fieldAt(cfg, path).Set(v)
}

func fieldAt(cfg *rest.Config, path string) reflect.Value {
	v := reflect.ValueOf(cfg).Elem()
	segs := strings.Split(path, ".")
	for _, seg := range segs[:len(segs)-1] {
		f := v.FieldByName(seg)
		switch f.Kind() {
		case reflect.Pointer:
			if f.IsNil() {
				f.Set(reflect.New(f.Type().Elem()))
			}
			v = f.Elem()
		case reflect.Slice:
			if f.Len() == 0 {
				f.Set(reflect.MakeSlice(f.Type(), 1, 1))
			}
			v = f.Index(0)
		default:
			v = f
		}
	}
	return v.FieldByName(segs[len(segs)-1])
}

// persister is an AuthConfigPersister; its field keeps two of them at
// two addresses.
type persister struct{ n int }

func (*persister) Persist(map[string]string) error { return nil }

// warnings is a WarningHandler of either kind.
type warnings struct{ n int }

func (*warnings) HandleWarningHeader(int, string, string)                             {}
func (*warnings) HandleWarningHeaderWithContext(context.Context, int, string, string) {}

// Value is a value of typ, different for each n (pointers are new at
// each call).
func Value(t testing.TB, typ reflect.Type, n int) reflect.Value {
	t.Helper()
	switch typ {
	case reflect.TypeFor[http.RoundTripper]():
		return reflect.ValueOf(&http.Transport{MaxIdleConns: n}).Convert(typ)
	case reflect.TypeFor[rest.AuthProviderConfigPersister]():
		return reflect.ValueOf(&persister{n: n}).Convert(typ)
	case reflect.TypeFor[flowcontrol.RateLimiter]():
		return reflect.ValueOf(flowcontrol.NewTokenBucketRateLimiter(float32(n), n))
	case reflect.TypeFor[rest.WarningHandler](), reflect.TypeFor[rest.WarningHandlerWithContext]():
		return reflect.ValueOf(&warnings{n: n}).Convert(typ)
	case reflect.TypeFor[runtime.NegotiatedSerializer]():
		if n == 1 {
			return reflect.ValueOf(serializer.NewCodecFactory(runtime.NewScheme())).Convert(typ)
		}
		return reflect.ValueOf(serializer.NewCodecFactory(runtime.NewScheme()).WithoutConversion()).Convert(typ)
	case reflect.TypeFor[runtime.Object]():
		return reflect.ValueOf(&runtime.Unknown{Raw: fmt.Appendf(nil, `{"audience":"a%d"}`, n)}).Convert(typ)
	case reflect.TypeFor[*schema.GroupVersion]():
		return reflect.ValueOf(&schema.GroupVersion{Group: fmt.Sprint("g", n), Version: "v1"})
	}
	switch typ.Kind() {
	case reflect.String:
		return reflect.ValueOf(fmt.Sprint("value", n)).Convert(typ)
	case reflect.Bool:
		return reflect.ValueOf(n%2 == 1)
	case reflect.Int, reflect.Int64, reflect.Float32:
		return reflect.ValueOf(n).Convert(typ)
	case reflect.Slice:
		switch typ.Elem().Kind() {
		case reflect.Uint8:
			return reflect.ValueOf(fmt.Appendf(nil, "value%d", n)).Convert(typ)
		case reflect.String:
			return reflect.ValueOf([]string{fmt.Sprint("value", n)}).Convert(typ)
		}
	case reflect.Map:
		m := reflect.MakeMap(typ)
		m.SetMapIndex(reflect.ValueOf("key"), Value(t, typ.Elem(), n))
		return m
	case reflect.Func:
		return reflect.MakeFunc(typ, func([]reflect.Value) []reflect.Value {
			out := make([]reflect.Value, typ.NumOut())
			for i := range out {
				out[i] = reflect.Zero(typ.Out(i))
			}
			return out
		})
	}
	t.Fatalf("no test value for %v: add one", typ)
	return reflect.Value{}
}
