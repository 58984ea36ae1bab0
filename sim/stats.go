package sim

import (
	"time"

	"github.com/hotsplit/hotsplit/keyviz"
)

// Stats is a snapshot of a run, for a progress line and for tests.
type Stats struct {
	RunID    string
	Workload string // Workload.String()
	Phase    Phase
	// Elapsed is the time since the first operation (by Config.Clock), up
	// to the last one once all are out; 0 before the first.
	Elapsed time.Duration
	// Planned is the number of operations the run issues unless stopped.
	Planned uint64
	// Ops = Reads + Writes: operations issued (and counted on a sampler).
	Ops, Reads, Writes uint64
	// CatalogVersion and Routes describe the newest catalog received (the
	// driver routes by it from its next batch on); 0 before the first.
	CatalogVersion uint64
	Routes         int
	// CatalogUpdates counts the catalog versions received; WatchFailures
	// the catalog watches that ended with an error; SetRoutesFailed the
	// catalogs a sampler refused (each is a bug report).
	CatalogUpdates, WatchFailures, SetRoutesFailed uint64
	// OpsAcked, OpsLate and OpsRefused count the operations in the columns
	// the cluster acknowledged (committed), acknowledged as late (dropped),
	// and refused for good. At the end of a flushed run they sum to Ops
	// unless a reporter dropped columns from a full queue
	// (Columns.ColumnsDropped).
	OpsAcked, OpsLate, OpsRefused uint64
	// Step is the column length the nodes use (0 before Run has read the
	// cluster's config). A run starts at a step boundary (see Run).
	Step time.Duration
	// Columns sums the nodes' reporter counters.
	Columns keyviz.ReporterStats
	// UnknownRoute sums the operations the samplers dropped for a route
	// they did not know (0 unless a sampler refused a catalog).
	UnknownRoute uint64
	// Nodes has one entry per node, by index; empty before Run.
	Nodes []NodeStats
}

// NodeStats describes one simulated node.
type NodeStats struct {
	ReporterID                    string
	Reads, Writes                 uint64
	OpsAcked, OpsLate, OpsRefused uint64
	UnknownRoute                  uint64
	Reporter                      keyviz.ReporterStats
}

// Stats returns a snapshot of the run. Counters are read one by one, not
// atomically together: during a run, Ops may be ahead of the reporters'.
func (s *Sim) Stats() Stats {
	st := Stats{
		RunID:           s.cfg.RunID,
		Workload:        s.cfg.Workload.String(),
		Phase:           Phase(s.phase.Load()),
		Planned:         s.total,
		Reads:           s.reads.Load(),
		Writes:          s.writes.Load(),
		CatalogUpdates:  s.catalogUpdates.Load(),
		WatchFailures:   s.watchFailures.Load(),
		SetRoutesFailed: s.setRoutesFailed.Load(),
	}
	st.Ops = st.Reads + st.Writes
	if start := s.started.Load(); start != 0 {
		end := s.ended.Load()
		if end == 0 {
			end = s.cfg.Clock().UnixNano()
		}
		st.Elapsed = time.Duration(max(end-start, 0))
	}
	if r := s.routing.Load(); r != nil {
		st.CatalogVersion, st.Routes = r.cat.Version(), r.cat.Len()
	}
	s.nodesMu.Lock()
	nodes := s.nodes
	s.nodesMu.Unlock()
	if len(nodes) > 0 {
		_, step, _ := nodes[0].sampler.Window()
		st.Step = time.Duration(step) * time.Millisecond
	}
	for _, n := range nodes {
		ns := NodeStats{
			ReporterID:   n.id,
			Reads:        n.reads.Load(),
			Writes:       n.writes.Load(),
			UnknownRoute: n.sampler.Stats().UnknownRoute,
			Reporter:     n.reporter.Stats(),
		}
		ns.OpsAcked, ns.OpsLate, ns.OpsRefused = n.acks.settledOps()
		st.OpsAcked += ns.OpsAcked
		st.OpsLate += ns.OpsLate
		st.OpsRefused += ns.OpsRefused
		st.UnknownRoute += ns.UnknownRoute
		c, r := &st.Columns, ns.Reporter
		c.ColumnsClosed += r.ColumnsClosed
		c.ColumnsSent += r.ColumnsSent
		c.ColumnsAcked += r.ColumnsAcked
		c.ColumnsLate += r.ColumnsLate
		c.ColumnsDropped += r.ColumnsDropped
		c.ColumnsRejected += r.ColumnsRejected
		c.ReportFailures += r.ReportFailures
		c.EvidenceCapped += r.EvidenceCapped
		c.TopKeysTrimmed += r.TopKeysTrimmed
		c.RowsTrimmed += r.RowsTrimmed
		c.WatchFailures += r.WatchFailures
		c.ConfigRejected += r.ConfigRejected
		c.Pending += r.Pending
		st.Nodes = append(st.Nodes, ns)
	}
	return st
}
