// Package apiresources is kubectl api-resources on kubeatlas, shared by
// examples/api-resources and the kubectl-atlas plugin: its flags, kubectl's
// selection of resources (preferred versions, filters, order) and its
// output, byte for byte. The commands bring the connection.
package apiresources

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubeatlas/kubeatlas/discovery"
	"github.com/kubeatlas/kubeatlas/discovery/surface"
)

// Options are kubectl api-resources' flags, and --stats.
type Options struct {
	Output, SortBy string
	// APIGroup is nil when --api-group is not given (every group); ""
	// is the core group.
	APIGroup *string
	// Namespaced is nil when --namespaced is not given (both scopes).
	Namespaced        *bool
	Verbs, Categories []string
	Cached, Stats     bool
	NoHeaders         bool

	// what --api-group and --namespaced parse into, until Complete
	// knows whether they were given
	apiGroup   string
	namespaced bool
}

// AddFlags adds the flags as kubectl spells them.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVarP(&o.Output, "output", "o", "", "output format: wide, name or json")
	fs.StringVar(&o.apiGroup, "api-group", "", "limit to resources in this API group (\"\" is the core group, when given)")
	fs.BoolVar(&o.namespaced, "namespaced", false, "true: only namespaced resources; false: only cluster-scoped ones (default: both)") // its default is unused (Complete reads fs.Changed); true would print "(default true)"
	fs.StringSliceVar(&o.Verbs, "verbs", nil, "limit to resources that support all these verbs (comma-separated, or repeated)")
	fs.StringSliceVar(&o.Categories, "categories", nil, "limit to resources in all these categories (comma-separated, or repeated)")
	fs.StringVar(&o.SortBy, "sort-by", "", "sort by name or kind (default: API group)")
	fs.BoolVar(&o.Cached, "cached", false, "use the cached list of resources if there is one, without asking the server")
	fs.BoolVar(&o.Stats, "stats", false, "print requests, bytes, 304s, cache hits and wall time to stderr")
	fs.BoolVar(&o.NoHeaders, "no-headers", false, "do not print headers")
}

// Complete checks the flags once fs is parsed, and sets APIGroup and
// Namespaced from what was given.
func (o *Options) Complete(fs *pflag.FlagSet) error {
	if fs.Changed("namespaced") {
		o.Namespaced = &o.namespaced
	}
	if fs.Changed("api-group") {
		o.APIGroup = &o.apiGroup
	}
	switch o.Output {
	case "", "wide", "name", "json":
	default:
		return fmt.Errorf("--output must be wide, name or json, not %q", o.Output)
	}
	switch o.SortBy {
	case "", "name", "kind":
	default:
		return fmt.Errorf("--sort-by must be name or kind, not %q", o.SortBy)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	return nil
}

// Row is a resource as kubectl api-resources lists it: in the version
// kubectl chose for it.
type Row struct {
	Group, GroupVersion string
	Resource            *surface.Resource
}

// Name is the resource as -o name prints it: resource.group, or resource
// for the core group.
func (r Row) Name() string {
	if r.Group == "" {
		return r.Resource.Name
	}
	return r.Resource.Name + "." + r.Group
}

// Select is what Run prints of snap, in the order it prints it: kubectl's
// selection of versions, o's filters, o's order.
func Select(snap *discovery.Snapshot, o *Options) []Row {
	rows := filter(o, preferred(snap))
	sortRows(o.SortBy, rows)
	return rows
}

// Run prints the resources client's cluster serves as kubectl does. As
// kubectl does, it revalidates first (two 304s when nothing changed), so
// that what is printed is current; with Cached it does not ask. Where the
// server cannot be reached it prints the cached list and says so on
// stderr; an unreachable group-version is a warning. start is when the
// wall time --stats prints began.
func Run(ctx context.Context, client *discovery.Client, o *Options, start time.Time, stdout, stderr io.Writer) error {
	get := client.Refresh
	if o.Cached {
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
	WarnPartial(stderr, "", snap)

	if len(snap.Groups()) == 0 && err != nil {
		return err
	}
	if err := print(o, Select(snap, o), stdout); err != nil {
		return err
	}
	if o.Stats {
		st := client.Stats()
		_, source := snap.Sources()
		fmt.Fprintf(stderr, "stats: %d requests, %d bytes, %d not modified, %d cache hits, %d disk loads, source %s, %s wall\n",
			st.Requests, st.Bytes, st.NotModified, st.CacheHits, st.DiskLoads, source, time.Since(start).Round(time.Millisecond))
	}
	return nil
}

// preferred makes kubectl's selection (client-go's ServerPreferredResources)
// from the snapshot, without converting it to client-go's types: each
// resource of a group in the group's preferred version, or, where that
// does not serve it, in the first version that does. The preferred version
// is the first that is not Stale, as client-go's reading of aggregated
// discovery makes it.
func preferred(snap *discovery.Snapshot) []Row {
	var rows []Row
	chosen := map[string]int{} // a resource of the group → its row
	for gi := range snap.Groups() {
		g := &snap.Groups()[gi]
		pref := ""
		for _, v := range g.Versions {
			if v.Freshness != surface.FreshnessStale {
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
				r := Row{Group: g.Name, GroupVersion: gv, Resource: &v.Resources[ri]}
				if i, ok := chosen[r.Resource.Name]; ok {
					if v.Version == pref {
						rows[i] = r
					}
					continue
				}
				chosen[r.Resource.Name] = len(rows)
				rows = append(rows, r)
			}
		}
	}
	return rows
}

func filter(o *Options, rows []Row) []Row {
	kept := rows[:0]
	for _, r := range rows {
		switch {
		case len(r.Resource.Verbs) == 0,
			o.APIGroup != nil && *o.APIGroup != r.Group,
			o.Namespaced != nil && *o.Namespaced != r.Resource.Namespaced,
			!containsAll(r.Resource.Verbs, o.Verbs),
			!containsAll(r.Resource.Categories, o.Categories):
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
func sortRows(by string, rows []Row) {
	slices.SortStableFunc(rows, func(a, b Row) int { return CompareRows(by, a, b) })
}

// CompareRows orders rows as Select does with SortBy by: by group (""),
// name or kind, then by resource name and group.
func CompareRows(by string, a, b Row) int {
	var c int
	switch by {
	case "name":
		c = cmp.Compare(a.Resource.Name, b.Resource.Name)
	case "kind":
		c = cmp.Compare(a.Resource.Kind.Kind, b.Resource.Kind.Kind)
	default:
		c = cmp.Compare(a.Group, b.Group)
	}
	return cmp.Or(c, cmp.Compare(a.Resource.Name, b.Resource.Name), cmp.Compare(a.Group, b.Group))
}

func print(o *Options, rows []Row, stdout io.Writer) error {
	switch o.Output {
	case "name":
		for _, r := range rows {
			fmt.Fprintln(stdout, r.Name())
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
			res := r.Resource
			items = append(items, item{res.Name, res.ShortNames, r.GroupVersion, res.Namespaced, res.Kind.Kind, res.Verbs, res.Categories})
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(items)
	}
	w := tabwriter.NewWriter(stdout, 0, 8, 3, ' ', 0)
	if !o.NoHeaders {
		header := "NAME\tSHORTNAMES\tAPIVERSION\tNAMESPACED\tKIND"
		if o.Output == "wide" {
			header += "\tVERBS\tCATEGORIES"
		}
		fmt.Fprintln(w, header)
	}
	for _, r := range rows {
		res := r.Resource
		fmt.Fprintf(w, "%s\t%s\t%s\t%v\t%s", res.Name, strings.Join(res.ShortNames, ","), r.GroupVersion, res.Namespaced, res.Kind.Kind)
		if o.Output == "wide" {
			fmt.Fprintf(w, "\t%s\t%s", strings.Join(res.Verbs, ","), strings.Join(res.Categories, ","))
		}
		fmt.Fprintln(w)
	}
	return w.Flush()
}

// WarnPartial says on stderr which group-versions of snap are not current,
// and whether they are listed with their last known resources; each line
// starts "warning: " and then prefix (fleet names the cluster there).
func WarnPartial(stderr io.Writer, prefix string, snap *discovery.Snapshot) {
	var partial *discovery.PartialError
	if !errors.As(snap.Err(), &partial) {
		return
	}
	for _, gve := range partial.Errors {
		if v, ok := snap.Version(gve.GroupVersion); ok && v.LastKnown {
			fmt.Fprintf(stderr, "warning: %s%s: %v (listed with its last known resources)\n", prefix, gve.GroupVersion, gve.Err)
		} else {
			fmt.Fprintf(stderr, "warning: %s%s: %v (its resources are unknown)\n", prefix, gve.GroupVersion, gve.Err)
		}
	}
}
