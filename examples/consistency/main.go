// Command consistency tells whether the API servers of a kubeconfig's
// cluster serve the same discovery (they do not while an HA control plane
// is upgraded), from what the cluster tells about itself: its identity
// leases, each server's own view (profile=nopeer) and version, asked at the
// server's own address where it can be reached and otherwise sampled
// through the cluster's URL, and the StorageVersion API where it is served.
// It prints a row per server, what not every server serves, and the
// resources whose storage versions differ.
//
// Exit status, by the check's verdict: 0 when every server was seen and
// they agree (consistency.Consistent), 1 when servers were seen to differ
// (Inconsistent: two servers' discovery or storage versions, or a server
// whose merged discovery serves more than its own, which shows a peer
// serving what it does not, even where only that server was seen: listed
// under SERVED THROUGH A PEER where no difference names them), 2 when
// it cannot tell (Unknown: a server could not be reached or told apart,
// those seen agreeing; or the check failed or ran out of time). When some
// servers the cluster names did not answer but every sample through the
// cluster's URL reached a server that did
// (consistency.EveryAnsweringServerSeen), it names the others, and exits 2
// where those that answered agree. A bad flag or argument exits 2 too: the
// other example commands exit 1 on any error, but 1 here says the servers
// disagree.
//
// The whole check has --timeout (default 1m) to finish: servers asked at
// their own addresses have 10 s of it, all together.
//
//	go run ./examples/consistency            # the embedded fake cluster: two servers, one upgraded
//	go run ./examples/consistency --kubeconfig ~/.kube/config --through-url
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubeatlas/kubeatlas/consistency"
	"github.com/kubeatlas/kubeatlas/discovery"
	"github.com/kubeatlas/kubeatlas/examples/internal/cli"
)

// Exit statuses.
const (
	agree      = 0
	disagree   = 1
	cannotTell = 2
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

type options struct {
	conn       cli.Connection
	samples    int
	throughURL bool
	timeout    time.Duration
	apiServers []string
}

// defaultTimeout is --timeout's default: time for the servers asked
// directly (10 s) and for every sample through the URL.
const defaultTimeout = time.Minute

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o := &options{}
	fs := cli.NewFlagSet("consistency")
	o.conn.Register(fs)
	fs.IntVar(&o.samples, "samples", consistency.DefaultSamples, "requests through the cluster's URL, each on a new connection, to reach servers that cannot be asked directly")
	fs.BoolVar(&o.throughURL, "through-url", false, "ask only through the cluster's URL, as from outside the cluster's network")
	fs.DurationVar(&o.timeout, "timeout", defaultTimeout, "how long the whole check may take (0: no limit)")
	fs.StringSliceVar(&o.apiServers, "api-server", nil, "host:port of an API server to send credentials to when asking it directly, beside those the kubernetes EndpointSlices list (which cannot list loopback addresses); repeatable")
	if err := cli.Parse(fs, args, stderr); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return agree
		}
		fmt.Fprintln(stderr, "error:", err)
		return cannotTell
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "error: unexpected arguments %q\n", fs.Args())
		return cannotTell
	}
	// The embedded cluster: two API servers behind one URL, each
	// connection to one of them, the second upgraded first.
	o.conn.EmbeddedArgs = []string{"--backends", "2", "--sticky", "--upgraded-backend", "--backend-versions", "v1.36.3,v1.37.1"}
	o.conn.Embedded = "two API servers behind one URL, v1.36.3 and v1.37.1, the second upgraded first: it alone serves upgraded.example.com/v1; each the discovery of a real v1.36.3 server plus 200 CRDs"
	cfg, stop, _, err := o.conn.Config(stderr)
	if err != nil {
		fmt.Fprintln(stderr, "error:", err)
		return cannotTell
	}
	defer stop()
	c, err := discovery.New(cfg)
	if err != nil {
		fmt.Fprintln(stderr, "error:", err)
		return cannotTell
	}
	opts := []consistency.Option{consistency.WithSamples(max(o.samples, 1))}
	if o.throughURL {
		opts = append(opts, consistency.WithURLOnly())
	}
	if len(o.apiServers) > 0 {
		opts = append(opts, consistency.WithAPIServers(o.apiServers...))
	}
	if o.timeout < 0 {
		fmt.Fprintf(stderr, "error: --timeout %v is negative\n", o.timeout)
		return cannotTell
	}
	if o.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.timeout)
		defer cancel()
	}
	r, err := consistency.Check(ctx, c, opts...)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			fmt.Fprintf(stderr, "error: the check did not finish within --timeout %v: %v\n", o.timeout, err)
		} else {
			fmt.Fprintln(stderr, "error:", err)
		}
		return cannotTell
	}
	report(stdout, r)
	if r.NotAskedDirectly != nil {
		fmt.Fprintf(stdout, "\nNo server was asked at its own address: %v; the servers were sampled through the URL instead.\n", r.NotAskedDirectly)
	}
	if r.Certainty == consistency.EveryAnsweringServerSeen {
		var silent []string
		for _, s := range r.Servers {
			if s.Alive && s.View == nil {
				silent = append(silent, s.Name())
			}
		}
		fmt.Fprintf(stdout, "\nNot seen, and reached by no sample through the URL (%d samples): %s.\n", r.Samples, strings.Join(silent, ", "))
	}
	switch r.Verdict() {
	case consistency.Inconsistent:
		fmt.Fprintf(stdout, "\nThe API servers disagree (%s, %d samples through the URL).\n", r.Certainty, r.Samples)
		return disagree
	case consistency.Consistent:
		fmt.Fprintf(stdout, "\nEvery API server serves the same discovery (%s, %d samples through the URL).\n", r.Certainty, r.Samples)
		return agree
	}
	if r.Certainty == consistency.EveryAnsweringServerSeen {
		fmt.Fprintf(stdout, "\nEvery API server that answers serves the same discovery, but not every server was seen (%d samples through the URL): cannot tell.\n", r.Samples)
	} else {
		fmt.Fprintf(stdout, "\nThe servers seen agree, but not every server was seen (%d samples through the URL): cannot tell.\n", r.Samples)
	}
	return cannotTell
}

func report(w io.Writer, r *consistency.Report) {
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	fmt.Fprintln(tw, "SERVER\tIDENTITY\tVERSION\tREACHED\tDISCOVERY\tFROM PEERS\tERROR")
	for _, s := range r.Servers {
		reached := "-"
		switch {
		case s.Address != "":
			reached = s.Address
		case s.View != nil:
			reached = fmt.Sprintf("through the URL (%d samples)", s.Samples)
		}
		etag := strings.Trim(s.ETag, `"`)
		if len(etag) > 12 {
			etag = etag[:12]
		}
		errText := ""
		if s.Err != nil {
			errText = s.Err.Error()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\n", s.Name(), or(s.Identity), or(s.Version), reached, or(etag), len(s.FromPeers), errText)
	}
	_ = tw.Flush()
	if len(r.Differences) > 0 {
		fmt.Fprintln(w, "\nNOT SERVED BY EVERY SERVER")
		for _, d := range r.Differences {
			what := d.GroupVersion.String()
			if d.Resource != "" {
				what += " " + d.Resource
			}
			fmt.Fprintf(w, "%s: served by %s; not by %s\n", what, strings.Join(d.ServedBy, ", "), strings.Join(d.MissingFrom, ", "))
		}
	}
	// What a server's merged discovery serves beyond its own (KEP-4020),
	// seen from that server alone, where no difference between the views
	// seen names it (its peer was not seen).
	named := map[schema.GroupVersionResource]bool{}
	for _, d := range r.Differences {
		named[d.GroupVersion.WithResource(d.Resource)] = true
	}
	var fromPeers []string
	for _, s := range r.Servers {
		for _, gvr := range s.FromPeers {
			if !named[gvr] {
				fromPeers = append(fromPeers, fmt.Sprintf("%s %s: served by a peer of %s, not by %[3]s itself\n", gvr.GroupVersion(), gvr.Resource, s.Name()))
			}
		}
	}
	if len(fromPeers) > 0 {
		fmt.Fprintln(w, "\nSERVED THROUGH A PEER")
		for _, line := range fromPeers {
			fmt.Fprint(w, line)
		}
	}
	if len(r.StorageVersions) > 0 {
		fmt.Fprintln(w, "\nSTORAGE VERSIONS THAT DIFFER")
		for _, d := range r.StorageVersions {
			var parts []string
			for server, v := range d.Encodings {
				parts = append(parts, server+" "+v)
			}
			slices.Sort(parts)
			fmt.Fprintf(w, "%s: %s\n", d.Resource, strings.Join(parts, ", "))
		}
	}
}

func or(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
