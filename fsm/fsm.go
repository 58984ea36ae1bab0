package fsm

import (
	"cmp"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"sync/atomic"

	"github.com/hashicorp/raft"

	"github.com/hotsplit/hotsplit/catalog"
)

// FSM is hotsplit's raft.FSM and raft.ConfigurationStore.
//
// Concurrency: raft calls Apply, StoreConfiguration, Snapshot and Restore
// from its single FSM goroutine, one at a time; they must not be called
// concurrently with each other. The read side (State, Changed, WaitIndex)
// is lock-free and safe from any goroutine: every entry publishes a new
// immutable *State through an atomic pointer.
type FSM struct {
	log  *slog.Logger
	halt func(error)
	m    *Metrics

	requestTableSize int
	decisionRingSize int
	finishedOps      int
	historySize      int
	onCheckState     func(uint64, *State)
	seams            testSeams

	cur atomic.Pointer[published]
}

// published pairs a State with the channel closed when its successor is
// published, so Changed and WaitIndex need no lock.
type published struct {
	s    *State
	next chan struct{}
}

var (
	_ raft.FSM                = (*FSM)(nil)
	_ raft.ConfigurationStore = (*FSM)(nil)
)

// New returns an FSM holding the empty, not yet bootstrapped state.
func New(opts Options) *FSM {
	// A size of 0 or below takes the default: max(v, 0) turns a negative
	// size into the zero cmp.Or passes over.
	f := &FSM{
		log:              opts.Logger,
		halt:             opts.Halt,
		m:                opts.Metrics,
		requestTableSize: cmp.Or(max(opts.RequestTableSize, 0), DefaultRequestTableSize),
		decisionRingSize: cmp.Or(max(opts.DecisionRingSize, 0), DefaultDecisionRingSize),
		finishedOps:      cmp.Or(max(opts.FinishedOps, 0), DefaultFinishedOps),
		historySize:      cmp.Or(max(opts.HistorySize, 0), catalog.DefaultHistory),
		onCheckState:     opts.OnCheckState,
	}
	if f.log == nil {
		f.log = slog.Default()
	}
	if f.halt == nil {
		log := f.log
		f.halt = func(err error) {
			log.Error("fsm: halting: this build cannot apply the replicated log safely", "err", err)
			os.Exit(2)
		}
	}
	f.cur.Store(&published{s: emptyState(), next: make(chan struct{})})
	return f
}

// State returns the current published state. Lock-free.
func (f *FSM) State() *State { return f.cur.Load().s }

// Changed returns a channel closed when the next State is published.
func (f *FSM) Changed() <-chan struct{} { return f.cur.Load().next }

// WaitIndex blocks until the published State's Index() >= index, or ctx
// ends.
func (f *FSM) WaitIndex(ctx context.Context, index uint64) (*State, error) {
	for {
		p := f.cur.Load()
		if p.s.index >= index {
			return p.s, nil
		}
		select {
		case <-p.next:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func (f *FSM) publish(s *State) {
	old := f.cur.Swap(&published{s: s, next: make(chan struct{})})
	close(old.next)
	f.m.observeState(s)
}

// StoreConfiguration advances the applied index past a configuration entry
// (raft hands those to the FSM, never Noop or Barrier entries), so that
// WaitIndex on the read path sees every index this FSM has seen.
func (f *FSM) StoreConfiguration(index uint64, _ raft.Configuration) {
	cur := f.State()
	if index <= cur.index {
		return
	}
	ns := *cur
	ns.index = index
	f.publish(&ns)
}

// Snapshot captures the current state in O(1): the State is immutable.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	return &fsmSnapshot{s: f.State()}, nil
}

// Restore replaces the state with a snapshot written by Persist. On any
// failure it returns a wrapped ErrSnapshot and leaves the current state
// untouched. A snapshot of a cluster version above SupportedVersion also
// halts: raft would otherwise fall back to an older snapshot and replay a
// log this build cannot apply (docs/design.md#the-state-machine).
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	s, err := readSnapshot(rc, f.limits())
	if errors.Is(err, ErrVersion) {
		f.halt(err)
	}
	if err != nil {
		return err
	}
	if s.cat != nil {
		s.hist = catalog.NewHistory(f.historySize, s.cat.Version())
	}
	f.publish(s)
	f.log.Info("fsm: restored snapshot", "index", s.index, "bootstrapped", s.bootstrapped, "routes", s.routeCount())
	return nil
}

func (s *State) routeCount() int {
	if s.cat == nil {
		return 0
	}
	return s.cat.Len()
}
