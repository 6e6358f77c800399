package apiresources

import (
	"strings"
	"testing"

	"github.com/kubeatlas/kubeatlas/examples/internal/cli"
)

// TestNamespacedHelp: --namespaced's help states one default, both scopes
// (it read "(default: both) (default true)"), and --namespaced alone still
// means namespaced resources only, as kubectl's.
func TestNamespacedHelp(t *testing.T) {
	var o Options
	fs := cli.NewFlagSet("api-resources")
	o.AddFlags(fs)
	help := fs.FlagUsages()
	line := help[strings.Index(help, "--namespaced"):]
	line = line[:strings.IndexByte(line, '\n')]
	if strings.Count(line, "default") != 1 || !strings.Contains(line, "(default: both)") {
		t.Errorf("--namespaced help: %q", line)
	}
	for _, c := range []struct {
		args []string
		want *bool
	}{
		{nil, nil},
		{[]string{"--namespaced"}, new(true)},
		{[]string{"--namespaced=false"}, new(false)},
	} {
		var o Options
		fs := cli.NewFlagSet("api-resources")
		o.AddFlags(fs)
		if err := fs.Parse(c.args); err != nil {
			t.Fatal(err)
		}
		if err := o.Complete(fs); err != nil {
			t.Fatal(err)
		}
		if (o.Namespaced == nil) != (c.want == nil) || (c.want != nil && *o.Namespaced != *c.want) {
			t.Errorf("%v: Namespaced %v, want %v", c.args, o.Namespaced, c.want)
		}
	}
}
