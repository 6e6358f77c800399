package discoverytest_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/kubeatlas/kubeatlas/discovery/discoverytest"
)

// The fixture was captured from a real kube-apiserver v1.36.3; these tests
// hold the fake server to what that server answered.
const fixture = "testdata/k8s-v1.36.3"

// recorded is a response of the real server: its status and headers.
type recorded struct {
	status int
	header http.Header
}

func readRecorded(t *testing.T, name string) recorded {
	t.Helper()
	f, err := os.Open(filepath.Join(fixture, name+".headers"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	if !sc.Scan() {
		t.Fatalf("%s: empty headers file", name)
	}
	fields := strings.Fields(sc.Text()) // HTTP/1.1 200 OK
	status, err := strconv.Atoi(fields[1])
	if err != nil {
		t.Fatalf("%s: status line %q", name, sc.Text())
	}
	rec := recorded{status: status, header: http.Header{}}
	for sc.Scan() {
		if k, v, ok := strings.Cut(strings.TrimRight(sc.Text(), "\r"), ": "); ok {
			rec.header.Add(k, v)
		}
	}
	return rec
}

var quotedETag = regexp.MustCompile(`^"[0-9A-F]{128}"$`)

// compareHeaders checks the headers that matter to a discovery client.
func compareHeaders(t *testing.T, what string, want recorded, got *http.Response) {
	t.Helper()
	if got.StatusCode != want.status {
		t.Errorf("%s: status %d, the real server answered %d", what, got.StatusCode, want.status)
	}
	for _, h := range []string{"Content-Type", "Vary", "Cache-Control", "Content-Encoding"} {
		if g, w := got.Header.Get(h), want.header.Get(h); g != w {
			t.Errorf("%s: %s %q, the real server sent %q", what, h, g, w)
		}
	}
	if w, g := want.header.Get("ETag"), got.Header.Get("ETag"); (w == "") != (g == "") {
		t.Errorf("%s: ETag %q, the real server sent %q", what, g, w)
	} else if g != "" && !quotedETag.MatchString(g) {
		t.Errorf("%s: ETag %q is not a quoted SHA-512 in upper-case hex", what, g)
	}
	if (want.header.Get("Expires") == "") != (got.Header.Get("Expires") == "") {
		t.Errorf("%s: Expires %q, the real server sent %q", what, got.Header.Get("Expires"), want.header.Get("Expires"))
	}
	if w := want.header.Get("Location"); w != "" {
		g := got.Header.Get("Location")
		wu, _ := url.Parse(w)
		gu, err := url.Parse(g)
		if err != nil || gu.Path != wu.Path || gu.Host != "" || gu.Query().Get("hash") == "" {
			t.Errorf("%s: Location %q, the real server sent %q (relative, same path, a hash)", what, g, w)
		}
	}
}

// TestFidelityAggregatedDocuments: the default server's aggregated discovery
// is the real server's to the byte, with the same ETag, in JSON and protobuf.
func TestFidelityAggregatedDocuments(t *testing.T) {
	_, base := discoverytest.Start(t)
	for _, tc := range []struct{ file, path, accept string }{
		{"aggregated/api.v2.json", "/api", acceptV2JSON},
		{"aggregated/apis.v2.json", "/apis", acceptV2JSON},
		{"aggregated/api.v2.pb", "/api", acceptV2PB},
		{"aggregated/apis.v2.pb", "/apis", acceptV2PB},
		{"aggregated/apis.v2beta1.json", "/apis", acceptV2Beta1JSON},
		{"aggregated/api.v2beta1.json", "/api", acceptV2Beta1JSON},
	} {
		t.Run(tc.file, func(t *testing.T) {
			resp, body := get(t, base+tc.path, "Accept", tc.accept)
			want := readRecorded(t, tc.file)
			compareHeaders(t, tc.file, want, resp)
			wantBody, err := os.ReadFile(filepath.Join(fixture, tc.file))
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode == http.StatusOK && !bytes.Equal(body, wantBody) {
				t.Errorf("body differs from the real server's (%d bytes, want %d)", len(body), len(wantBody))
			}
			if g, w := resp.Header.Get("ETag"), want.header.Get("ETag"); g != w {
				t.Errorf("ETag %s, the real server's was %s", g, w)
			}
		})
	}
}

// indexRow is one line of the fixture's index.tsv.
type indexRow struct {
	file, path, contentType string
	status                  int
}

func readIndex(t *testing.T) []indexRow {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(fixture, "index.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	var rows []indexRow
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		f := strings.Split(line, "\t")
		if len(f) != 5 {
			continue
		}
		status, _ := strconv.Atoi(f[2])
		rows = append(rows, indexRow{file: f[0], path: f[1], status: status, contentType: f[4]})
	}
	return rows
}

// TestFidelityLegacyDocuments: every legacy discovery document the real
// server served is served with the same status, headers and content.
func TestFidelityLegacyDocuments(t *testing.T) {
	_, base := discoverytest.Start(t)
	n := 0
	for _, row := range readIndex(t) {
		if !strings.HasPrefix(row.file, "legacy/") {
			continue
		}
		n++
		t.Run(row.path, func(t *testing.T) {
			resp, body := get(t, base+row.path, "Accept", "application/json")
			compareHeaders(t, row.path, readRecorded(t, row.file), resp)
			want, err := os.ReadFile(filepath.Join(fixture, row.file))
			if err != nil {
				t.Fatal(err)
			}
			var gotDoc, wantDoc any
			if err := json.Unmarshal(body, &gotDoc); err != nil {
				t.Fatalf("body is not JSON: %v", err)
			}
			if err := json.Unmarshal(want, &wantDoc); err != nil {
				t.Fatal(err)
			}
			// Addresses name the real server's port; the fake names its own.
			dropKey(gotDoc, "serverAddressByClientCIDRs")
			dropKey(wantDoc, "serverAddressByClientCIDRs")
			// The real server hashes a resource's storage version, which for a
			// few built-ins is not the version served; the fake hashes the
			// served one.
			dropKey(gotDoc, "storageVersionHash")
			dropKey(wantDoc, "storageVersionHash")
			if !reflect.DeepEqual(gotDoc, wantDoc) {
				g, _ := json.Marshal(gotDoc)
				w, _ := json.Marshal(wantDoc)
				t.Errorf("document differs from the real server's\n got %s\nwant %s", g, w)
			}
		})
	}
	if n < 20 {
		t.Fatalf("only %d legacy documents in the index", n)
	}
}

func dropKey(doc any, key string) {
	switch d := doc.(type) {
	case map[string]any:
		delete(d, key)
		for _, v := range d {
			dropKey(v, key)
		}
	case []any:
		for _, v := range d {
			dropKey(v, key)
		}
	}
}

// TestFidelityProbes replays the behaviour probes recorded against the real
// server (conditional requests, Accept variants, profiles, gzip, HEAD,
// trailing slashes, OpenAPI hashes and redirects) and compares the answers.
func TestFidelityProbes(t *testing.T) {
	const token = "probe-token"
	_, base := discoverytest.Start(t, discoverytest.WithBearerToken(token))
	etagOf := func(path, accept string) string {
		resp, _ := get(t, base+path, "Accept", accept, "Authorization", "Bearer "+token)
		return resp.Header.Get("ETag")
	}
	root := openAPIRoot(t, base, "Authorization", "Bearer "+token)
	replace := strings.NewReplacer(
		"<ETag of aggregated/apis.v2.json>", etagOf("/apis", acceptV2JSON),
		"<ETag of aggregated/api.v2.json>", etagOf("/api", acceptV2JSON),
		"<ETag of aggregated/apis.v2.pb>", etagOf("/apis", acceptV2PB),
		"<ETag of probes/openapi-apps-v1.no-hash>", etagOf("/openapi/v3/apis/apps/v1", "application/json"),
		"<ETag of openapi/v3.json>", `"`+strings.Repeat("0", 128)+`"`,
		"<serverRelativeURL of apis/apps/v1 in openapi/v3.json>", root["apis/apps/v1"],
	)
	// Two captured header values did not survive into REQUESTS.tsv; these
	// are what the probes sent.
	override := map[string]string{
		"apis.v2.if-none-match-unquoted": "If-None-Match: " + strings.Trim(etagOf("/apis", acceptV2JSON), `"`),
		"apis.v2.if-none-match-wrong":    `If-None-Match: "WRONG"`,
	}
	raw, err := os.ReadFile(filepath.Join(fixture, "probes/REQUESTS.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n")[1:] {
		f := strings.Split(line, "\t")
		for len(f) < 4 {
			f = append(f, "")
		}
		file, path, headers, notes := f[0], replace.Replace(f[1]), replace.Replace(f[2]), f[3]
		if o, ok := override[file]; ok {
			headers = strings.Split(headers, " | ")[0] + " | " + o
		}
		t.Run(file, func(t *testing.T) {
			client, target := noRedirects, base
			if notes == "HTTP/2" {
				// The same server over TLS with HTTP/2, as the probe was sent.
				srv, err := discoverytest.NewServer(discoverytest.WithBearerToken(token))
				if err != nil {
					t.Fatal(err)
				}
				ts := httptest.NewUnstartedServer(srv)
				ts.EnableHTTP2 = true
				ts.StartTLS()
				defer ts.Close()
				client, target = ts.Client(), ts.URL
			}
			method := http.MethodGet
			if notes == "HEAD" {
				method = http.MethodHead
			}
			var hdr []string
			for _, h := range strings.Split(headers, " | ") {
				if k, v, ok := strings.Cut(h, ":"); ok {
					hdr = append(hdr, k, strings.TrimSpace(v))
				}
			}
			if notes != "anonymous" {
				hdr = append(hdr, "Authorization", "Bearer "+token)
			}
			if ua, ok := strings.CutPrefix(notes, "User-Agent "); ok {
				hdr = append(hdr, "User-Agent", ua)
			}
			if !containsFold(hdr, "Accept-Encoding") {
				hdr = append(hdr, "Accept-Encoding", "identity")
			}
			resp, _ := do(t, client, method, target+path, hdr...)
			if notes == "HTTP/2" && resp.ProtoMajor != 2 {
				t.Errorf("answered over %s, want HTTP/2", resp.Proto)
			}
			compareHeaders(t, file, readRecorded(t, "probes/"+file), resp)
		})
	}
}

var noRedirects = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func containsFold(pairs []string, name string) bool {
	for i := 0; i < len(pairs); i += 2 {
		if strings.EqualFold(pairs[i], name) {
			return true
		}
	}
	return false
}

// openAPIRoot returns the fake server's /openapi/v3 paths and their URLs.
func openAPIRoot(t *testing.T, base string, header ...string) map[string]string {
	t.Helper()
	resp, body := get(t, base+"/openapi/v3", header...)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/openapi/v3: %d", resp.StatusCode)
	}
	var root struct {
		Paths map[string]struct {
			ServerRelativeURL string `json:"serverRelativeURL"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(body, &root); err != nil {
		t.Fatalf("/openapi/v3: %v", err)
	}
	out := map[string]string{}
	for k, v := range root.Paths {
		out[k] = v.ServerRelativeURL
	}
	return out
}

// TestFidelityOpenAPIRoot: the fake lists the same OpenAPI v3 paths as the
// real server, and each answers as the real server's did.
func TestFidelityOpenAPIRoot(t *testing.T) {
	_, base := discoverytest.Start(t)
	resp, _ := get(t, base+"/openapi/v3")
	compareHeaders(t, "/openapi/v3", readRecorded(t, "openapi/v3.json"), resp)
	root := openAPIRoot(t, base)
	var want []string
	for _, row := range readIndex(t) {
		p, ok := strings.CutPrefix(row.file, "openapi/v3/")
		if !ok {
			continue
		}
		p = strings.TrimSuffix(p, ".json")
		want = append(want, p)
		u, ok := root[p]
		if !ok {
			t.Errorf("the fake server does not list %s", p)
			continue
		}
		resp, _ := get(t, base+u, "Accept", "application/json")
		if resp.StatusCode != row.status || resp.Header.Get("Content-Type") != row.contentType ||
			resp.Header.Get("Cache-Control") != "public, immutable" {
			t.Errorf("%s: %d %q %q, want %d %q and public, immutable", u, resp.StatusCode,
				resp.Header.Get("Content-Type"), resp.Header.Get("Cache-Control"), row.status, row.contentType)
		}
	}
	if len(root) != len(want) {
		t.Errorf("the fake server lists %d OpenAPI paths, the real server %d", len(root), len(want))
	}
}
