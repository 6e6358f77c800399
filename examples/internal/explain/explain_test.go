package explain_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kubeatlas/kubeatlas/discovery"
	"github.com/kubeatlas/kubeatlas/examples/internal/explain"
	"github.com/kubeatlas/kubeatlas/internal/docserver"
	"github.com/kubeatlas/kubeatlas/openapi3"
	"github.com/kubeatlas/kubeatlas/restmapper"
)

// TestFieldAddedSinceIsExplained: with one OpenAPI client kept across
// runs and no watch (its root's max age an hour), explaining a field the
// kind's schema gained after the client read it reads the root again and
// explains the field, where it said the field did not exist; a field that
// does not exist costs at most one root read a second, however often it
// is asked for, and no document.
func TestFieldAddedSinceIsExplained(t *testing.T) {
	srv, base := docserver.Start(t)
	dc, err := discovery.NewForHTTPClient(nil, base)
	if err != nil {
		t.Fatal(err)
	}
	mapper, err := restmapper.New(dc)
	if err != nil {
		t.Fatal(err)
	}
	clk := clocktesting.NewFakePassiveClock(time.Now())
	oc, err := openapi3.NewForHTTPClient(nil, base, openapi3.WithClock(clk), openapi3.WithMaxAge(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	run := func(in string) (string, error) {
		var out, errOut bytes.Buffer
		err := explain.Run(ctx, dc, mapper, oc, in, explain.Options{}, &out, &errOut)
		return out.String(), err
	}
	openAPIRequests := func() (root, docs int) {
		for _, r := range srv.Requests() {
			switch {
			case r.Path == "/openapi/v3":
				root++
			case strings.HasPrefix(r.Path, "/openapi/v3/"):
				docs++
			}
		}
		srv.ResetRequests()
		return root, docs
	}
	if _, err := run("deployments.spec"); err != nil {
		t.Fatal(err)
	}
	if err := srv.ChangeSchema(schema.GroupVersion{Group: "apps", Version: "v1"}); err != nil { // spec gains revision1
		t.Fatal(err)
	}
	clk.SetTime(clk.Now().Add(time.Second))
	openAPIRequests()

	out, err := run("deployments.spec.revision1")
	if err != nil {
		t.Fatalf("explain deployments.spec.revision1 after the schema gained it: %v", err)
	}
	if !strings.Contains(out, "FIELD: revision1 <string>") {
		t.Errorf("explain deployments.spec.revision1:\n%s", out)
	}
	if root, docs := openAPIRequests(); root != 1 || docs != 1 {
		t.Errorf("%d root reads and %d documents; want the root and apps/v1's", root, docs)
	}

	// A field that does not exist, asked for over three seconds.
	for range 30 {
		if _, err := run("deployments.spec.nope"); err == nil || err.Error() != `field "nope" does not exist` {
			t.Fatalf("explain deployments.spec.nope: %v", err)
		}
		clk.SetTime(clk.Now().Add(100 * time.Millisecond))
	}
	if root, docs := openAPIRequests(); root > 4 || docs != 0 {
		t.Errorf("%d root reads and %d documents for 30 misses over 3s; want at most a root read a second", root, docs)
	}
}
