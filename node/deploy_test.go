package node

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hotsplit/hotsplit/node/raftobs"
)

// describingRegistry records the name of every metric a collector
// describes as it is registered: the registry's descriptors, including
// vectors without a series yet (a peer label before any peer).
type describingRegistry struct {
	*prometheus.Registry
	names map[string]bool
}

func (d *describingRegistry) Register(c prometheus.Collector) error {
	ch := make(chan *prometheus.Desc, 64)
	go func() { c.Describe(ch); close(ch) }()
	for desc := range ch {
		d.names[descName(desc)] = true
	}
	return d.Registry.Register(c)
}

func (d *describingRegistry) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := d.Register(c); err != nil {
			panic(err)
		}
	}
}

var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

func descName(d *prometheus.Desc) string {
	m := fqName.FindStringSubmatch(d.String())
	if m == nil {
		panic("unexpected descriptor " + d.String())
	}
	return m[1]
}

// metricName matches the metric names an expression can use: ours and the
// Go and process collectors'.
var metricName = regexp.MustCompile(`\b(?:hotsplit|process|go)_[a-z0-9_]+\b`)

// scrapeUp is Prometheus's own per-target metric.
var scrapeUp = regexp.MustCompile(`\bup\{`)

// labelMatchers are {...} blocks: label names and values, not metrics.
var labelMatchers = regexp.MustCompile(`\{[^}]*\}`)

// metricsIn returns the metric names an expression uses.
func metricsIn(expr string) []string {
	return metricName.FindAllString(labelMatchers.ReplaceAllString(expr, "{}"), -1)
}

// deployExpressions reads every alert rule expression and every dashboard
// target from deploy/.
func deployExpressions(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	rules, err := os.ReadFile("../deploy/prometheus/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	// expr: one line, or a block scalar (expr: |) of deeper-indented lines.
	lines := strings.Split(string(rules), "\n")
	for i := 0; i < len(lines); i++ {
		ind, rest, ok := strings.Cut(lines[i], "expr:")
		if !ok || strings.TrimSpace(ind) != "" {
			continue
		}
		rest = strings.TrimSpace(rest)
		if rest == "|" || rest == ">" {
			var block []string
			for i+1 < len(lines) && (strings.TrimSpace(lines[i+1]) == "" || len(lines[i+1])-len(strings.TrimLeft(lines[i+1], " ")) > len(ind)) {
				i++
				block = append(block, strings.TrimSpace(lines[i]))
			}
			rest = strings.Join(block, " ")
		}
		out[fmt.Sprintf("alerts.yml line %d", i+1)] = rest
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	b, err := os.ReadFile("../deploy/grafana/hotsplit.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("hotsplit.json: %v", err)
	}
	for _, p := range dash.Panels {
		for i, tg := range p.Targets {
			out[fmt.Sprintf("dashboard panel %q target %d", p.Title, i)] = tg.Expr
		}
	}
	return out
}

// Every metric an alert or a dashboard panel uses is one a node registers
// (checked against the registry's descriptors, so a metric without a
// series yet still counts, and a misspelt or renamed one fails).
func TestDeployExpressionsUseRegisteredMetrics(t *testing.T) {
	reg := &describingRegistry{Registry: prometheus.NewRegistry(), names: map[string]bool{}}
	c := newTestCluster(t, 1, func(cfg *Config) { cfg.Registry = reg })
	_ = c.node("n1")
	for _, name := range raftobs.MetricNames() {
		reg.names[name] = true
	}
	exprs := deployExpressions(t)
	if len(exprs) < 40 {
		t.Fatalf("found %d expressions in deploy/: the parser lost some", len(exprs))
	}
	used := map[string]bool{}
	for where, e := range exprs {
		names := metricsIn(e)
		if len(names) == 0 && !scrapeUp.MatchString(e) {
			t.Errorf("%s: %q uses no hotsplit metric", where, e)
		}
		for _, n := range names {
			used[n] = true
			base := n
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				if s, ok := strings.CutSuffix(n, suffix); ok && reg.names[s] {
					base = s
				}
			}
			if reg.names[base] {
				continue
			}
			t.Errorf("%s: %s is not a registered metric (%q)", where, n, e)
		}
	}
	t.Logf("%d expressions use %d metrics", len(exprs), len(used))
}

// The dashboard's expressions are valid PromQL: promtool checks them as
// recording rules (with Grafana's variables filled in). CI requires
// promtool (HOTSPLIT_REQUIRE_PROMTOOL=1); elsewhere the test skips without it.
func TestIntegrationDashboardExpressionsParse(t *testing.T) {
	skipShort(t)
	promtool := requirePromtool(t)
	var b strings.Builder
	b.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	exprs := deployExpressions(t)
	keys := make([]string, 0, len(exprs))
	for k := range exprs {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for i, k := range keys {
		e := strings.NewReplacer("$__rate_interval", "5m", "$job", "hotsplit").Replace(exprs[k])
		q, _ := json.Marshal(e)
		fmt.Fprintf(&b, "      - record: dashboard_expr_%d\n        expr: %s\n", i, q)
	}
	path := filepath.Join(t.TempDir(), "exprs.yml")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(promtool, "check", "rules", path).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
}

// requirePromtool returns promtool's path, skipping the test without it
// unless HOTSPLIT_REQUIRE_PROMTOOL is set (CI installs it).
func requirePromtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("HOTSPLIT_REQUIRE_PROMTOOL") != "" {
			t.Fatalf("promtool not found: %v", err)
		}
		t.Skip("promtool not installed (CI installs Debian's prometheus package)")
	}
	return p
}
