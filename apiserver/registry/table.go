package registry

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/rest"
)

var _ rest.TableConvertor = (*Store)(nil)

// ConvertToTable implements rest.TableConvertor, for kubectl get: the
// Config's columns, a row per object of a list or the one object.
func (s *Store) ConvertToTable(_ context.Context, obj runtime.Object, opts runtime.Object) (*metav1.Table, error) {
	t := &metav1.Table{ColumnDefinitions: s.cfg.Columns}
	if o, ok := opts.(*metav1.TableOptions); ok && o.NoHeaders {
		t.ColumnDefinitions = nil
	}
	add := func(o runtime.Object) error {
		obj, ok := o.(Object)
		if !ok {
			return fmt.Errorf("%s: cannot show a %T in a table", s.cfg.Resource, o)
		}
		t.Rows = append(t.Rows, metav1.TableRow{Cells: s.cfg.Cells(obj), Object: runtime.RawExtension{Object: o}})
		return nil
	}
	if meta.IsListType(obj) {
		if err := meta.EachListItem(obj, add); err != nil {
			return nil, err
		}
		if lm, err := meta.ListAccessor(obj); err == nil {
			t.ResourceVersion = lm.GetResourceVersion()
		}
		return t, nil
	}
	if err := add(obj); err != nil {
		return nil, err
	}
	if m, ok := obj.(Object); ok {
		t.ResourceVersion = m.GetResourceVersion()
	}
	return t, nil
}
