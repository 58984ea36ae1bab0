//go:build jepsen

package node

import (
	"encoding/json"
	"io"
	"net/http"

	"github.com/hotsplit/hotsplit/fsm"
	"github.com/hotsplit/hotsplit/node/storage"
	"github.com/hotsplit/hotsplit/scheduler"
	"github.com/hotsplit/hotsplit/transport"
)

// registerControlHandlers adds POST /jepsen/control, which sets the
// negative controls — deliberate bugs the jepsen suite turns on to prove
// its checker catches them: {"follower_local_reads": bool,
// "skip_read_index": bool, "skip_cas": bool, "skip_merge_cas": bool,
// "skip_ceiling_observe": bool}. Every field is set (absent means off).
func registerControlHandlers(mux *http.ServeMux, n *Node) {
	mux.HandleFunc("POST /jepsen/control", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			FollowerLocalReads bool `json:"follower_local_reads"`
			SkipReadIndex      bool `json:"skip_read_index"`
			SkipCAS            bool `json:"skip_cas"`
			SkipMergeCAS       bool `json:"skip_merge_cas"`
			SkipCeilingObserve bool `json:"skip_ceiling_observe"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		transport.SetReadControls(req.FollowerLocalReads, req.SkipReadIndex)
		fsm.SetSkipCAS(req.SkipCAS)
		fsm.SetSkipMergeCAS(req.SkipMergeCAS)
		scheduler.SetSkipCeilingObserve(req.SkipCeilingObserve)
		n.log.Warn("jepsen: negative controls set", "follower_local_reads", req.FollowerLocalReads,
			"skip_read_index", req.SkipReadIndex, "skip_cas", req.SkipCAS, "skip_merge_cas", req.SkipMergeCAS,
			"skip_ceiling_observe", req.SkipCeilingObserve)
	})
}

// registerDiskHandler adds POST /jepsen/disk {"full_after_bytes": N}: the
// node's log and snapshot writes fail with ENOSPC once N more bytes were
// written (N < 0 disarms).
func registerDiskHandler(mux *http.ServeMux, n *Node) {
	mux.HandleFunc("POST /jepsen/disk", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			FullAfterBytes int64 `json:"full_after_bytes"`
		}
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<10)).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		storage.SetDiskFullAfter(n.cfg.ID, req.FullAfterBytes)
		n.log.Warn("jepsen: disk seam set", "full_after_bytes", req.FullAfterBytes)
	})
}
