package node

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"testing"
	"time"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/catalog"
	"github.com/hotsplit/hotsplit/clusterversion"
	"github.com/hotsplit/hotsplit/internal/testutil"
	"github.com/hotsplit/hotsplit/sim"
	"github.com/hotsplit/hotsplit/webui"
)

// pageClient reads a node's page API as a reader.
type pageClient struct {
	t  *testing.T
	hc *http.Client
}

func newPageClient(t *testing.T) *pageClient {
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: clientTLS(t, "page-reader", "reader")}}
	t.Cleanup(hc.CloseIdleConnections)
	return &pageClient{t: t, hc: hc}
}

// get decodes GET path on n into v.
func (p *pageClient) get(n *Node, path string, v any) error {
	resp, err := p.hc.Get("https://" + n.HTTPAddr() + path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s on %s: %d %s", path, n.ID(), resp.StatusCode, b)
	}
	return json.Unmarshal(b, v)
}

// pageView is what the page reads of one node at one applied index, with
// what depends on the node's clock or name cleared: served_by, now_ms and
// the cooldowns left (replicated cooldown ends, minus this node's now).
type pageView struct {
	Heatmap   webui.HeatmapAnswer
	Decisions webui.DecisionsAnswer
	Explain   webui.ExplainAnswer
}

func (p *pageClient) view(n *Node, toMs, routeID uint64) (pageView, error) {
	var v pageView
	q := fmt.Sprintf("from=0&to=%d", toMs)
	if err := p.get(n, "/api/v1/heatmap?"+q, &v.Heatmap); err != nil {
		return v, err
	}
	if err := p.get(n, "/api/v1/decisions?"+q, &v.Decisions); err != nil {
		return v, err
	}
	if err := p.get(n, fmt.Sprintf("/api/v1/explain?route=%d", routeID), &v.Explain); err != nil {
		return v, err
	}
	if v.Heatmap.Read.ServedBy != n.ID() || v.Decisions.Read.ServedBy != n.ID() || v.Explain.Read.ServedBy != n.ID() {
		return v, fmt.Errorf("served_by %q %q %q on %s", v.Heatmap.Read.ServedBy, v.Decisions.Read.ServedBy, v.Explain.Read.ServedBy, n.ID())
	}
	idx := v.Heatmap.Read.AppliedIndex
	if v.Decisions.Read.AppliedIndex != idx || v.Explain.Read.AppliedIndex != idx {
		return v, fmt.Errorf("%s moved from index %d to %d, %d between the calls", n.ID(), idx, v.Decisions.Read.AppliedIndex, v.Explain.Read.AppliedIndex)
	}
	for _, r := range []*webui.ReadInfo{&v.Heatmap.Read, &v.Decisions.Read, &v.Explain.Read} {
		r.ServedBy = ""
	}
	v.Heatmap.NowMs, v.Decisions.NowMs, v.Explain.NowMs = 0, 0, 0
	for i := range v.Heatmap.Routes {
		v.Heatmap.Routes[i].CooldownLeftMs = 0
	}
	if v.Explain.Tracked != nil {
		v.Explain.Tracked.CooldownLeftMs = 0
	}
	return v, nil
}

// sameViews reads the views of nodes until all of them were read at one
// applied index (the leader keeps committing ceiling entries), bounded.
func (p *pageClient) sameViews(nodes []*Node, toMs, routeID uint64) []pageView {
	p.t.Helper()
	var views []pageView
	testutil.Eventually(p.t, 30*time.Second, "every node's page read at one applied index", func() error {
		views = views[:0]
		for _, n := range nodes {
			v, err := p.view(n, toMs, routeID)
			if err != nil {
				return err
			}
			if len(views) > 0 && v.Heatmap.Read.AppliedIndex != views[0].Heatmap.Read.AppliedIndex {
				return fmt.Errorf("%s at index %d, %s at %d", nodes[0].ID(), views[0].Heatmap.Read.AppliedIndex, n.ID(), v.Heatmap.Read.AppliedIndex)
			}
			views = append(views, v)
		}
		return nil
	})
	return views
}

// The picture is replicated state: at one applied index the leader, a
// follower restarted from its snapshot and a node that joined by
// InstallSnapshot answer the same heat map, marks, decisions and
// explanations (decoded, served_by and the clock aside). After the leader
// is killed, the new leader and the restored nodes still show every
// column from before.
func TestIntegrationHeatmapSameOnEveryNode(t *testing.T) {
	skipShort(t)
	const rate, stepMs = 4000, 200
	cfg := &api.Config{StepMs: stepMs, CooldownMs: 5 * stepMs, CandidateWindows: 3, Threshold: totalPerMin(rate, 0.5) * 3 / 10}
	snapshots := func(n *Config) {
		n.HTTPAddr = "127.0.0.1:0"
		n.SnapshotThreshold = 64
		n.SnapshotInterval = 50 * time.Millisecond
		n.TrailingLogs = 16
	}
	c, ks := newAutoCluster(t, cfg, snapshots)
	opts := sim.DefaultWorkloadOptions()
	opts.HotShare = 0.9
	run := c.startSimSampled(t, sim.HotKey, opts, rate, 30*time.Second, 1, 1)
	w, _ := sim.ParseWorkload(sim.HotKey, opts)
	lo, _, _ := w.Hotspot(0)
	hot := ks.Key(lo)
	testutil.WaitFor(t, 30*time.Second, "the hot key alone in a route", func() bool {
		r := c.leaderRouteOf(hot)
		return r != nil && bytes.Equal(r.Start, hot) && bytes.Equal(r.End, append(bytes.Clone(hot), 0))
	})
	leader := c.leaderNode()
	isolatedAt := leader.FSM().State().LastColumnAtMs()
	testutil.WaitFor(t, 20*time.Second, "ten columns after the isolation, twenty in all", func() bool {
		st := leader.FSM().State()
		return st.LastColumnAtMs() >= isolatedAt+10*stepMs && st.HeatHistory() != nil && st.HeatHistory().Columns() >= 20
	})
	run.halt()
	st := leader.FSM().State()
	if hist := st.HeatHistory(); !st.Has(clusterversion.HeatHistory) || hist == nil || hist.Columns() < 20 || hist.MarkCount() == 0 {
		t.Fatalf("cluster version %d, heat history of %d columns and %d marks", st.ClusterVersion(), hist.Columns(), hist.MarkCount())
	}
	hotRoute := c.leaderRouteOf(hot).ID

	// A follower restarts from its snapshot; a new node joins by one. Not
	// the node read as the leader above, even if leadership moved since:
	// its page is the reference, read at its address.
	var restarted string
	for _, id := range c.followers() {
		if id != leader.ID() {
			restarted = id
			break
		}
	}
	c.stop(restarted)
	c.restart(restarted)
	joinCfg := Config{ID: "n4", DataDir: c.dir + "/n4", Logger: quietLogger(), Join: []string{leader.GRPCAddr()}}
	fastTiming(&joinCfg)
	snapshots(&joinCfg)
	c.start(joinCfg)
	c.waitVoters(4, 30*time.Second)
	for _, id := range []string{restarted, "n4"} {
		if idx := c.node(id).Raft().Stats()["last_snapshot_index"]; idx == "0" {
			t.Fatalf("%s caught up without a snapshot", id)
		}
	}

	page := newPageClient(t)
	toMs := uint64(time.Now().UnixMilli())
	nodes := []*Node{leader, c.node(restarted), c.node("n4")}
	views := page.sameViews(nodes, toMs, hotRoute)
	before := views[0]
	if len(before.Heatmap.Cells) < 20 || len(before.Heatmap.Marks) == 0 || len(before.Explain.Decisions) == 0 {
		t.Fatalf("the leader's page: %d cells, %d marks, %d decisions of route %d", len(before.Heatmap.Cells), len(before.Heatmap.Marks),
			len(before.Explain.Decisions), hotRoute)
	}
	if !hasMarkAt(before.Heatmap, hot) {
		t.Fatalf("no isolation mark at %q: %+v", hot, before.Heatmap.Marks)
	}
	for i, v := range views[1:] {
		if !reflect.DeepEqual(v, before) {
			t.Fatalf("%s's page differs from the leader's at index %d:\n%s\nvs\n%s", nodes[i+1].ID(), before.Heatmap.Read.AppliedIndex, jsonOf(v), jsonOf(before))
		}
	}

	// The leader dies: the new leader and the restored nodes still show
	// every column and mark from before.
	c.kill(leader.ID())
	newLeader := c.leaderNode()
	for _, n := range []*Node{newLeader, c.node(restarted), c.node("n4")} {
		var v pageView
		testutil.Eventually(t, 20*time.Second, "the page of "+n.ID(), func() error {
			var err error
			v, err = page.view(n, toMs, hotRoute)
			return err
		})
		if !reflect.DeepEqual(v.Heatmap.Keys, before.Heatmap.Keys) || !reflect.DeepEqual(v.Heatmap.Layouts, before.Heatmap.Layouts) ||
			!reflect.DeepEqual(v.Heatmap.Cells, before.Heatmap.Cells) || !reflect.DeepEqual(v.Heatmap.Marks, before.Heatmap.Marks) || v.Heatmap.History.FromMs != before.Heatmap.History.FromMs {
			t.Fatalf("%s after the leader's death shows another past:\n%s\nvs\n%s", n.ID(), jsonOf(v.Heatmap), jsonOf(before.Heatmap))
		}
	}
}

func hasMarkAt(a webui.HeatmapAnswer, key []byte) bool {
	for _, m := range a.Marks {
		if m.Kind == "split" && m.Origin == "ISOLATION_COMPOUND" && len(m.Keys) == 2 && m.Keys[0] == catalog.EscapeKey(key) {
			return true
		}
	}
	return false
}

func jsonOf(v any) string {
	b, _ := json.MarshalIndent(v, "", " ")
	if len(b) > 4000 {
		b = append(b[:4000], "…"...)
	}
	return string(b)
}
