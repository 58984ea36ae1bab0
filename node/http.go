package node

import (
	"fmt"
	"net/http"
	"net/http/pprof"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc/status"

	"github.com/hotsplit/hotsplit/node/raftobs"
	"github.com/hotsplit/hotsplit/transport"
)

// httpHandler serves /healthz (the process is up) and /readyz (this node
// knows a leader and holds a bootstrapped catalog) to anyone — they are
// probes; /metrics (this node's registry plus raft's bridged metrics) to the
// reader role unless MetricsInsecure; and /debug/pprof/ to admins, only with
// EnablePprof (pprof's cmdline shows every flag).
func (n *Node) httpHandler() http.Handler {
	mux := http.NewServeMux()
	gather := prometheus.Gatherers{n.cfg.Registry, raftobs.Registry()}
	metrics := promhttp.HandlerFor(gather, promhttp.HandlerOpts{})
	if !n.cfg.MetricsInsecure {
		metrics = n.requireRole(transport.RoleReader, metrics)
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
		mux.Handle("/debug/pprof/", n.requireRole(transport.RoleAdmin, prof))
	}
	registerJepsenHandlers(mux, n)
	return mux
}

// requireRole serves h only to callers authenticated (client certificate or
// bearer token) with role r: 401 without credentials, 403 without the role.
func (n *Node) requireRole(r transport.Role, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		p, err := n.auth.FromHTTP(req)
		if err != nil {
			http.Error(w, status.Convert(err).Message(), http.StatusUnauthorized)
			return
		}
		if !p.Has(r) {
			http.Error(w, fmt.Sprintf("identity %q may not read %s: it needs role %s", p.Name, req.URL.Path, r), http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, req)
	})
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
