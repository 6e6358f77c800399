// Command fleet is api-resources over every context of a kubeconfig: for
// each resource, how many clusters serve it and in which versions, and
// which clusters failed. The clusters are read through one fleet.Fleet, so
// clusters that serve the same API surface hold it once, and a cluster
// whose surface another has read starts with two 304s.
//
//	go run ./examples/fleet                      # an embedded fleet of fake clusters when there is no kubeconfig
//	go run ./examples/fleet --kubeconfig ~/.kube/config --contexts 'prod-*' --stats
//	go run ./examples/fleet -o name              # the union of `api-resources -o name` over the contexts
//
// A resource's row says how many of the clusters read serve it, and in
// which versions: each cluster's is the version api-resources lists the
// resource in (its group's preferred version, where that serves it), with
// counts where the clusters differ. -o wide adds the clusters that do not
// serve it. A cluster that fails is named on stderr, with why, and the
// command exits with status 1 once it has printed what the others serve.
//
// The disk cache lives in --cache-dir, by default the fleet directory of
// the cache api-resources uses ($KUBECACHEDIR, else the user cache
// directory's kubeatlas).
package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubeatlas/kubeatlas/discovery"
	"github.com/kubeatlas/kubeatlas/examples/internal/apiresources"
	"github.com/kubeatlas/kubeatlas/examples/internal/cli"
	"github.com/kubeatlas/kubeatlas/fleet"
)

func main() {
	os.Exit(cli.Status(run(os.Args[1:], os.Stdout, os.Stderr), os.Stderr))
}

type options struct {
	kubeconfig, contexts, output, cacheDir, requestTimeout string
	concurrency                                            int
	stats                                                  bool
}

func run(args []string, stdout, stderr io.Writer) error {
	var o options
	fs := cli.NewFlagSet("fleet")
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "path to the kubeconfig file (default: the files of $KUBECONFIG, then ~/.kube/config)")
	fs.StringVar(&o.contexts, "contexts", "*", "the contexts to read, by glob (path.Match: *, ?, [a-z])")
	fs.StringVarP(&o.output, "output", "o", "", "output format: wide (adds the clusters that do not serve each resource) or name")
	defaultCache, cacheErr := cli.CacheRoot()
	if cacheErr == nil {
		defaultCache = filepath.Join(defaultCache, "fleet")
	}
	fs.StringVar(&o.cacheDir, "cache-dir", defaultCache, "the fleet's disk cache (\"\": none)")
	fs.IntVar(&o.concurrency, "concurrency", fleet.DefaultConcurrency, "how many clusters to read at once")
	fs.StringVar(&o.requestTimeout, "request-timeout", fleet.DefaultRefreshTimeout.String(), "how long to wait for one cluster's discovery (1s, 2m, or seconds; 0: no limit)")
	fs.BoolVar(&o.stats, "stats", false, "print clusters, surfaces, requests, bytes, 304s, cache hits, heap in use and wall time to stderr")
	if err := cli.Parse(fs, args, stderr); err != nil {
		return err
	}
	switch o.output {
	case "", "wide", "name":
	default:
		return fmt.Errorf("--output must be wide or name, not %q", o.output)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if _, err := path.Match(o.contexts, ""); err != nil {
		return fmt.Errorf("invalid --contexts %q: %w", o.contexts, err)
	}
	timeout, err := clientcmd.ParseTimeout(o.requestTimeout) // kubectl's own parsing
	if err == nil && timeout < 0 {
		err = errors.New("it must not be negative")
	}
	if err != nil {
		return fmt.Errorf("invalid --request-timeout %q: %w", o.requestTimeout, err)
	}
	if timeout == 0 {
		timeout = 100 * 365 * 24 * time.Hour
	}
	if o.concurrency < 1 {
		return fmt.Errorf("--concurrency must be at least 1, not %d", o.concurrency)
	}
	opts := []fleet.Option{fleet.WithRefreshTimeout(timeout), fleet.WithConcurrency(o.concurrency)}

	kubeconfigs := kubeconfigFiles(o.kubeconfig)
	if len(kubeconfigs) == 0 {
		kubeconfig, url, stop, err := cli.StartEmbeddedFleet(stderr)
		if err != nil {
			return err
		}
		defer stop()
		fmt.Fprintf(stderr, "No kubeconfig found: using an embedded fleet of %d fake clusters on %d API surfaces (the discovery of a real v1.36.3 server plus 200 CRDs, in 20 to %d groups) at %s\n",
			cli.EmbeddedFleetClusters, cli.EmbeddedFleetSurfaces, 20+cli.EmbeddedFleetSurfaces-1, url)
		kubeconfigs = []string{kubeconfig}
		// Its port, and so every cluster's URL, changes from run to run:
		// a disk cache would keep entries no later run reads.
		if !fs.Changed("cache-dir") {
			o.cacheDir, cacheErr = "", nil
		}
	}
	start := time.Now() // --stats times the fleet, not the embedded one's start

	if o.cacheDir == "" && cacheErr != nil {
		fmt.Fprintf(stderr, "warning: running without a disk cache: %v\n", cacheErr)
	}
	f, err := newFleet(o.cacheDir, opts, stderr)
	if err != nil {
		return err
	}
	var unusable []error // contexts that could not be added
	for _, file := range kubeconfigs {
		_, err := f.AddKubeconfig(file, o.contexts)
		for _, err := range unjoin(err) {
			// As kubectl merges $KUBECONFIG, the first file that names a
			// context wins.
			if !errors.Is(err, fleet.ErrExists) {
				unusable = append(unusable, err)
			}
		}
	}
	if len(f.IDs()) == 0 {
		if len(unusable) > 0 {
			return errors.Join(unusable...)
		}
		return fmt.Errorf("no context of %s matches --contexts %q", strings.Join(kubeconfigs, ", "), o.contexts)
	}

	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt)
	defer cancel()
	var round *fleet.RoundError
	if err := f.Refresh(ctx); err != nil && !errors.As(err, &round) {
		return err
	}

	var read []clusterSnapshot
	for _, id := range f.IDs() {
		if c, ok := f.Cluster(id); ok && c.Snapshot() != nil {
			read = append(read, clusterSnapshot{id, c.Snapshot()})
		}
	}
	for _, c := range read {
		apiresources.WarnPartial(stderr, "cluster "+c.id+": ", c.snap)
	}
	// With no cluster read there is nothing to list: a table would be its
	// header alone, above the errors that say why.
	if len(read) > 0 {
		if err := print(stdout, o.output, aggregate(read), read); err != nil {
			return err
		}
	}

	for _, err := range unusable {
		fmt.Fprintf(stderr, "error: %v\n", err)
	}
	var failed []*fleet.ClusterError
	if round != nil {
		failed = round.Failed
	}
	for _, ce := range failed {
		if ce.Last != nil {
			fmt.Fprintf(stderr, "error: cluster %s: %v (listed with its cached discovery, %s old)\n",
				ce.Cluster, ce.Err, time.Since(ce.Last.Validated()).Round(time.Second))
		} else {
			fmt.Fprintf(stderr, "error: cluster %s: %v\n", ce.Cluster, ce.Err)
		}
	}
	if o.stats {
		printStats(stderr, f, start)
	}
	if n := len(failed) + len(unusable); n > 0 {
		return fmt.Errorf("%d of %d contexts failed", n, len(f.IDs())+len(unusable))
	}
	return nil
}

// kubeconfigFiles is where kubectl reads its kubeconfig: the file
// --kubeconfig names (which must exist), else the files of $KUBECONFIG
// that exist, else ~/.kube/config if it exists. None means the embedded
// fleet. Each file is read on its own (fleet.AddKubeconfig): a context
// must name a cluster and user of its own file.
func kubeconfigFiles(explicit string) []string {
	if explicit != "" {
		return []string{explicit}
	}
	var out []string
	for _, file := range clientcmd.NewDefaultClientConfigLoadingRules().GetLoadingPrecedence() {
		if fi, err := os.Stat(file); file != "" && err == nil && fi.Mode().IsRegular() && !slices.Contains(out, file) {
			out = append(out, file)
		}
	}
	return out
}

// newFleet makes the fleet, with its disk cache in dir if dir is not "".
// As for api-resources, a cache that cannot be used is not a reason to
// fail: the fleet runs without one, after a warning.
func newFleet(dir string, opts []fleet.Option, stderr io.Writer) (*fleet.Fleet, error) {
	if dir != "" {
		f, err := fleet.New(append(opts, fleet.WithCacheDir(dir))...)
		if err == nil {
			return f, nil
		}
		fmt.Fprintf(stderr, "warning: running without a disk cache: %v\n", err)
	}
	return fleet.New(opts...)
}

// unjoin lists the errors errors.Join joined (AddKubeconfig's, one per
// context).
func unjoin(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

type clusterSnapshot struct {
	id   string
	snap *discovery.Snapshot
}

// resource is one resource of the fleet: what api-resources lists of it,
// summed over the clusters.
type resource struct {
	row      apiresources.Row // as the first surface that serves it lists it
	clusters int              // clusters that serve it
	versions []count          // the versions they list it in
	kinds    []string         // its kinds, in case surfaces differ
	scopes   []bool           // whether it is namespaced, likewise
	surfaces []*discovery.Snapshot
}

type count struct {
	version string
	n       int
}

type resourceKey struct{ group, name string }

// aggregate sums what api-resources would print for each cluster (its
// selection, apiresources.Select), once per surface: clusters whose
// snapshots share a content (the same Generation) list the same rows, so
// the work and the memory grow with the surfaces, not the clusters.
func aggregate(read []clusterSnapshot) []*resource {
	// The clusters of each content, in the order first read.
	byGen := map[uint64]int{}
	var surfaces []*discovery.Snapshot
	var weights []int
	for _, c := range read {
		i, ok := byGen[c.snap.Generation()]
		if !ok {
			i = len(surfaces)
			byGen[c.snap.Generation()] = i
			surfaces = append(surfaces, c.snap)
			weights = append(weights, 0)
		}
		weights[i]++
	}
	index := map[resourceKey]*resource{}
	var out []*resource
	for i, snap := range surfaces {
		n := weights[i]
		for _, row := range apiresources.Select(snap, &apiresources.Options{}) {
			k := resourceKey{row.Group, row.Resource.Name}
			r := index[k]
			if r == nil {
				r = &resource{row: row}
				index[k] = r
				out = append(out, r)
			}
			r.clusters += n
			r.surfaces = append(r.surfaces, snap)
			r.versions = addCount(r.versions, versionOf(row.GroupVersion), n)
			if !slices.Contains(r.kinds, row.Resource.Kind.Kind) {
				r.kinds = append(r.kinds, row.Resource.Kind.Kind)
			}
			if !slices.Contains(r.scopes, row.Resource.Namespaced) {
				r.scopes = append(r.scopes, row.Resource.Namespaced)
			}
		}
	}
	slices.SortFunc(out, func(a, b *resource) int { return apiresources.CompareRows("", a.row, b.row) })
	for _, r := range out {
		// The most common first; kube's order (v1 before v1beta1) between equals.
		slices.SortFunc(r.versions, func(a, b count) int {
			return cmp.Or(cmp.Compare(b.n, a.n), -version.CompareKubeAwareVersionStrings(a.version, b.version))
		})
	}
	return out
}

func addCount(counts []count, v string, n int) []count {
	for i := range counts {
		if counts[i].version == v {
			counts[i].n += n
			return counts
		}
	}
	return append(counts, count{v, n})
}

// versionOf is the version of "group/version", or of "version" (core).
func versionOf(gv string) string {
	return gv[strings.LastIndexByte(gv, '/')+1:]
}

func print(stdout io.Writer, output string, resources []*resource, read []clusterSnapshot) error {
	if output == "name" {
		for _, r := range resources {
			fmt.Fprintln(stdout, r.row.Name())
		}
		return nil
	}
	w := tabwriter.NewWriter(stdout, 0, 8, 3, ' ', 0)
	header := "NAME\tAPIGROUP\tNAMESPACED\tKIND\tCLUSTERS\tVERSIONS"
	if output == "wide" {
		header += "\tNOT SERVED BY"
	}
	fmt.Fprintln(w, header)
	for _, r := range resources {
		scopes := make([]string, len(r.scopes))
		for i, s := range r.scopes {
			scopes[i] = fmt.Sprint(s)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d/%d\t%s", r.row.Resource.Name, r.row.Group, strings.Join(scopes, ","),
			strings.Join(r.kinds, ","), r.clusters, len(read), versions(r))
		if output == "wide" {
			fmt.Fprintf(w, "\t%s", notServedBy(r, read))
		}
		fmt.Fprintln(w)
	}
	return w.Flush()
}

// versions is "v1" where every cluster lists the resource in v1, else the
// versions with their clusters: "v1(998) v1beta1(2)".
func versions(r *resource) string {
	if len(r.versions) == 1 {
		return r.versions[0].version
	}
	parts := make([]string, len(r.versions))
	for i, c := range r.versions {
		parts[i] = fmt.Sprintf("%s(%d)", c.version, c.n)
	}
	return strings.Join(parts, " ")
}

// notServedBy lists the clusters read that do not serve r, the first
// maxListed of them and how many more.
func notServedBy(r *resource, read []clusterSnapshot) string {
	const maxListed = 10
	if r.clusters == len(read) {
		return ""
	}
	var ids []string
	missing := 0
	for _, c := range read {
		if slices.ContainsFunc(r.surfaces, func(s *discovery.Snapshot) bool { return s.Generation() == c.snap.Generation() }) {
			continue
		}
		if missing++; missing <= maxListed {
			ids = append(ids, c.id)
		}
	}
	if missing > maxListed {
		ids = append(ids, fmt.Sprintf("(+%d more)", missing-maxListed))
	}
	return strings.Join(ids, ",")
}

// printStats prints the fleet's counters and the heap in use once garbage
// is collected: what holding the fleet costs.
func printStats(stderr io.Writer, f *fleet.Fleet, start time.Time) {
	st := f.Stats()
	wall := time.Since(start)
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	fmt.Fprintf(stderr, "stats: %d clusters, %d failed, %d surfaces, %d requests, %d bytes, %d not modified, %d surface hits, %d disk loads, %.1f MiB heap in use, %s wall\n",
		st.Clusters, st.Failing, st.Surfaces, st.Requests, st.Bytes, st.NotModified, st.SurfaceHits, st.DiskLoads,
		float64(ms.HeapInuse)/(1<<20), wall.Round(time.Millisecond))
	runtime.KeepAlive(f)
}
