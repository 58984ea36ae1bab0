package node

import (
	"fmt"
	"net/http"
	"net/http/pprof"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// httpHandler serves /metrics (this node's registry plus raft's bridged
// metrics), /healthz (the process is up), /readyz (this node knows a leader
// and holds a bootstrapped catalog) and /debug/pprof/.
func (n *Node) httpHandler() http.Handler {
	mux := http.NewServeMux()
	gather := prometheus.Gatherers{n.cfg.Registry, raftRegistry}
	mux.Handle("/metrics", promhttp.HandlerFor(gather, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		select {
		case <-n.halted:
			http.Error(w, "halted", http.StatusServiceUnavailable)
		default:
			fmt.Fprintln(w, "ok")
		}
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if err := n.ready(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	registerJepsenHandlers(mux, n)
	return mux
}

func (n *Node) ready() error {
	select {
	case <-n.halted:
		return fmt.Errorf("halted")
	default:
	}
	if _, id := n.raft.LeaderWithID(); id == "" {
		return fmt.Errorf("no known leader (raft state %s)", n.raft.State())
	}
	if !n.fsm.State().Bootstrapped() {
		return fmt.Errorf("catalog not bootstrapped yet")
	}
	if n.raft.State() == raft.Leader && !n.sched.IsReady() {
		return fmt.Errorf("leader establishing its fence")
	}
	return nil
}
