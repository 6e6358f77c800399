package mediatype

import "testing"

func TestParseDiscovery(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Discovery
		err  bool
	}{
		{"application/json", Discovery{}, false},
		{"application/json; charset=utf-8", Discovery{}, false},
		{"application/vnd.kubernetes.protobuf", Discovery{Protobuf: true}, false},
		{Aggregated("v2", true, ""), Discovery{Aggregated: true, Version: "v2", Protobuf: true}, false},
		{Aggregated("v2beta1", false, ""), Discovery{Aggregated: true, Version: "v2beta1"}, false},
		{Aggregated("v2", false, "nopeer"), Discovery{Aggregated: true, Version: "v2"}, false},
		{"application/json;g=apidiscovery.k8s.io;v=v3;as=APIGroupDiscoveryList", Discovery{}, true},
		{"application/json;g=other.io;v=v2;as=APIGroupDiscoveryList", Discovery{}, true},
		{"text/html", Discovery{}, true},
		{"text/plain; charset=utf-8", Discovery{}, true},
		{"", Discovery{}, true},
		{";;;", Discovery{}, true},
	} {
		got, err := ParseDiscovery(tc.in)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("ParseDiscovery(%q) = %+v, %v; want %+v, error %v", tc.in, got, err, tc.want, tc.err)
		}
	}
}
