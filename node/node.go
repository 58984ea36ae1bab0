package node

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/fsm"
	"github.com/hotsplit/hotsplit/hlc"
	"github.com/hotsplit/hotsplit/internal/raftfuture"
	"github.com/hotsplit/hotsplit/node/health"
	"github.com/hotsplit/hotsplit/node/storage"
	"github.com/hotsplit/hotsplit/node/webauth"
	"github.com/hotsplit/hotsplit/pki"
	"github.com/hotsplit/hotsplit/scheduler"
	"github.com/hotsplit/hotsplit/transport"
)

// grpcHandshakeTimeout bounds a gRPC connection's TLS handshake.
const grpcHandshakeTimeout = 5 * time.Second

// Node is one running hotsplit server. Its methods are safe for
// concurrent use.
type Node struct {
	cfg   Config
	log   *slog.Logger
	raft  *raft.Raft
	fsm   *fsm.FSM
	sched *scheduler.Scheduler
	srv   *transport.Server
	// peers are the connections to other nodes: forwarding, the leader
	// duties' calls and the health probes share them.
	peers *transport.Peers
	grpc  *grpc.Server
	http  *http.Server
	// stores are raft's log, stable and snapshot stores.
	stores *storage.Stores
	clock  *hlc.Clock
	auth   *transport.Authenticator
	// web is the HTTP port's door: browser logins and sessions, the
	// role checks of every HTTP endpoint.
	web *webauth.Store
	// tls holds the node's certificate material; nil when Insecure.
	tls *pki.Reloader
	// stream is raft's transport, closed by a failed Start: it marks
	// itself shut down before it closes the stream layer under it (else
	// raft's accept loop logs the closed listener as an ERROR).
	stream io.Closer

	raftLn, grpcLn, httpLn net.Listener
	// raftRef publishes n.raft to goroutines that start before it: raft's
	// own (the jepsen FSM wrapper asks whether this node leads while an
	// entry applies) and the stream layer's membership check (raft takes
	// its transport at construction, so the transport cannot take raft).
	raftRef atomic.Pointer[raft.Raft]
	// healthRef publishes n.health, and with it n.configs (set before), to
	// the stream layer's membership check, which starts before both.
	healthRef atomic.Pointer[health.Monitor]
	// dataDirClusterID is the cluster id the data dir recorded when the
	// node started ("" if none), read before the stream layer starts.
	dataDirClusterID string

	cancel context.CancelFunc
	wg     sync.WaitGroup

	closeOnce sync.Once
	closeErr  error
	halted    chan struct{} // closed when Halt was called
	halting   atomic.Bool   // set by the first halt
	logGate   *logGate      // sealed by a halt that exits the process

	health  *health.Monitor
	configs *configRecorder
	removed chan struct{} // closed when the node learnt it was removed
}

// hlcSkewSeconds is HLC − wall on this node. A follower issues nothing, so
// its own clock's last value says nothing: the HLC it knows is the last
// applied entry's (without that, the gauge read the whole Unix epoch on
// followers).
func (n *Node) hlcSkewSeconds() float64 {
	return float64(n.clock.AheadMs(max(n.clock.Last(), n.fsm.State().LastHLC()))) / 1000
}

// Defaults of the integrity settings (docs/design.md#trust-and-integrity).
const (
	DefaultMaxClockOffset     = 500 * time.Millisecond
	DefaultStateCheckInterval = 10 * time.Minute
)

func autoSplitFlag(v *bool) api.AutoSplitFlag {
	switch {
	case v == nil:
		return api.AutoSplitFlag_AUTO_SPLIT_FLAG_UNSET
	case *v:
		return api.AutoSplitFlag_AUTO_SPLIT_FLAG_ON
	}
	return api.AutoSplitFlag_AUTO_SPLIT_FLAG_OFF
}

func setIfPositive(dst *time.Duration, v time.Duration) {
	if v > 0 {
		*dst = v
	}
}

func newClusterID() string {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("crypto/rand: %v", err))
	}
	return hex.EncodeToString(b[:])
}

func (n *Node) goRun(f func()) {
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		f()
	}()
}

func (n *Node) openListeners() error {
	var err error
	if n.raftLn = n.cfg.RaftListener; n.raftLn == nil {
		if n.raftLn, err = net.Listen("tcp", n.cfg.RaftAddr); err != nil {
			return fmt.Errorf("raft listener on %s: %w", n.cfg.RaftAddr, err)
		}
	}
	if n.grpcLn = n.cfg.GRPCListener; n.grpcLn == nil {
		if n.grpcLn, err = net.Listen("tcp", n.cfg.GRPCAddr); err != nil {
			return fmt.Errorf("grpc listener on %s: %w", n.cfg.GRPCAddr, err)
		}
	}
	if n.httpLn = n.cfg.HTTPListener; n.httpLn == nil && n.cfg.HTTPAddr != "" {
		if n.httpLn, err = net.Listen("tcp", n.cfg.HTTPAddr); err != nil {
			return fmt.Errorf("http listener on %s: %w", n.cfg.HTTPAddr, err)
		}
	}
	return nil
}

// limitListeners caps the connections of every listener (docs/design.md#trust-and-integrity).
func (n *Node) limitListeners(max int, m *transport.Metrics) {
	n.raftLn = transport.LimitListener(n.raftLn, max, "raft", m)
	n.grpcLn = transport.LimitListener(n.grpcLn, max, "grpc", m)
	if n.httpLn != nil {
		n.httpLn = transport.LimitListener(n.httpLn, max, "http", m)
	}
}

func (n *Node) closeListeners() {
	for _, ln := range []net.Listener{n.raftLn, n.grpcLn, n.httpLn} {
		if ln != nil {
			ln.Close()
		}
	}
}

func (n *Node) advertisedRaft() string {
	if n.cfg.RaftAddr != "" && n.cfg.RaftListener == nil {
		return n.cfg.RaftAddr
	}
	return n.raftLn.Addr().String()
}

func (n *Node) advertisedGRPC() string {
	if n.cfg.GRPCAddr != "" && n.cfg.GRPCListener == nil {
		return n.cfg.GRPCAddr
	}
	return n.grpcLn.Addr().String()
}

// ID returns the node id.
func (n *Node) ID() string { return n.cfg.ID }

// GRPCAddr returns the address clients reach this node at.
func (n *Node) GRPCAddr() string { return n.advertisedGRPC() }

// RaftAddr returns the raft address peers reach this node at.
func (n *Node) RaftAddr() string { return n.advertisedRaft() }

// HTTPAddr returns the HTTP address, or "" when disabled.
func (n *Node) HTTPAddr() string {
	if n.httpLn == nil {
		return ""
	}
	return n.httpLn.Addr().String()
}

// FSM returns the node's state machine (read side).
func (n *Node) FSM() *fsm.FSM { return n.fsm }

// Raft returns the node's raft instance.
func (n *Node) Raft() *raft.Raft { return n.raft }

// Scheduler returns the node's leader duties.
func (n *Node) Scheduler() *scheduler.Scheduler { return n.sched }

// Halted is closed when the node stopped itself because it must not go on
// and Config.Halt let the process live on (a real process has exited).
func (n *Node) Halted() <-chan struct{} { return n.halted }

// halt stops the node for good: a storage fault, an entry this build cannot
// apply, a diverged state, a clock off from the cluster
// (docs/design.md#limits-and-bad-input). The first caller logs one ERROR line
// and, in a real process, exits 1; every other caller blocks in a real process
// (the exit is under way, and returning an error into raft would make it panic)
// and returns at once when a test installed Config.Halt.
func (n *Node) halt(err error) {
	if !n.halting.CompareAndSwap(false, true) {
		if n.cfg.Halt == nil {
			select {}
		}
		return
	}
	if n.cfg.Halt == nil {
		// The ERROR line must be the process's last: no other log line
		// may follow it, and Halted stays open so no watcher wakes to
		// write one.
		n.logGate.seal()
		n.cfg.Logger.Error("stopping: "+err.Error(), "node_id", n.cfg.ID, "reason", "halt")
		os.Exit(1)
	}
	n.log.Error("stopping: "+err.Error(), "reason", "halt")
	close(n.halted)
	n.cfg.Halt(err)
	// The process goes on (a test or an embedder chose so): stop serving
	// anyway. Asynchronously, because halt may run on a raft goroutine that
	// Shutdown waits for.
	go func() {
		if n.grpc != nil {
			n.grpc.Stop()
		}
		if n.raft != nil {
			n.raft.Shutdown()
		}
	}()
}

// Close stops the node gracefully: a leader first hands leadership to a
// caught-up follower (bounded), then gRPC drains, raft shuts down and the
// store closes. Safe to call more than once.
func (n *Node) Close(ctx context.Context) error {
	n.closeOnce.Do(func() { n.closeErr = n.close(ctx) })
	return n.closeErr
}

func (n *Node) close(ctx context.Context) error {
	if n.raft.State() == raft.Leader && n.hasOtherVoters() {
		if err := waitWithin(ctx, n.raft.LeadershipTransfer(), 5*time.Second); err != nil {
			n.log.Warn("leadership transfer before shutdown failed", "reason", err.Error())
		} else {
			n.log.Info("handed leadership over before shutdown")
		}
	}
	n.cancel()
	stopped := make(chan struct{})
	go func() { n.grpc.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(3 * time.Second):
		n.grpc.Stop()
	}
	if n.http != nil {
		sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		n.http.Shutdown(sctx)
		cancel()
	}
	errs := []error{n.raft.Shutdown().Error()}
	n.wg.Wait()
	errs = append(errs, n.peers.Close(), n.stores.Close())
	n.closeListeners()
	return errors.Join(errs...)
}

func (n *Node) hasOtherVoters() bool {
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return false
	}
	for _, s := range f.Configuration().Servers {
		if s.Suffrage == raft.Voter && string(s.ID) != n.cfg.ID {
			return true
		}
	}
	return false
}

func waitWithin(ctx context.Context, f raft.Future, d time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	return raftfuture.Wait(ctx, f)
}
