package surface

import "testing"

func TestParseMediaType(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Source
		err  bool
	}{
		{"application/json", Source{Format: FormatLegacy}, false},
		{"application/json; charset=utf-8", Source{Format: FormatLegacy}, false},
		{"application/vnd.kubernetes.protobuf", Source{Format: FormatLegacy, Protobuf: true}, false},
		{"application/vnd.kubernetes.protobuf;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList", Source{Format: FormatAggregatedV2, Protobuf: true}, false},
		{"application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList", Source{Format: FormatAggregatedV2Beta1}, false},
		{"application/json; v=v2;as=APIGroupDiscoveryList;g=apidiscovery.k8s.io;profile=nopeer", Source{Format: FormatAggregatedV2}, false},
		{"application/json;g=apidiscovery.k8s.io;v=v3;as=APIGroupDiscoveryList", Source{}, true},
		{"application/json;g=other.io;v=v2;as=APIGroupDiscoveryList", Source{}, true},
		{"text/html", Source{}, true},
		{"text/plain; charset=utf-8", Source{}, true},
		{"", Source{}, true},
		{";;;", Source{}, true},
	} {
		got, err := ParseMediaType(tc.in)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("ParseMediaType(%q) = %+v, %v; want %+v, error %v", tc.in, got, err, tc.want, tc.err)
		}
	}
}

// TestMediaTypeParsesBack: every form's media type, with and without a
// profile, is read back as that form.
func TestMediaTypeParsesBack(t *testing.T) {
	for _, f := range []Format{FormatAggregatedV2, FormatAggregatedV2Beta1, FormatLegacy} {
		for _, pb := range []bool{false, true} {
			for _, profile := range []string{"", "nopeer"} {
				s := Source{Format: f, Protobuf: pb}
				if got, err := ParseMediaType(s.MediaType(profile)); err != nil || got != s {
					t.Errorf("%+v: MediaType(%q) = %q, read back as %+v, %v", s, profile, s.MediaType(profile), got, err)
				}
			}
		}
	}
	if got := (Source{Format: FormatAggregatedV2}).MediaType("nopeer"); got != "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList;profile=nopeer" {
		t.Errorf("MediaType = %q", got)
	}
}
