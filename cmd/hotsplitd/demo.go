package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/catalog"
	"github.com/hotsplit/hotsplit/client"
	"github.com/hotsplit/hotsplit/fsm"
	"github.com/hotsplit/hotsplit/node"
	"github.com/hotsplit/hotsplit/sim"
)

// demoWorkload is the default --devWorkload: a hot key first, then a hot
// range that moves every 30 s.
const demoWorkload = "demo"

// demoHotKeyPhase is how long the demo's hot-key phase runs.
const demoHotKeyPhase = 40 * time.Second

// demoDefaults fills what the operator did not set for the demo: the switch
// on, a 1 s step, a 10 s cooldown, a threshold fitted to the workload (30%
// of its total weighted load, so a concentrated hotspot crosses it and
// evenly spread load does not), and initial routes that bound the
// simulator's key space so the bucket layout works from the first column.
func demoDefaults(o *options) {
	c := &o.node
	if !o.autoSplit.set {
		on := true
		c.AutoSplit = &on
	}
	cfg := c.BootstrapConfig
	if cfg.StepMs == 0 {
		cfg.StepMs = 1000
	}
	if cfg.CooldownMs == 0 {
		cfg.CooldownMs = 10_000
	}
	if cfg.Threshold == 0 {
		// weighted ops/min of the whole workload: rate × 60 × mean weight
		// (write 4, read 1, half writes => 2.5).
		cfg.Threshold = uint64(float64(o.devRate) * 60 * 2.5 * 0.3)
	}
	if len(c.InitialSplits) == 0 {
		ks, err := sim.NewKeySpace(sim.DefaultKeySpace)
		if err == nil {
			c.InitialSplits = ks.SplitKeys(1)
		}
	}
}

// runDemoLoad puts the simulated data plane's load on the demo cluster
// until ctx ends: the chosen workload, or a hot key then a shifting range.
func runDemoLoad(ctx context.Context, endpoints []string, certs devCerts, o *options, log *slog.Logger, out io.Writer) {
	cl, err := client.New(client.Config{Endpoints: endpoints, Actor: "demo",
		CACertFile: certs.file("ca.crt"), CertFile: certs.file("client-" + demoClient + ".crt"), KeyFile: certs.file("client-" + demoClient + ".key")})
	if err != nil {
		fmt.Fprintln(out, "demo load:", err)
		return
	}
	defer cl.Close()
	phases := []struct {
		workload string
		d        time.Duration
	}{{o.devWorkload, sim.MaxDuration}}
	if o.devWorkload == demoWorkload {
		phases = []struct {
			workload string
			d        time.Duration
		}{{sim.HotKey, demoHotKeyPhase}, {sim.Shift, sim.MaxDuration}}
	}
	for i, p := range phases {
		w, err := sim.ParseWorkload(p.workload, sim.DefaultWorkloadOptions())
		if err != nil {
			fmt.Fprintln(out, "demo load:", err)
			return
		}
		s, err := sim.New(sim.Config{Cluster: cl, Workload: w, Nodes: 3, Rate: o.devRate, Duration: p.d, Seed: uint64(i + 1), Identity: demoClient, Logger: log})
		if err != nil {
			fmt.Fprintln(out, "demo load:", err)
			return
		}
		fmt.Fprintf(out, "load: %s on 3 simulated data nodes, %d ops/s\n", w, o.devRate)
		if err := s.Run(ctx); err != nil && ctx.Err() == nil {
			fmt.Fprintln(out, "demo load stopped:", err)
			return
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// printEvents follows one replica's decision ring and prints what the
// detector and the scheduler did, until ctx ends.
func printEvents(ctx context.Context, n *node.Node, out io.Writer) {
	var seen uint64
	for {
		ch := n.FSM().Changed()
		st := n.FSM().State()
		for _, d := range st.Decisions() {
			if d.GetSeq() <= seen {
				continue
			}
			seen = d.GetSeq()
			if line := eventLine(st, d); line != "" {
				fmt.Fprintf(out, "%s  %s\n", time.Now().Format("15:04:05"), line)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-ch:
		}
	}
}

// eventLine renders one decision for the terminal, e.g.
// `split r7 at "user:42" (isolation_compound, 182k ops/min)`.
func eventLine(st *fsm.State, d *api.Decision) string {
	keys := func() string {
		if len(d.GetSplitKeys()) == 0 {
			return "?"
		}
		return catalog.FormatKey(d.GetSplitKeys()[0])
	}
	origin := originName(d.GetOrigin())
	switch d.GetKind() {
	case api.DecisionKind_DECISION_KIND_PLANNED:
		return fmt.Sprintf("planned op %d on r%d (%s, %s)", d.GetOpId(), d.GetRouteId(), origin, perMin(d.GetScore()))
	case api.DecisionKind_DECISION_KIND_SPLIT_APPLIED:
		return fmt.Sprintf("split r%d at %s (%s, %s)", d.GetRouteId(), keys(), origin, perMin(d.GetScore()))
	case api.DecisionKind_DECISION_KIND_OP_DONE:
		if o := d.GetOrigin(); o == api.SplitOrigin_SPLIT_ORIGIN_SUB_BUCKET_MEDIAN || o == api.SplitOrigin_SPLIT_ORIGIN_BALANCE {
			return ""
		}
		if r := st.Catalog().Lookup(hotKeyOf(d)); r != nil {
			return fmt.Sprintf("isolated hot key %s: r%d [%s, %s)", catalog.FormatKey(hotKeyOf(d)), r.ID, catalog.FormatKey(r.Start), endOf(r))
		}
	case api.DecisionKind_DECISION_KIND_MANUAL_SPLIT:
		return fmt.Sprintf("manual split of r%d at %s by %s", d.GetRouteId(), keys(), d.GetActor())
	case api.DecisionKind_DECISION_KIND_OP_ABORTED, api.DecisionKind_DECISION_KIND_OP_PAUSED, api.DecisionKind_DECISION_KIND_OP_RESUMED:
		return fmt.Sprintf("op %d %s %s", d.GetOpId(), kindName(d.GetKind()), d.GetDetail())
	case api.DecisionKind_DECISION_KIND_SWITCH:
		return fmt.Sprintf("automatic splitting switched by %s: %s", d.GetActor(), d.GetDetail())
	}
	return ""
}

// hotKeyOf is the isolated key of an isolation op: its first split key,
// except for a lower-edge isolation whose only key is H·0x00.
func hotKeyOf(d *api.Decision) []byte {
	k := d.GetSplitKeys()[0]
	if d.GetOrigin() == api.SplitOrigin_SPLIT_ORIGIN_ISOLATION_SINGLE_LOWER_EDGE && len(k) > 0 {
		return k[:len(k)-1]
	}
	return k
}

func originName(o api.SplitOrigin) string {
	return lowerName(o.String(), "SPLIT_ORIGIN_")
}

func kindName(k api.DecisionKind) string { return lowerName(k.String(), "DECISION_KIND_") }

func lowerName(s, prefix string) string {
	b := []byte(s[min(len(prefix), len(s)):])
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// perMin renders weighted ops per minute like "182k ops/min".
func perMin(v uint64) string {
	switch {
	case v >= 10_000_000:
		return fmt.Sprintf("%dM ops/min", v/1_000_000)
	case v >= 10_000:
		return fmt.Sprintf("%dk ops/min", v/1_000)
	}
	return fmt.Sprintf("%d ops/min", v)
}

func endOf(r *catalog.RouteDescriptor) string {
	if r.Unbounded() {
		return "+inf"
	}
	return catalog.FormatKey(r.End)
}
