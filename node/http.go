package node

import (
	"fmt"
	"net/http"
	"net/http/pprof"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/hotsplit/hotsplit/node/raftobs"
	"github.com/hotsplit/hotsplit/node/webauth"
	"github.com/hotsplit/hotsplit/transport"
)

// httpHandler serves /healthz (the process is up) and /readyz (this node
// knows a leader and holds a bootstrapped catalog) to anyone — they are
// probes; /metrics (this node's registry plus raft's bridged metrics) to the
// reader role unless MetricsInsecure; /debug/pprof/ to admins, only with
// EnablePprof (pprof's cmdline shows every flag); and the key visualizer
// (page.go) to readers and browser sessions. Refusals are 401 without
// credentials, 403 without the role, each counted (webauth).
func (n *Node) httpHandler() http.Handler {
	mux := http.NewServeMux()
	gather := prometheus.Gatherers{n.cfg.Registry, raftobs.Registry()}
	metrics := promhttp.HandlerFor(gather, promhttp.HandlerOpts{})
	if !n.cfg.MetricsInsecure {
		metrics = n.web.Guard(webauth.EndpointMetrics, transport.RoleReader, false, metrics)
	}
	mux.Handle("/metrics", metrics)
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
	if n.cfg.EnablePprof {
		prof := http.NewServeMux()
		prof.HandleFunc("/debug/pprof/", pprof.Index)
		prof.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		prof.HandleFunc("/debug/pprof/profile", pprof.Profile)
		prof.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		prof.HandleFunc("/debug/pprof/trace", pprof.Trace)
		mux.Handle("/debug/pprof/", n.web.Guard(webauth.EndpointPprof, transport.RoleAdmin, false, prof))
	}
	n.registerPage(mux)
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
