// Command fixturegen copies the OpenAPI v3 documents a real kube-apiserver
// v1.36.3 served, as recorded in the shared fixtures beside the checkout
// (../shared/fixtures/k8s-v1.36.3/openapi/v3), into a test's testdata with
// every description emptied, gzipped: the documents' shape and size stay
// those of a real server (every path, schema, reference and extension, in
// their order), while the upstream prose, which may not be copied into
// this repository, is gone. Its output is committed, so that a fresh clone
// runs the tests that need real documents; run it again only to record a
// new server version:
//
//	go run ./internal/fixturegen -from ../shared/fixtures/k8s-v1.36.3/openapi/v3 \
//	    -to openapi3/testdata/k8s-v1.36.3/openapi/v3
//
// A description is a "description" member whose value is a string; it
// becomes "" rather than going, as OpenAPI requires one in every Response.
// A property named description (an object, a schema) is kept.
package main

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

func main() {
	from := flag.String("from", "", "directory of recorded OpenAPI v3 documents (*.json)")
	to := flag.String("to", "", "directory to write the stripped documents to (*.json.gz)")
	flag.Parse()
	if *from == "" || *to == "" || flag.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "usage: fixturegen -from DIR -to DIR")
		os.Exit(2)
	}
	n, err := run(*from, *to)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fixturegen:", err)
		os.Exit(1)
	}
	fmt.Printf("%d documents written to %s\n", n, *to)
}

// run strips every *.json document under from into to, keeping relative
// paths, and returns how many it wrote.
func run(from, to string) (int, error) {
	n := 0
	err := filepath.WalkDir(from, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() || !strings.HasSuffix(p, ".json") {
			return err
		}
		body, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		stripped, err := Strip(body)
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		rel, err := filepath.Rel(from, p)
		if err != nil {
			return err
		}
		var gz bytes.Buffer
		w, _ := gzip.NewWriterLevel(&gz, gzip.BestCompression) // no name or time in the header: the same input gives the same bytes
		if _, err := w.Write(stripped); err != nil {
			return err
		}
		if err := w.Close(); err != nil {
			return err
		}
		out := filepath.Join(to, rel+".gz")
		if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
			return err
		}
		n++
		return os.WriteFile(out, gz.Bytes(), 0o644)
	})
	return n, err
}

// Strip returns the JSON document doc, compact, with the value of every
// "description" member that is a string emptied, members in their order.
func Strip(doc []byte) ([]byte, error) {
	d := json.NewDecoder(bytes.NewReader(doc))
	d.UseNumber()
	var out bytes.Buffer
	if err := copyValue(d, &out, false); err != nil {
		return nil, err
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, errors.New("more than one JSON value")
	}
	return out.Bytes(), nil
}

// copyValue copies the next value of d to out; a string is written empty
// when emptyString is set (it is a description).
func copyValue(d *json.Decoder, out *bytes.Buffer, emptyString bool) error {
	t, err := d.Token()
	if err != nil {
		return err
	}
	switch t := t.(type) {
	case json.Delim:
		switch t {
		case '{':
			out.WriteByte('{')
			for i := 0; d.More(); i++ {
				k, err := d.Token()
				if err != nil {
					return err
				}
				if i > 0 {
					out.WriteByte(',')
				}
				writeJSON(out, k)
				out.WriteByte(':')
				if err := copyValue(d, out, k == "description"); err != nil {
					return err
				}
			}
			out.WriteByte('}')
		case '[':
			out.WriteByte('[')
			for i := 0; d.More(); i++ {
				if i > 0 {
					out.WriteByte(',')
				}
				if err := copyValue(d, out, false); err != nil {
					return err
				}
			}
			out.WriteByte(']')
		}
		_, err := d.Token() // the closing delimiter
		return err
	case string:
		if emptyString {
			t = ""
		}
		writeJSON(out, t)
	default:
		writeJSON(out, t)
	}
	return nil
}

func writeJSON(out *bytes.Buffer, v any) {
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	_ = e.Encode(v) // strings, numbers, booleans and null always encode
	out.Write(bytes.TrimSuffix(b.Bytes(), []byte("\n")))
}
