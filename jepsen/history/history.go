// Package history records what jepsen clients did and saw: one Op per
// client call, with its invocation and return times on one monotonic clock,
// its inputs, and its outcome (ok, a definite failure, or unknown). The
// checker later resolves unknown outcomes against the raft log and writes
// the resolved history as a JSON artifact.
//
// It holds no checking logic and talks to no server.
package history

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"
)

// Kind is the client call an Op records.
type Kind string

// The calls jepsen workloads make.
const (
	ListRoutes   Kind = "list_routes"   // linearizable ListRoutes, one page holding every route
	GetRoute     Kind = "get_route"     // linearizable GetRoute, by route id or by key
	Split        Kind = "split"         // manual SplitRange with expected_version
	Merge        Kind = "merge"         // manual MergeRange with expected_version
	SetEnabled   Kind = "set_enabled"   // AutoSplit.SetEnabled
	ReadSwitch   Kind = "read_switch"   // linearizable AutoSplit.Status, for the switch
	GetTimestamp Kind = "get_timestamp" // Catalog.GetTimestamp
)

// Status is how a call ended as the client saw it.
type Status string

// Outcomes.
const (
	OK Status = "ok"
	// Fail: definitely not applied (or, for reads, no answer). Code says
	// which gRPC code; FromFSM says whether the FSM itself refused it (the
	// entry is in the log with a failure) or it never reached the log.
	Fail Status = "fail"
	// Unknown: a mutation that may or may not have been applied (Jepsen's
	// :info).
	Unknown Status = "unknown"
)

// Op is one client call.
type Op struct {
	ID     int    `json:"id"`
	Client int    `json:"client"`
	Kind   Kind   `json:"kind"`
	Status Status `json:"status"`
	// Call and Return are nanoseconds since the run started.
	Call   int64 `json:"call"`
	Return int64 `json:"return"`

	Code      string `json:"code,omitempty"`
	FromFSM   bool   `json:"from_fsm,omitempty"`
	Err       string `json:"err,omitempty"`
	RequestID string `json:"request_id,omitempty"`
	Endpoint  string `json:"endpoint,omitempty"`

	// Split inputs (RouteID and ExpectedVersion also a merge's, RouteID
	// being its left route).
	RouteID         uint64  `json:"route_id,omitempty"`
	SplitKey        []byte  `json:"split_key,omitempty"`
	ExpectedVersion *uint64 `json:"expected_version,omitempty"`
	// Merge input: the route that starts where RouteID ends.
	RightRouteID uint64 `json:"right_route_id,omitempty"`
	// GetRoute input: by Key when ByKey, else by RouteID. RouteID is then
	// the route found; Gone says a lookup by id answered NotFound (the
	// route was not live when the read was served).
	ByKey bool   `json:"by_key,omitempty"`
	Key   []byte `json:"key,omitempty"`
	Gone  bool   `json:"gone,omitempty"`
	// SetEnabled inputs; Status and SetEnabled outputs.
	Enabled bool   `json:"enabled,omitempty"`
	Reason  string `json:"reason,omitempty"`
	// GetTimestamp input.
	Count uint32 `json:"count,omitempty"`

	// Outputs: a read's, a split's or a merge's catalog version; a read's
	// route hash and count (a GetRoute's: of its one route); a split's
	// children, a merge's merged route, and their commit HLC; the timestamp
	// batch.
	Version    uint64 `json:"version,omitempty"`
	RoutesHash string `json:"routes_hash,omitempty"`
	RouteCount int    `json:"route_count,omitempty"`
	LeftID     uint64 `json:"left_id,omitempty"`
	RightID    uint64 `json:"right_id,omitempty"`
	MergedID   uint64 `json:"merged_id,omitempty"`
	CommitHLC  uint64 `json:"commit_hlc,omitempty"`
	First      uint64 `json:"first,omitempty"`
	ServedBy   string `json:"served_by,omitempty"`
	// SwitchEnabled and SwitchReason: the switch a Status read or a
	// SetEnabled answer showed.
	SwitchEnabled bool   `json:"switch_enabled,omitempty"`
	SwitchReason  string `json:"switch_reason,omitempty"`

	// Resolution is the checker's note for an unknown outcome (e.g.
	// "applied at index 812", "not in the log").
	Resolution string `json:"resolution,omitempty"`
}

// Recorder collects Ops from concurrent clients. The zero value is not
// usable; call NewRecorder.
type Recorder struct {
	start time.Time

	mu  sync.Mutex // guards ops
	ops []Op
}

// NewRecorder starts the run clock.
func NewRecorder() *Recorder { return &Recorder{start: time.Now()} }

// Now is the time since the run started, in nanoseconds (monotonic).
func (r *Recorder) Now() int64 { return int64(time.Since(r.start)) }

// Add records a finished call; it assigns the op's ID. Safe for concurrent
// use.
func (r *Recorder) Add(op Op) {
	r.mu.Lock()
	defer r.mu.Unlock()
	op.ID = len(r.ops)
	r.ops = append(r.ops, op)
}

// Ops returns a copy of the recorded ops in recording order.
func (r *Recorder) Ops() []Op {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.ops)
}

// Counts summarises ops by kind and status, e.g. "split ok" -> 412.
func Counts(ops []Op) map[string]int {
	m := map[string]int{}
	for _, op := range ops {
		m[fmt.Sprintf("%s %s", op.Kind, op.Status)]++
	}
	return m
}

// WriteJSON writes ops as one JSON array, one op per line.
func WriteJSON(w io.Writer, ops []Op) error {
	if _, err := io.WriteString(w, "[\n"); err != nil {
		return err
	}
	for i, op := range ops {
		b, err := json.Marshal(op)
		if err != nil {
			return fmt.Errorf("op %d: %w", op.ID, err)
		}
		sep := ",\n"
		if i == len(ops)-1 {
			sep = "\n"
		}
		if _, err := fmt.Fprintf(w, "%s%s", b, sep); err != nil {
			return err
		}
	}
	_, err := io.WriteString(w, "]\n")
	return err
}

// ReadJSON reads what WriteJSON wrote.
func ReadJSON(r io.Reader) ([]Op, error) {
	var ops []Op
	if err := json.NewDecoder(r).Decode(&ops); err != nil {
		return nil, fmt.Errorf("decode history: %w", err)
	}
	return ops, nil
}
