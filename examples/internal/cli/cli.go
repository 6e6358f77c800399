// Package cli holds what the example commands share: kubectl's connection
// flags, the embedded fake cluster used when there is no kubeconfig (a
// child process, embedded.go, unless the command starts a light one in
// process: examples/internal/lightcluster), and the cache directory.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubeatlas/kubeatlas/diskcache"
)

// Connection is kubectl's way of naming a cluster.
type Connection struct {
	Kubeconfig, Context, Server, Token string
	Insecure                           bool
	// RequestTimeout is kubectl's --request-timeout: "0" (no limit), a
	// number of seconds, or a duration.
	RequestTimeout string
	// EmbeddedArgs are more flags for examples/fake-apiserver, should
	// Config start the embedded cluster.
	EmbeddedArgs []string
	// Embedded is what the embedded cluster is, as Config says when it
	// starts it (EmbeddedArgs may make it more than one server); default:
	// DefaultEmbedded.
	Embedded string
	// StartEmbedded, when set, starts the embedded cluster in this process
	// instead of examples/fake-apiserver in a child (EmbeddedArgs are then
	// unused): examples/internal/lightcluster.Start, for the commands that
	// read discovery only. It returns the cluster's base URL and a function
	// that stops it.
	StartEmbedded func(stderr io.Writer) (url string, stop func(), err error)
}

// Register adds the flags as kubectl spells them.
func (c *Connection) Register(fs *pflag.FlagSet) {
	fs.StringVar(&c.Kubeconfig, "kubeconfig", "", "path to the kubeconfig file (default: $KUBECONFIG, then ~/.kube/config)")
	fs.StringVar(&c.Context, "context", "", "the kubeconfig context to use")
	fs.StringVarP(&c.Server, "server", "s", "", "the address of the Kubernetes API server")
	fs.StringVar(&c.Token, "token", "", "bearer token for authentication to the API server")
	fs.BoolVar(&c.Insecure, "insecure-skip-tls-verify", false, "do not verify the server's certificate")
	fs.StringVar(&c.RequestTimeout, "request-timeout", "0", "how long to wait for a single server request (1s, 2m, or seconds; 0: no limit of its own, though a discovery refresh gives up after 30s and the command after 1m)")
}

// requestTimeout parses --request-timeout as kubectl does.
func (c *Connection) requestTimeout() (time.Duration, error) {
	s := c.RequestTimeout
	if s == "" {
		return 0, nil
	}
	d, err := clientcmd.ParseTimeout(s) // kubectl's own parsing
	if err == nil && d < 0 {
		err = errors.New("it must not be negative")
	}
	if err != nil {
		return 0, fmt.Errorf("invalid --request-timeout %q: %w", s, err)
	}
	return d, nil
}

// NewFlagSet is a flag set with kubectl's semantics, from the flag library
// kubectl uses (spf13/pflag): flags after arguments, boolean flags without
// a value, repeated list flags that accumulate. Its errors are not printed
// by it, so that the command prints each once.
func NewFlagSet(name string) *pflag.FlagSet {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// Parse parses args; with -h or --help it prints the flags to stderr and
// returns ErrHelp.
func Parse(fs *pflag.FlagSet, args []string, stderr io.Writer) error {
	err := fs.Parse(args)
	if errors.Is(err, pflag.ErrHelp) {
		fmt.Fprintf(stderr, "Usage of %s:\n%s", fs.Name(), fs.FlagUsages())
	}
	return err
}

// ParseUsage is Parse for a command that takes arguments: its --help
// begins with usage, the command line ("explain [flags] RESOURCE[.FIELD]"),
// then the flags.
func ParseUsage(fs *pflag.FlagSet, usage string, args []string, stderr io.Writer) error {
	err := fs.Parse(args)
	if errors.Is(err, pflag.ErrHelp) {
		fmt.Fprintf(stderr, "Usage: %s\n\nFlags:\n%s", usage, fs.FlagUsages())
	}
	return err
}

// Status is a command's exit status for what its run returned, as
// kubectl's: 0 for nil and for --help (ErrHelp: the usage is printed
// already), else 1, with the error on stderr. A deadline that passed says
// which limits there are: a silent server otherwise ended a command with
// a bare "context deadline exceeded" after 30 s, --request-timeout 0
// notwithstanding.
func Status(err error, stderr io.Writer) int {
	switch {
	case err == nil, errors.Is(err, pflag.ErrHelp):
		return 0
	case errors.Is(err, context.DeadlineExceeded):
		fmt.Fprintf(stderr, "error: the server did not answer in time (%s): %v\n", timeLimits, err)
		return 1
	}
	fmt.Fprintln(stderr, "error:", err)
	return 1
}

// timeLimits are the limits on a command's time besides --request-timeout:
// discovery's refresh timeout (discovery.WithRefreshTimeout's default) and
// the commands' own minute.
const timeLimits = "a discovery refresh gives up after 30s, the command after 1m; --request-timeout bounds each request, 0: no bound of its own"

// DefaultEmbedded is what the embedded cluster is without EmbeddedArgs.
const DefaultEmbedded = "the discovery of a real v1.36.3 server plus 200 CRDs"

// EmbeddedCacheName is the cache name of the embedded cluster, whose port
// changes from run to run while its content does not.
const EmbeddedCacheName = "embedded-fake-cluster"

// CacheName names the cluster's cache: its server URL, or
// EmbeddedCacheName for the embedded cluster.
func CacheName(cfg *rest.Config, embedded bool) string {
	if embedded {
		return EmbeddedCacheName
	}
	return cfg.Host
}

// Config loads the kubeconfig as kubectl does. With no kubeconfig and no
// --server it starts the embedded fake cluster (the discovery of a real
// v1.36.3 server plus 200 CRDs: StartEmbedded's in this process, else
// examples/fake-apiserver in a child process), says so on stderr, and
// returns a stop function for it (embedded then reports true).
func (c *Connection) Config(stderr io.Writer) (cfg *rest.Config, stop func(), embedded bool, err error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if c.Kubeconfig != "" {
		rules.ExplicitPath = c.Kubeconfig
	}
	overrides := &clientcmd.ConfigOverrides{CurrentContext: c.Context}
	overrides.ClusterInfo.Server = c.Server
	overrides.ClusterInfo.InsecureSkipTLSVerify = c.Insecure
	overrides.AuthInfo.Token = c.Token
	timeout, err := c.requestTimeout()
	if err != nil {
		return nil, nil, false, err
	}
	cfg, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides).ClientConfig()
	if !clientcmd.IsEmptyConfig(err) || c.Server != "" {
		if cfg != nil {
			cfg.Timeout = timeout
		}
		return cfg, func() {}, false, err
	}
	var url string
	if c.StartEmbedded != nil {
		url, stop, err = c.StartEmbedded(stderr)
	} else {
		url, stop, err = startEmbedded(append([]string{"--crds", "200", "--groups", "20"}, c.EmbeddedArgs...), stderr)
	}
	if err != nil {
		return nil, nil, false, fmt.Errorf("%w: %w (or give --kubeconfig or --server)", errNoEmbedded, err)
	}
	what := c.Embedded
	if what == "" {
		what = DefaultEmbedded
	}
	fmt.Fprintf(stderr, "No kubeconfig found: using an embedded fake cluster (%s) at %s\n", what, url)
	return &rest.Config{Host: url, Timeout: timeout}, stop, true, nil
}

// OpenCache opens the disk cache of the cluster named name, logging its
// warnings to stderr. A cache that cannot be opened (a read-only or foreign
// directory, a file where a directory should be) is not a reason to fail,
// as it is not for kubectl: the command runs without one, after one
// warning, and nil is returned.
func OpenCache(name string, stderr io.Writer) *diskcache.Cache {
	root, err := CacheRoot()
	if err == nil {
		var c *diskcache.Cache
		logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
		if c, err = diskcache.Open(root, name, diskcache.WithLogger(logger)); err == nil {
			return c
		}
	}
	fmt.Fprintf(stderr, "warning: running without a disk cache: %v\n", err)
	return nil
}

// CacheRoot is $KUBECACHEDIR, else kubeatlas's directory in the user cache
// directory.
func CacheRoot() (string, error) {
	if dir := os.Getenv("KUBECACHEDIR"); dir != "" {
		return dir, nil
	}
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "kubeatlas"), nil
}
