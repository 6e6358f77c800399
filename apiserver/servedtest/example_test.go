package servedtest_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/kubeatlas/kubeatlas/apiserver/apis/discovery/v1alpha1"
	"github.com/kubeatlas/kubeatlas/apiserver/servedtest"
	"github.com/kubeatlas/kubeatlas/discovery/discoverytest"
)

// A fake cluster that serves the discovery API: its apigroups follow a CRD
// added to the fake. In a test, discoverytest.Start(t,
// servedtest.WithServedAPI()) does the serving and closing.
func ExampleWithServedAPI() {
	srv, err := discoverytest.NewServer(servedtest.WithServedAPI())
	if err != nil {
		panic(err)
	}
	defer srv.Close() // stops the served API and its feed
	ts := httptest.NewServer(srv)
	defer ts.Close()

	if err := srv.AddCRD(discoverytest.CRD{Group: "widgets.example.com", Versions: []string{"v1"}, Kind: "Widget"}); err != nil {
		panic(err)
	}
	url := ts.URL + "/apis/" + v1alpha1.GroupName + "/v1alpha1/apigroups/widgets.example.com"
	var group v1alpha1.Group
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		resp, err := http.Get(url)
		if err != nil {
			panic(err)
		}
		if resp.StatusCode == http.StatusOK {
			err = json.NewDecoder(resp.Body).Decode(&group)
		}
		resp.Body.Close()
		if err != nil {
			panic(err)
		}
		if group.Name != "" {
			break
		}
	}
	fmt.Println(group.Name, group.Status.PreferredVersion)
	// Output: widgets.example.com v1
}
