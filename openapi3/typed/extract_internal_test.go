package typed

import (
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/managedfields"
)

// viaJSON is what managedfields.ExtractInto makes of m: the Unstructured
// it decodes m's JSON into.
func viaJSON(m map[string]any) (map[string]any, error) {
	u := &unstructured.Unstructured{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, u); err != nil {
		return nil, err
	}
	return u.Object, nil
}

// TestCopyAsJSON: copyAsJSON gives what the JSON round trip of
// managedfields.ExtractInto gives, value for value and type for type,
// shares nothing with its input, and declines what it would copy
// otherwise: numbers at every edge of JSON's integers and exponents,
// strings that are not UTF-8, nil maps and slices, other Go types, and
// 2,000 random trees of them and of float64s of every size.
func TestCopyAsJSON(t *testing.T) {
	edges := []any{
		nil, true, false, "", "text", "\u2028<&>", "bad \xff utf-8", int64(0), int64(math.MaxInt64), int64(math.MinInt64), 7,
		0.0, math.Copysign(0, -1), 2.0, -3.0, 0.5, 1e-7, 1e-6, 123456.789, 1e20, 1e21, -1e21, 9.2e18, 9.3e18,
		math.Ldexp(1, 63), -math.Ldexp(1, 63), -9.2e18, -9.223372036854775e18, 4e18, -4e18, 1e15 + 0.5, -123.0, math.MaxFloat64, math.SmallestNonzeroFloat64, math.NaN(), math.Inf(1),
		map[string]any(nil), []any(nil), map[string]any{}, []any{}, int32(5), uint64(math.MaxUint64), map[string]string{"a": "b"},
		[]string{"a"}, map[string]any{"bad \xfe key": 1},
	}
	check := func(name string, v any) {
		t.Helper()
		m := map[string]any{"kind": "K", "v": v}
		got, ok := copyAsJSON(m)
		want, err := viaJSON(m)
		if !ok {
			return // the caller takes the round trip itself
		}
		if err != nil {
			t.Fatalf("%s: %#v copied, but the round trip fails: %v", name, v, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: %#v: copied %#v, the round trip gives %#v", name, v, got, want)
		}
		mutate(got)
		if again, _ := copyAsJSON(m); !reflect.DeepEqual(again, want) {
			t.Fatalf("%s: the copy shares its input", name)
		}
	}
	declined := 0
	for _, v := range edges {
		if _, ok := copyAsJSON(v); !ok {
			declined++
		}
		check("edge", v)
	}
	if declined < 8 {
		t.Errorf("only %d edge values declined", declined)
	}
	r := rand.New(rand.NewPCG(1, 2))
	var tree func(depth int) any
	tree = func(depth int) any {
		switch n := r.IntN(10); {
		case n < 2 && depth < 4:
			m := map[string]any{}
			for i := range r.IntN(4) {
				m[strings.Repeat("k", i+1)] = tree(depth + 1)
			}
			return m
		case n < 4 && depth < 4:
			s := make([]any, r.IntN(4))
			for i := range s {
				s[i] = tree(depth + 1)
			}
			return s
		case n < 6: // a float64 of any size, integral or not
			f := r.NormFloat64() * math.Pow(10, float64(r.IntN(44)-22))
			if r.IntN(2) == 0 {
				f = math.Trunc(f)
			}
			return f
		default:
			return edges[r.IntN(len(edges))]
		}
	}
	for range 2000 {
		check("random", tree(0))
	}
}

// mutate changes every map and slice of v.
func mutate(v any) {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			mutate(e)
			v[k] = "changed"
		}
		v["added"] = true
	case []any:
		for i, e := range v {
			mutate(e)
			v[i] = "changed"
		}
	}
}

// TestExtractIntoAsManagedfields: extractInto gives what
// managedfields.ExtractInto gives, object or error: for the manager's
// entry, another manager's, a status entry, an entry without fieldsV1 or
// with an empty one, and values the direct copy leaves to JSON.
func TestExtractIntoAsManagedfields(t *testing.T) {
	d := docOf(t, "w", `"x-kubernetes-group-version-kind"`, map[string]string{
		"S": `{"type":"object","properties":{"a":{"type":"string"},"n":{"type":"number"},"free":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}`})
	b, err := typeOfDoc(d, xGVK)
	if err != nil {
		t.Fatal(err)
	}
	tp := b.kinds[xGVK].t
	fields := map[string]any{"f:spec": map[string]any{"f:a": map[string]any{}, "f:n": map[string]any{}, "f:free": map[string]any{}}}
	clean := map[string]any{"a": "b", "n": 2.0, "free": map[string]any{"big": 9.223372036854775e18, "x": []any{1.5, nil, int64(3)}}}
	notUTF8 := map[string]any{"a": "b", "free": map[string]any{"bad": "\xff"}} // left to JSON
	for _, tc := range []struct {
		name, manager, subresource string
		entry                      map[string]any
	}{
		{"the manager's", "m", "", map[string]any{"manager": "m", "operation": "Apply", "fieldsType": "FieldsV1", "fieldsV1": fields}},
		{"another manager's", "other", "", map[string]any{"manager": "m", "operation": "Apply", "fieldsType": "FieldsV1", "fieldsV1": fields}},
		{"an update", "m", "", map[string]any{"manager": "m", "operation": "Update", "fieldsType": "FieldsV1", "fieldsV1": fields}},
		{"status", "m", "status", map[string]any{"manager": "m", "operation": "Apply", "subresource": "status", "fieldsType": "FieldsV1", "fieldsV1": fields}},
		{"without fieldsV1", "m", "", map[string]any{"manager": "m", "operation": "Apply"}},
		{"empty fieldsV1", "m", "", map[string]any{"manager": "m", "operation": "Apply", "fieldsType": "FieldsV1", "fieldsV1": map[string]any{}}},
	} {
		for _, spec := range []map[string]any{clean, notUTF8} {
			u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "x/v1", "kind": "W", "spec": spec,
				"metadata": map[string]any{"managedFields": []any{tc.entry}}}}
			got, gotErr := extractInto(u.DeepCopy(), *tp, tc.manager, tc.subresource)
			want := &unstructured.Unstructured{}
			wantErr := managedfields.ExtractInto(u.DeepCopy(), *tp, tc.manager, want, tc.subresource) //nolint:forbidigo // the behaviour compared
			if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
				t.Fatalf("%s: error %v; ExtractInto's %v", tc.name, gotErr, wantErr)
			}
			if gotErr == nil && !reflect.DeepEqual(got.Object, want.Object) {
				t.Fatalf("%s: extracted %#v; ExtractInto's %#v", tc.name, got.Object, want.Object)
			}
		}
	}
}
