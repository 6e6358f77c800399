package tests

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kubeatlas/kubeatlas/internal/testenv"
)

// benchCLI times a warm `api-resources -o name` of ours against kubectl's
// as whole processes, as users run them: one process a run, the same
// kubeconfig, each with its own warm cache directory, both revalidating
// (two 304s each). The two alternate, which of them first swapping every
// round, so that neither gets the quieter moments of the machine. It
// reports each one's median wall time (which includes GNU time's own
// fork and exec, alike for both) and peak RSS (the process's high-water
// mark of resident memory) and our share of kubectl's; the
// outputs must be the same bytes every round. internal/integration/
// time-api-resources.sh runs it at 3000 CRDs.
func benchCLI(b *testing.B, c *cluster) {
	kubectl := testenv.Tool(b, "kubectl")
	dir := b.TempDir()
	bin := filepath.Join(dir, "api-resources")
	if out, err := buildExample(bin, "api-resources"); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	kubeconfig := c.writeKubeconfig(b, dir)
	env := append(os.Environ(), "KUBECONFIG="+kubeconfig, "HOME="+dir, "KUBECACHEDIR="+filepath.Join(dir, "ours"))
	commands := []*struct {
		name  string
		argv  []string
		walls []time.Duration
		rss   []int64
		out   []byte
	}{
		{name: "kubeatlas", argv: []string{bin, "-o", "name"}},
		{name: "kubectl", argv: []string{kubectl, "api-resources", "-o", "name", "--cache-dir", filepath.Join(dir, "kubectl")}},
	}
	// Peak RSS is GNU time's: Go starts a child with vfork, and Linux
	// charges the child the parent's high-water mark at exec, so the
	// child's own rusage would report this benchmark's memory instead.
	// time forks, from a small process.
	gnuTime := testenv.Tool(b, "time")
	rssFile := filepath.Join(dir, "rss")
	once := func(i int) {
		cmd := commands[i]
		run := exec.Command(gnuTime, append([]string{"-f", "%M", "-o", rssFile, "--"}, cmd.argv...)...)
		run.Env = env
		var out, errOut bytes.Buffer
		run.Stdout, run.Stderr = &out, &errOut
		start := time.Now()
		if err := run.Run(); err != nil {
			b.Fatalf("%s: %v\n%s", cmd.name, err, errOut.Bytes())
		}
		cmd.walls = append(cmd.walls, time.Since(start))
		kib, err := os.ReadFile(rssFile)
		if err != nil {
			b.Fatal(err)
		}
		n, err := strconv.ParseInt(strings.TrimSpace(string(kib)), 10, 64)
		if err != nil {
			b.Fatalf("GNU time wrote %q: %v", kib, err)
		}
		cmd.rss = append(cmd.rss, n<<10)
		if cmd.out != nil && !bytes.Equal(cmd.out, out.Bytes()) {
			b.Fatalf("%s printed something else this time", cmd.name)
		}
		cmd.out = out.Bytes()
	}
	// Warm both caches, then time.
	once(0)
	once(1)
	if !bytes.Equal(commands[0].out, commands[1].out) {
		b.Fatalf("api-resources -o name differs from kubectl's:\n%s\nkubectl:\n%s", commands[0].out, commands[1].out)
	}
	for _, cmd := range commands {
		cmd.walls, cmd.rss = nil, nil
	}
	round := 0
	for b.Loop() {
		first := round % 2
		once(first)
		once(1 - first)
		round++
	}
	median := func(xs []int64) float64 {
		s := slices.Clone(xs)
		slices.Sort(s)
		return float64(s[len(s)/2])
	}
	var wall, rss [2]float64
	for i, cmd := range commands {
		ns := make([]int64, len(cmd.walls))
		for j, w := range cmd.walls {
			ns[j] = int64(w)
		}
		wall[i], rss[i] = median(ns), median(cmd.rss)
		b.ReportMetric(wall[i]/1e6, cmd.name+"-ms")
		b.ReportMetric(rss[i]/(1<<20), cmd.name+"-peak-MiB")
	}
	b.ReportMetric(wall[0]/wall[1], "wall-share")
	b.ReportMetric(rss[0]/rss[1], "rss-share")
}
