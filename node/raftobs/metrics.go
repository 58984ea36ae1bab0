package raftobs

import (
	"strings"
	"sync"

	gometrics "github.com/hashicorp/go-metrics/compat"
	"github.com/prometheus/client_golang/prometheus"
)

// raft reports its metrics through the process-global go-metrics sink, so
// they are bridged once per process into a registry of their own that every
// node's /metrics gathers (in --dev, three nodes share one process and so
// one set of raft metrics).
//
// The bridge is a table, not a name mangler: each raft metric we export has
// a Prometheus name in snake_case, counters end in _total, durations are
// histograms in seconds (raft measures milliseconds), and the peer a
// replication metric is about is a label (raft also emits a copy with the
// peer id inside the name; those copies are dropped, as is anything not in
// the table). Every metric is registered up front, so its descriptor exists
// before raft first emits it and the dashboards and alerts can be checked
// against the registry.
var (
	raftMetricsOnce sync.Once
	raftRegistry    = prometheus.NewRegistry()
	raftBridge      *raftSink
)

// InstallMetrics bridges raft's metrics into Registry, once per process.
func InstallMetrics() {
	raftMetricsOnce.Do(func() {
		raftBridge = newRaftSink(raftRegistry)
		conf := gometrics.DefaultConfig("hotsplit")
		conf.EnableHostname = false
		conf.EnableRuntimeMetrics = false // the Go collector already exports these
		conf.EnableHostnameLabel = false
		conf.EnableServiceLabel = false
		if _, err := gometrics.NewGlobal(conf, raftBridge); err != nil {
			return // metrics are an aid; a node without raft metrics still serves
		}
	})
}

// Registry holds raft's bridged metrics: every node's /metrics gathers it
// beside its own registry.
func Registry() prometheus.Gatherer { return raftRegistry }

// MetricNames are the Prometheus names of the bridged raft metrics, every
// one registered up front (dashboards and alerts are checked against
// them).
func MetricNames() []string {
	names := make([]string, 0, len(raftMetricTable))
	for _, m := range raftMetricTable {
		names = append(names, m.name)
	}
	return names
}

// ForgetPeer drops the series of a peer no longer in the configuration.
func ForgetPeer(peer string) {
	if raftBridge != nil {
		raftBridge.forgetPeer(peer)
	}
}

// raftMetricKind says how a raft metric becomes a Prometheus one.
type raftMetricKind uint8

const (
	raftCounter   raftMetricKind = iota // IncrCounter -> counter (_total)
	raftGauge                           // SetGauge -> gauge
	raftTimer                           // MeasureSince/AddSample in ms -> histogram in seconds
	raftMsGauge                         // SetGauge in ms -> gauge in seconds
	raftSample                          // AddSample of a count or size -> histogram
	raftLastValue                       // AddSample of a ratio -> gauge of the last value
)

// raftMetric is one row of the bridge table.
type raftMetric struct {
	key    string // raft's name, dot-joined, without the "hotsplit" prefix
	name   string // Prometheus name
	kind   raftMetricKind
	help   string
	labels []string          // raft label names, in order; renamed by raftLabelNames
	fixed  map[string]string // constant labels a family of raft names maps to
	bucket []float64         // raftSample buckets
}

// raftLabelNames renames raft's labels.
var raftLabelNames = map[string]string{"peer_id": "peer", "rpcType": "rpc_type"}

// raftRPCTypes are the values of rpc_type (raft's names in snake_case).
var raftRPCTypes = []string{"append_entries", "heartbeat", "install_snapshot", "request_pre_vote", "request_vote", "timeout_now"}

var (
	secondsBuckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}
	countBuckets   = prometheus.ExponentialBuckets(1, 2, 11)  // 1 .. 1024
	bytesBuckets   = prometheus.ExponentialBuckets(64, 4, 10) // 64 B .. 16 MiB
)

var raftMetricTable = []raftMetric{
	{key: "raft.apply", name: "hotsplit_raft_apply_total", kind: raftCounter, help: "Entries proposed through raft.Apply on this node (leader)."},
	{key: "raft.barrier", name: "hotsplit_raft_barrier_total", kind: raftCounter, help: "Barriers issued."},
	{key: "raft.restore", name: "hotsplit_raft_user_restore_total", kind: raftCounter, help: "User snapshot restores."},
	{key: "raft.verify_leader", name: "hotsplit_raft_verify_leader_total", kind: raftCounter, help: "Leadership verifications (read index, timestamps)."},
	{key: "raft.state.candidate", name: "hotsplit_raft_state_transitions_total", kind: raftCounter, fixed: map[string]string{"state": "candidate"}, help: "Raft state entered, by state."},
	{key: "raft.state.follower", name: "hotsplit_raft_state_transitions_total", kind: raftCounter, fixed: map[string]string{"state": "follower"}, help: "Raft state entered, by state."},
	{key: "raft.state.leader", name: "hotsplit_raft_state_transitions_total", kind: raftCounter, fixed: map[string]string{"state": "leader"}, help: "Raft state entered, by state."},
	{key: "raft.transition.heartbeat_timeout", name: "hotsplit_raft_heartbeat_timeouts_total", kind: raftCounter, help: "Followers that heard no heartbeat within the timeout and became candidates."},
	{key: "raft.transition.leader_lease_timeout", name: "hotsplit_raft_leader_lease_timeouts_total", kind: raftCounter, help: "Leaders that stepped down for lack of contact with a quorum."},
	{key: "raft.replication.appendEntries.logs", name: "hotsplit_raft_replication_append_entries_logs_total", kind: raftCounter, labels: []string{"peer_id"}, help: "Log entries replicated to each peer."},

	{key: "raft.commitNumLogs", name: "hotsplit_raft_commit_batch_logs", kind: raftGauge, help: "Entries in the last batch committed together."},
	{key: "raft.leader.dispatchNumLogs", name: "hotsplit_raft_leader_dispatch_batch_logs", kind: raftGauge, help: "Entries in the last batch the leader wrote."},
	{key: "raft.peers", name: "hotsplit_raft_peers", kind: raftGauge, help: "Servers in the latest raft configuration."},
	{key: "raft.fsm.lastRestoreDuration", name: "hotsplit_raft_fsm_last_restore_duration_seconds", kind: raftMsGauge, help: "Duration of the last snapshot restore."},
	{key: "raft.leader.oldestLogAge", name: "hotsplit_raft_leader_oldest_log_age_seconds", kind: raftMsGauge, help: "Age of the oldest entry in the leader's log store (how far back a lagging follower can catch up without a snapshot)."},

	{key: "raft.commitTime", name: "hotsplit_raft_commit_seconds", kind: raftTimer, help: "Time from a leader writing an entry to its commit."},
	{key: "raft.leader.dispatchLog", name: "hotsplit_raft_leader_dispatch_seconds", kind: raftTimer, help: "Time the leader takes to write a batch to its log."},
	{key: "raft.leader.lastContact", name: "hotsplit_raft_leader_last_contact_seconds", kind: raftTimer, help: "Time since the leader last heard from each follower, sampled at every lease check."},
	{key: "raft.fsm.apply", name: "hotsplit_raft_fsm_apply_seconds", kind: raftTimer, help: "Time to apply one entry to the FSM (raft's measure)."},
	{key: "raft.fsm.applyBatch", name: "hotsplit_raft_fsm_apply_batch_seconds", kind: raftTimer, help: "Time to apply one batch to the FSM."},
	{key: "raft.fsm.enqueue", name: "hotsplit_raft_fsm_enqueue_seconds", kind: raftTimer, help: "Time to hand committed entries to the FSM goroutine."},
	{key: "raft.fsm.restore", name: "hotsplit_raft_fsm_restore_seconds", kind: raftTimer, help: "Time to restore the FSM from a snapshot."},
	{key: "raft.fsm.snapshot", name: "hotsplit_raft_fsm_snapshot_seconds", kind: raftTimer, help: "Time to capture an FSM snapshot."},
	{key: "raft.fsm.store_config", name: "hotsplit_raft_fsm_store_config_seconds", kind: raftTimer, help: "Time to hand a configuration entry to the FSM."},
	{key: "raft.candidate.electSelf", name: "hotsplit_raft_candidate_elect_self_seconds", kind: raftTimer, help: "Time to request votes in an election."},
	{key: "raft.candidate.preElectSelf", name: "hotsplit_raft_candidate_pre_elect_self_seconds", kind: raftTimer, help: "Time to request pre-votes."},
	{key: "raft.restoreUserSnapshot", name: "hotsplit_raft_user_restore_seconds", kind: raftTimer, help: "Time of a user snapshot restore."},
	{key: "raft.rpc.appendEntries", name: "hotsplit_raft_rpc_append_entries_seconds", kind: raftTimer, help: "Time a follower takes to handle AppendEntries."},
	{key: "raft.rpc.appendEntries.processLogs", name: "hotsplit_raft_rpc_append_entries_process_logs_seconds", kind: raftTimer, help: "Time a follower takes to process the entries of an AppendEntries."},
	{key: "raft.rpc.appendEntries.storeLogs", name: "hotsplit_raft_rpc_append_entries_store_logs_seconds", kind: raftTimer, help: "Time a follower takes to store the entries of an AppendEntries."},
	{key: "raft.rpc.installSnapshot", name: "hotsplit_raft_rpc_install_snapshot_seconds", kind: raftTimer, help: "Time a follower takes to install a snapshot."},
	{key: "raft.rpc.processHeartbeat", name: "hotsplit_raft_rpc_process_heartbeat_seconds", kind: raftTimer, help: "Time a follower takes to handle a heartbeat."},
	{key: "raft.rpc.requestVote", name: "hotsplit_raft_rpc_request_vote_seconds", kind: raftTimer, help: "Time to handle a vote request."},
	{key: "raft.replication.appendEntries.rpc", name: "hotsplit_raft_replication_append_entries_seconds", kind: raftTimer, labels: []string{"peer_id"}, help: "AppendEntries round trip to each peer."},
	{key: "raft.replication.heartbeat", name: "hotsplit_raft_replication_heartbeat_seconds", kind: raftTimer, labels: []string{"peer_id"}, help: "Heartbeat round trip to each peer."},
	{key: "raft.replication.installSnapshot", name: "hotsplit_raft_replication_install_snapshot_seconds", kind: raftTimer, labels: []string{"peer_id"}, help: "InstallSnapshot round trip to each peer."},
	{key: "raft.compactLogs", name: "hotsplit_raft_compact_logs_seconds", kind: raftTimer, help: "Time to compact the log after a snapshot."},
	{key: "raft.removeOldLogs", name: "hotsplit_raft_remove_old_logs_seconds", kind: raftTimer, help: "Time to remove old log entries."},
	{key: "raft.snapshot.takeSnapshot", name: "hotsplit_raft_snapshot_take_seconds", kind: raftTimer, help: "Time to take a snapshot, end to end."},
	{key: "raft.snapshot.create", name: "hotsplit_raft_snapshot_create_seconds", kind: raftTimer, help: "Time to create a snapshot file."},
	{key: "raft.snapshot.persist", name: "hotsplit_raft_snapshot_persist_seconds", kind: raftTimer, help: "Time to write a snapshot file."},
	{key: "raft.net.getRPCType", name: "hotsplit_raft_net_get_rpc_type_seconds", kind: raftTimer, help: "Time to read the type of an incoming raft RPC."},
	{key: "raft.net.rpcDecode", name: "hotsplit_raft_net_rpc_decode_seconds", kind: raftTimer, labels: []string{"rpcType"}, help: "Time to decode an incoming raft RPC, by type."},
	{key: "raft.net.rpcEnqueue", name: "hotsplit_raft_net_rpc_enqueue_seconds", kind: raftTimer, labels: []string{"rpcType"}, help: "Time an incoming raft RPC waits for raft's loop, by type."},
	{key: "raft.net.rpcRespond", name: "hotsplit_raft_net_rpc_respond_seconds", kind: raftTimer, labels: []string{"rpcType"}, help: "Time to answer an incoming raft RPC, by type."},
	{key: "raft.boltdb.getLog", name: "hotsplit_raft_boltdb_get_log_seconds", kind: raftTimer, help: "Time to read one entry from raft.db."},
	{key: "raft.boltdb.storeLogs", name: "hotsplit_raft_boltdb_store_logs_seconds", kind: raftTimer, help: "Time to write a batch of entries to raft.db (fsync included)."},

	{key: "raft.fsm.applyBatchNum", name: "hotsplit_raft_fsm_apply_batch_entries", kind: raftSample, bucket: countBuckets, help: "Entries per batch handed to the FSM."},
	{key: "raft.boltdb.logsPerBatch", name: "hotsplit_raft_boltdb_batch_entries", kind: raftSample, bucket: countBuckets, help: "Entries per batch written to raft.db."},
	{key: "raft.boltdb.logBatchSize", name: "hotsplit_raft_boltdb_batch_bytes", kind: raftSample, bucket: bytesBuckets, help: "Bytes per batch written to raft.db."},
	{key: "raft.boltdb.logSize", name: "hotsplit_raft_boltdb_entry_bytes", kind: raftSample, bucket: bytesBuckets, help: "Bytes per entry written to raft.db."},
	{key: "raft.thread.main.saturation", name: "hotsplit_raft_thread_saturation_ratio", kind: raftLastValue, fixed: map[string]string{"thread": "main"}, help: "Share of the last second raft's goroutine spent working, by goroutine (main loop, fsm)."},
	{key: "raft.thread.fsm.saturation", name: "hotsplit_raft_thread_saturation_ratio", kind: raftLastValue, fixed: map[string]string{"thread": "fsm"}, help: "Share of the last second raft's goroutine spent working, by goroutine (main loop, fsm)."},
}

// raftSink is a go-metrics sink that feeds the table's Prometheus metrics.
// Safe for concurrent use: the maps are built once and only read after.
type raftSink struct {
	rows       map[string]*raftRow // by key
	peerSeries []*prometheus.MetricVec
}

type raftRow struct {
	raftMetric
	counter *prometheus.CounterVec
	gauge   *prometheus.GaugeVec
	hist    *prometheus.HistogramVec
}

func newRaftSink(reg prometheus.Registerer) *raftSink {
	s := &raftSink{rows: map[string]*raftRow{}}
	shared := map[string]*raftRow{} // rows of one Prometheus family
	for _, m := range raftMetricTable {
		labels := []string{}
		for k := range m.fixed {
			labels = append(labels, k)
		}
		for _, l := range m.labels {
			labels = append(labels, raftLabelNames[l])
		}
		row := &raftRow{raftMetric: m}
		if f, ok := shared[m.name]; ok {
			row.counter, row.gauge, row.hist = f.counter, f.gauge, f.hist
		} else {
			var c prometheus.Collector
			switch m.kind {
			case raftCounter:
				row.counter = prometheus.NewCounterVec(prometheus.CounterOpts{Name: m.name, Help: m.help}, labels)
				c = row.counter
			case raftGauge, raftMsGauge, raftLastValue:
				row.gauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: m.name, Help: m.help}, labels)
				c = row.gauge
			case raftTimer, raftSample:
				b := m.bucket
				if m.kind == raftTimer {
					b = secondsBuckets
				}
				row.hist = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: m.name, Help: m.help, Buckets: b}, labels)
				c = row.hist
			}
			reg.MustRegister(c)
			shared[m.name] = row
		}
		s.rows[m.key] = row
		s.preinit(row)
	}
	return s
}

// preinit creates the series whose label values are fixed, so they exist
// (at zero) before raft first emits them.
func (s *raftSink) preinit(r *raftRow) {
	if len(r.labels) > 0 {
		if r.labels[0] != "rpcType" {
			if r.counter != nil {
				s.peerSeries = append(s.peerSeries, r.counter.MetricVec)
			}
			if r.hist != nil {
				s.peerSeries = append(s.peerSeries, r.hist.MetricVec)
			}
			return // peers come and go
		}
		for _, t := range raftRPCTypes {
			r.observe(map[string]string{"rpc_type": t}, 0, false)
		}
		return
	}
	switch {
	case r.counter != nil:
		r.counter.With(r.fixed)
	case r.gauge != nil:
		r.gauge.With(r.fixed)
	case r.hist != nil:
		r.hist.With(r.fixed)
	}
}

// observe records v (already in the exported unit) under labels; add is
// false to only create the series.
func (r *raftRow) observe(labels map[string]string, v float64, add bool) {
	switch {
	case r.counter != nil:
		c := r.counter.With(labels)
		if add {
			c.Add(v)
		}
	case r.gauge != nil:
		g := r.gauge.With(labels)
		if add {
			g.Set(v)
		}
	case r.hist != nil:
		h := r.hist.With(labels)
		if add {
			h.Observe(v)
		}
	}
}

// forgetPeer drops the series of a peer no longer in the configuration.
func (s *raftSink) forgetPeer(peer string) {
	for _, v := range s.peerSeries {
		v.DeletePartialMatch(prometheus.Labels{"peer": peer})
	}
}

func (s *raftSink) emit(key []string, v float32, labels []gometrics.Label, want raftMetricKind) {
	if len(key) > 0 && key[0] == "hotsplit" {
		key = key[1:]
	}
	r := s.rows[strings.Join(key, ".")]
	if r == nil || !kindAccepts(r.kind, want) || len(labels) != len(r.labels) {
		return
	}
	lv := make(map[string]string, len(labels)+len(r.fixed))
	for k, val := range r.fixed {
		lv[k] = val
	}
	for i, l := range labels {
		if l.Name != r.labels[i] {
			return
		}
		val := l.Value
		if l.Name == "rpcType" {
			val = snakeCase(val)
		}
		lv[raftLabelNames[l.Name]] = val
	}
	x := float64(v)
	if r.kind == raftTimer || r.kind == raftMsGauge {
		x /= 1000 // raft measures milliseconds
	}
	r.observe(lv, x, true)
}

// kindAccepts reports whether a row of kind k takes a go-metrics call of
// kind call (raftCounter, raftGauge or raftSample).
func kindAccepts(k, call raftMetricKind) bool {
	switch k {
	case raftCounter:
		return call == raftCounter
	case raftGauge, raftMsGauge:
		return call == raftGauge
	}
	return call == raftSample // timers, samples and last values arrive as samples
}

// snakeCase turns raft's CamelCase names into snake_case.
func snakeCase(s string) string {
	var b strings.Builder
	for i, c := range s {
		if c >= 'A' && c <= 'Z' {
			if i > 0 {
				b.WriteByte('_')
			}
			c += 'a' - 'A'
		}
		b.WriteRune(c)
	}
	return b.String()
}

func (s *raftSink) SetGauge(key []string, val float32) { s.emit(key, val, nil, raftGauge) }
func (s *raftSink) SetGaugeWithLabels(key []string, val float32, l []gometrics.Label) {
	s.emit(key, val, l, raftGauge)
}
func (s *raftSink) EmitKey([]string, float32)             {}
func (s *raftSink) IncrCounter(key []string, val float32) { s.emit(key, val, nil, raftCounter) }
func (s *raftSink) IncrCounterWithLabels(key []string, val float32, l []gometrics.Label) {
	s.emit(key, val, l, raftCounter)
}
func (s *raftSink) AddSample(key []string, val float32) { s.emit(key, val, nil, raftSample) }
func (s *raftSink) AddSampleWithLabels(key []string, val float32, l []gometrics.Label) {
	s.emit(key, val, l, raftSample)
}
