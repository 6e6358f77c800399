// Command watch-apis prints a cluster's discovery changes as they happen:
// resources added and removed, group-versions whose freshness flips (an
// aggregated API server going down or coming back). It runs
// discovery/watch: CRDs and APIServices are watched, and discovery is revalidated
// only when an event can change it, so an idle cluster costs a watch and
// two 304s a minute. On exit it prints what that cost.
//
//	go run ./examples/watch-apis                       # the embedded fake cluster, with a demo CRD coming and going
//	go run ./examples/watch-apis --kubeconfig ~/.kube/config --for 10m
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"time"

	"github.com/kubeatlas/kubeatlas/discovery"
	"github.com/kubeatlas/kubeatlas/discovery/watch"
	"github.com/kubeatlas/kubeatlas/examples/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(cli.Status(err, os.Stderr))
}

type options struct {
	conn                      cli.Connection
	duration                  time.Duration
	upgradePoll, fallbackPoll time.Duration
}

func parseFlags(args []string, stderr io.Writer) (*options, error) {
	o := &options{}
	fs := cli.NewFlagSet("watch-apis")
	o.conn.Register(fs)
	fs.DurationVar(&o.duration, "for", 0, "stop after this long (default: until interrupted)")
	fs.DurationVar(&o.upgradePoll, "upgrade-poll", watch.DefaultUpgradePoll, "revalidate this often when no event asks to (catches API server upgrades)")
	fs.DurationVar(&o.fallbackPoll, "fallback-poll", watch.DefaultFallbackPoll, "poll this often when CRDs and APIServices may not be watched")
	if err := cli.Parse(fs, args, stderr); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	return o, nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	o.conn.EmbeddedArgs = []string{"--demo-crd-every", "3s"} // something to watch
	cfg, stop, _, err := o.conn.Config(stderr)
	if err != nil {
		return err
	}
	defer stop()
	if o.duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.duration)
		defer cancel()
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	client, err := discovery.New(cfg, discovery.WithLogger(logger))
	if err != nil {
		return err
	}
	start := time.Now()
	var mu sync.Mutex // changes are printed one at a time
	first := true
	client.Subscribe(func(ch discovery.Change) {
		mu.Lock()
		defer mu.Unlock()
		if first && ch.Old == nil {
			first = false
			fmt.Fprintf(stdout, "%s watching %d group-versions, %d resources\n", stamp(), len(ch.AddedVersions), len(ch.AddedResources))
			return
		}
		printChange(stdout, ch)
	})
	w, err := watch.New(client, watch.WithUpgradePoll(o.upgradePoll), watch.WithFallbackPoll(o.fallbackPoll))
	if err != nil {
		return err
	}
	err = w.Run(ctx)
	st, ws := client.Stats(), w.Stats()
	mode := "watching"
	if ws.Forbidden {
		mode = fmt.Sprintf("polling every %v (may not watch CRDs and APIServices)", o.fallbackPoll)
	}
	fmt.Fprintf(stdout, "%s %v %s: %d watch events (%d could change discovery), %d watch requests, %d discovery requests (%d not modified), %d bytes\n",
		stamp(), time.Since(start).Round(time.Millisecond), mode, ws.Events, ws.Triggers, ws.Requests, st.Requests, st.NotModified, st.Bytes)
	return err
}

func stamp() string { return time.Now().Format("15:04:05.000") }

func printChange(w io.Writer, ch discovery.Change) {
	t := stamp()
	for _, gv := range ch.AddedVersions {
		fmt.Fprintf(w, "%s + %s\n", t, gv)
	}
	for _, gvr := range ch.AddedResources {
		fmt.Fprintf(w, "%s +   %s %s\n", t, gvr.GroupVersion(), gvr.Resource)
	}
	for _, gvr := range ch.ChangedResources {
		fmt.Fprintf(w, "%s ~   %s %s\n", t, gvr.GroupVersion(), gvr.Resource)
	}
	for _, gvr := range ch.RemovedResources {
		fmt.Fprintf(w, "%s -   %s %s\n", t, gvr.GroupVersion(), gvr.Resource)
	}
	for _, gv := range ch.RemovedVersions {
		fmt.Fprintf(w, "%s - %s\n", t, gv)
	}
	for _, gv := range ch.ChangedVersions {
		freshness := "?"
		if v, ok := ch.New.Version(gv); ok {
			freshness = v.Freshness.String()
		}
		fmt.Fprintf(w, "%s ~ %s freshness %s\n", t, gv, freshness)
	}
}
