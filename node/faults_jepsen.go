//go:build jepsen

package node

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/raft"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/fsm"
	"github.com/hotsplit/hotsplit/hlc"
	"github.com/hotsplit/hotsplit/node/raftnet"
)

// This file is the jepsen build's fault seam. Each hotsplitd process is one
// node, so the fault state is process-wide: the harness tells every node,
// over POST /jepsen/*, which peer addresses it cannot reach (both directions
// are cut by telling both sides; raftnet holds the links), how far to shift
// its clock, and which failpoint to trip. None of it exists in normal
// builds.

// faults is the process-wide fault state of the clock and the FSM; the
// links are raftnet's (raftnet.SetLinkFaults).
var faults = &faultState{}

type faultState struct {
	clockOffsetMs atomic.Int64
	failpoint     atomic.Pointer[failpoint]
}

// wrapClock shifts the physical source by the jepsen clock offset.
func wrapClock(src hlc.Source) hlc.Source {
	if src == nil {
		src = hlc.WallSource
	}
	return func() int64 { return src() + faults.clockOffsetMs.Load() }
}

// failpoint names a condition on which the process exits at once, as a
// crash would (exit status 137, nothing flushed).
type failpoint struct {
	// Name: "after-op-step" (after a SplitRange op step numbered Step applied
	// OK) or "after-command" (after any command of kind Command applied).
	Name    string `json:"name"`
	Step    uint32 `json:"step,omitempty"`
	Command string `json:"command,omitempty"`
	// LeaderOnly: trip only on the node that leads when the entry applies.
	LeaderOnly bool `json:"leader_only,omitempty"`
}

// faultFSM trips failpoints right after an entry applies.
type faultFSM struct {
	*fsm.FSM
	id       string
	isLeader func() bool
}

func wrapFSM(id string, f *fsm.FSM, isLeader func() bool) raft.ConfigurationStore {
	return faultFSM{FSM: f, id: id, isLeader: isLeader}
}

// tripHandlers lets an in-process test (several nodes in one process)
// replace the exit of a tripped failpoint for one node id; unset, the
// process exits with status 137, as a crash would.
var tripHandlers sync.Map // node id -> func(reason string)

func trip(id, reason string) {
	if h, ok := tripHandlers.Load(id); ok {
		h.(func(string))(reason)
		return
	}
	fmt.Fprintln(os.Stderr, reason)
	os.Exit(137)
}

func (f faultFSM) Apply(l *raft.Log) interface{} {
	res := f.FSM.Apply(l)
	fp := faults.failpoint.Load()
	if fp == nil || (fp.LeaderOnly && !f.isLeader()) {
		return res
	}
	cmd, err := fsm.DecodeCommand(l.Data)
	if err != nil {
		return res
	}
	r, _ := res.(*fsm.Result)
	ok := r != nil && r.GetCode() == api.ResultCode_RESULT_CODE_OK
	switch fp.Name {
	case "after-op-step":
		if s := cmd.GetSplitRange(); s != nil && s.OpId != 0 && s.Step == fp.Step && ok {
			trip(f.id, fmt.Sprintf("jepsen failpoint %s: exiting after op %d step %d applied at index %d", fp.Name, s.OpId, s.Step, l.Index))
		}
	case "after-command":
		if commandName(cmd) == fp.Command && ok {
			trip(f.id, fmt.Sprintf("jepsen failpoint %s: exiting after %s applied at index %d", fp.Name, fp.Command, l.Index))
		}
	}
	return res
}

// StoreConfiguration keeps raft.ConfigurationStore visible through the wrapper.
func (f faultFSM) StoreConfiguration(index uint64, c raft.Configuration) {
	f.FSM.StoreConfiguration(index, c)
}

func registerJepsenHandlers(mux *http.ServeMux, n *Node) {
	registerControlHandlers(mux, n)
	registerDiskHandler(mux, n)
	mux.HandleFunc("POST /jepsen/net", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Cut     []string         `json:"cut"`
			DelayMs map[string]int64 `json:"delay_ms"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		raftnet.SetLinkFaults(req.Cut, req.DelayMs)
		n.log.Warn("jepsen: link rules replaced", "cut", fmt.Sprint(req.Cut), "delay_ms", fmt.Sprint(req.DelayMs))
	})
	mux.HandleFunc("POST /jepsen/clock", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			OffsetMs int64 `json:"offset_ms"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		faults.clockOffsetMs.Store(req.OffsetMs)
		n.log.Warn("jepsen: clock offset set", "offset_ms", req.OffsetMs)
	})
	mux.HandleFunc("POST /jepsen/failpoint", func(w http.ResponseWriter, r *http.Request) {
		var fp failpoint
		if err := json.NewDecoder(r.Body).Decode(&fp); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if fp.Name == "" {
			faults.failpoint.Store(nil)
		} else {
			faults.failpoint.Store(&fp)
		}
		n.log.Warn("jepsen: failpoint set", "failpoint", fmt.Sprintf("%+v", fp))
	})
	mux.HandleFunc("GET /jepsen/state", func(w http.ResponseWriter, _ *http.Request) {
		st := n.fsm.State()
		h := st.Hash()
		bh, err := stateBusinessHash(st)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		json.NewEncoder(w).Encode(map[string]any{
			"node_id": n.cfg.ID, "raft_state": n.raft.State().String(), "applied_index": st.Index(),
			"hash": fmt.Sprintf("%x", h), "catalog_version": catalogVersion(st),
			"ready": n.sched.IsReady(), "last_index": n.raft.LastIndex(),
			"term": n.raft.CurrentTerm(), "business_hash": bh, "ceiling_ms": n.clock.Ceiling(),
			// HLC − wall as this node knows it, against its own (shifted) source.
			"hlc_skew_ms": n.clock.AheadMs(max(n.clock.Last(), st.LastHLC())),
			"clock_off":   n.sched.ClockOff(),
		})
	})
	mux.HandleFunc("POST /jepsen/corrupt", func(w http.ResponseWriter, _ *http.Request) {
		n.fsm.CorruptNextApply()
		n.log.Warn("jepsen: the next applied entry corrupts this replica's in-memory state")
	})
}

func catalogVersion(st *fsm.State) uint64 {
	if !st.Bootstrapped() {
		return 0
	}
	return st.Catalog().Version()
}

// commandName is the proto name of the command's body, e.g. "split_range".
func commandName(c *api.Command) string {
	m := c.ProtoReflect()
	if fd := m.WhichOneof(m.Descriptor().Oneofs().ByName("body")); fd != nil {
		return string(fd.Name())
	}
	return ""
}
