// Command api-resources is kubectl api-resources on kubeatlas: the API
// resources a cluster serves, read in two requests (two 304s when nothing
// changed since the last run, none with --cached), from a persistent cache.
//
//	go run ./examples/api-resources                 # an embedded fake cluster when there is no kubeconfig
//	go run ./examples/api-resources -o name --stats
//	go run ./examples/api-resources --kubeconfig ~/.kube/config --context prod --api-group apps -o wide
//
// The cache lives in $KUBECACHEDIR, else the user cache directory
// (kubeatlas/<server>).
package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubeatlas/kubeatlas/discovery"
	"github.com/kubeatlas/kubeatlas/examples/internal/cli"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

type options struct {
	conn                     cli.Connection
	output, apiGroup, sortBy string
	namespaced               *bool
	verbs, categories        []string
	cached, stats, noHeaders bool
}

func parseFlags(args []string, stderr io.Writer) (*options, error) {
	o := &options{}
	fs := cli.NewFlagSet("api-resources")
	o.conn.Register(fs)
	fs.StringVarP(&o.output, "output", "o", "", "output format: wide, name or json")
	fs.StringVar(&o.apiGroup, "api-group", "", "limit to resources in this API group (\"\" is the core group, when given)")
	namespaced := fs.Bool("namespaced", true, "true: only namespaced resources; false: only cluster-scoped ones (default: both)")
	fs.StringSliceVar(&o.verbs, "verbs", nil, "limit to resources that support all these verbs (comma-separated, or repeated)")
	fs.StringSliceVar(&o.categories, "categories", nil, "limit to resources in all these categories (comma-separated, or repeated)")
	fs.StringVar(&o.sortBy, "sort-by", "", "sort by name or kind (default: API group)")
	fs.BoolVar(&o.cached, "cached", false, "use the cached list of resources if there is one, without asking the server")
	fs.BoolVar(&o.stats, "stats", false, "print requests, bytes, 304s, cache hits and wall time to stderr")
	fs.BoolVar(&o.noHeaders, "no-headers", false, "do not print headers")
	if err := cli.Parse(fs, args, stderr); err != nil {
		return nil, err
	}
	if fs.Changed("namespaced") {
		o.namespaced = namespaced
	}
	if !fs.Changed("api-group") {
		o.apiGroup = "\x00" // not given: every group
	}
	switch o.output {
	case "", "wide", "name", "json":
	default:
		return nil, fmt.Errorf("--output must be wide, name or json, not %q", o.output)
	}
	switch o.sortBy {
	case "", "name", "kind":
	default:
		return nil, fmt.Errorf("--sort-by must be name or kind, not %q", o.sortBy)
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	return o, nil
}

type row struct {
	group, groupVersion string
	r                   *discovery.Resource
}

func run(args []string, stdout, stderr io.Writer) error {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	cfg, stop, embedded, err := o.conn.Config(stderr)
	if err != nil {
		return err
	}
	defer stop()

	start := time.Now() // --stats times discovery, not the embedded cluster's start
	disk := cli.OpenCache(cli.CacheName(cfg, embedded), stderr)
	// As kubectl does, every run revalidates (two 304s when nothing
	// changed), so that what is printed is current; --cached does not ask.
	client, err := discovery.New(cfg, discovery.WithDiskCache(disk), discovery.WithMaxAge(100*365*24*time.Hour))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	get := client.Refresh
	if o.cached {
		get = client.Snapshot
	}
	snap, err := get(ctx)
	if snap == nil {
		return err
	}
	err = snap.Err()
	if rerr := snap.RefreshError(); rerr != nil {
		fmt.Fprintf(stderr, "warning: could not revalidate the cached discovery (%s old): %v\n",
			time.Since(snap.Validated()).Round(time.Second), rerr)
	}
	var partial *discovery.PartialError
	if errors.As(err, &partial) {
		for _, gve := range partial.Errors {
			if v, ok := snap.Version(gve.GroupVersion); ok && v.LastKnown {
				fmt.Fprintf(stderr, "warning: %s: %v (listed with its last known resources)\n", gve.GroupVersion, gve.Err)
			} else {
				fmt.Fprintf(stderr, "warning: %s: %v (its resources are unknown)\n", gve.GroupVersion, gve.Err)
			}
		}
	}

	if len(snap.Groups()) == 0 && err != nil {
		return err
	}
	rows := filter(o, preferred(snap))
	sortRows(o.sortBy, rows)
	if err := print(o, rows, stdout); err != nil {
		return err
	}
	if o.stats {
		st := client.Stats()
		fmt.Fprintf(stderr, "stats: %d requests, %d bytes, %d not modified, %d cache hits, %d disk loads, source %s, %s wall\n",
			st.Requests, st.Bytes, st.NotModified, st.CacheHits, st.DiskLoads, snap.Source(), time.Since(start).Round(time.Millisecond))
	}
	return nil
}

// preferred makes kubectl's selection (client-go's ServerPreferredResources)
// from the snapshot, without converting it to client-go's types: each
// resource of a group in the group's preferred version, or, where that
// does not serve it, in the first version that does. The preferred version
// is the first that is not Stale, as client-go's reading of aggregated
// discovery makes it.
func preferred(snap *discovery.Snapshot) []row {
	var rows []row
	chosen := map[string]int{} // a resource of the group → its row
	for gi := range snap.Groups() {
		g := &snap.Groups()[gi]
		pref := ""
		for _, v := range g.Versions {
			if v.Freshness != discovery.FreshnessStale {
				pref = v.Version
				break
			}
		}
		if pref == "" && len(g.Versions) > 0 {
			pref = g.Versions[0].Version
		}
		clear(chosen)
		for vi := range g.Versions {
			v := &g.Versions[vi]
			gv := schema.GroupVersion{Group: g.Name, Version: v.Version}.String()
			for ri := range v.Resources {
				r := row{group: g.Name, groupVersion: gv, r: &v.Resources[ri]}
				if i, ok := chosen[r.r.Name]; ok {
					if v.Version == pref {
						rows[i] = r
					}
					continue
				}
				chosen[r.r.Name] = len(rows)
				rows = append(rows, r)
			}
		}
	}
	return rows
}

func filter(o *options, rows []row) []row {
	kept := rows[:0]
	for _, r := range rows {
		switch {
		case len(r.r.Verbs) == 0,
			o.apiGroup != "\x00" && o.apiGroup != r.group,
			o.namespaced != nil && *o.namespaced != r.r.Namespaced,
			!containsAll(r.r.Verbs, o.verbs),
			!containsAll(r.r.Categories, o.categories):
			continue
		}
		kept = append(kept, r)
	}
	return kept
}

func containsAll(have, want []string) bool {
	for _, w := range want {
		if !slices.Contains(have, w) {
			return false
		}
	}
	return true
}

// sortRows sorts as kubectl does (by group, or by name or kind), with the
// resource name as the tie-breaker kubectl leaves to map order.
func sortRows(by string, rows []row) {
	slices.SortStableFunc(rows, func(a, b row) int {
		var c int
		switch by {
		case "name":
			c = cmp.Compare(a.r.Name, b.r.Name)
		case "kind":
			c = cmp.Compare(a.r.Kind.Kind, b.r.Kind.Kind)
		default:
			c = cmp.Compare(a.group, b.group)
		}
		return cmp.Or(c, cmp.Compare(a.r.Name, b.r.Name), cmp.Compare(a.group, b.group))
	})
}

func print(o *options, rows []row, stdout io.Writer) error {
	switch o.output {
	case "name":
		for _, r := range rows {
			name := r.r.Name
			if r.group != "" {
				name += "." + r.group
			}
			fmt.Fprintln(stdout, name)
		}
		return nil
	case "json":
		type item struct {
			Name       string   `json:"name"`
			ShortNames []string `json:"shortNames,omitempty"`
			APIVersion string   `json:"apiVersion"`
			Namespaced bool     `json:"namespaced"`
			Kind       string   `json:"kind"`
			Verbs      []string `json:"verbs"`
			Categories []string `json:"categories,omitempty"`
		}
		items := make([]item, 0, len(rows))
		for _, r := range rows {
			items = append(items, item{r.r.Name, r.r.ShortNames, r.groupVersion, r.r.Namespaced, r.r.Kind.Kind, r.r.Verbs, r.r.Categories})
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(items)
	}
	w := tabwriter.NewWriter(stdout, 0, 8, 3, ' ', 0)
	if !o.noHeaders {
		header := "NAME\tSHORTNAMES\tAPIVERSION\tNAMESPACED\tKIND"
		if o.output == "wide" {
			header += "\tVERBS\tCATEGORIES"
		}
		fmt.Fprintln(w, header)
	}
	for _, r := range rows {
		fmt.Fprintf(w, "%s\t%s\t%s\t%v\t%s", r.r.Name, strings.Join(r.r.ShortNames, ","), r.groupVersion, r.r.Namespaced, r.r.Kind.Kind)
		if o.output == "wide" {
			fmt.Fprintf(w, "\t%s\t%s", strings.Join(r.r.Verbs, ","), strings.Join(r.r.Categories, ","))
		}
		fmt.Fprintln(w)
	}
	return w.Flush()
}
