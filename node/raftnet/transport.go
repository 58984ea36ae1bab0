package raftnet

import (
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// Transport is raft's NetworkTransport with its heartbeat fast path
// turned off, so every AppendEntries, heartbeats included, is handled by
// raft's main loop.
//
// Why: hashicorp/raft v1.7.2 handles a heartbeat on the transport goroutine
// (hashicorp/raft#695, fix proposed in #701). A heartbeat carrying a newer
// term bumps currentTerm and steps the node down with no synchronisation
// against the leader loop, which can meanwhile stamp a client entry with the
// new term and replicate it: two nodes then commit different entries at
// one index under one term. jepsen's pause storm finds exactly that in about
// one storm in four; with heartbeats in the main loop it found none. The
// cost: a follower busy writing a large batch answers a heartbeat after it
// rather than beside it, which the election timeout (1 s by default, far
// above a batch write) absorbs.
//
// It also records which AppendEntries each peer accepted, for
// WithFreshVerify. Safe for concurrent use, as raft's transport is.
type Transport struct {
	*raft.NetworkTransport
	acks *ackTracker
}

// NewTransport returns raft's transport over stream. MaxRPCsInFlight 1
// turns raft's pipelined replication off: in v1.7.2 its pipeline can
// deadlock when a follower answers Success=false (the decoder exits, the
// sender parks on a full channel, replication to that follower stops for
// good and Shutdown waits forever; see docs/design.md). Each follower then
// gets one AppendEntries at a time, batching whatever queued meanwhile.
func NewTransport(stream raft.StreamLayer, logger hclog.Logger) *Transport {
	return &Transport{raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{Stream: stream, MaxPool: 3, MaxRPCsInFlight: 1, Timeout: 10 * time.Second, Logger: logger}), newAckTracker()}
}

// WithFreshVerify returns r, whose transport t is, with a VerifyLeader
// that counts only answers to requests sent after it began (see
// FreshVerify); self is r's server id.
func (t *Transport) WithFreshVerify(r *raft.Raft, self raft.ServerID) FreshVerify {
	return FreshVerify{r, t.acks, self}
}

// SetHeartbeatHandler ignores the handler: raft then receives heartbeats on
// its consumer channel like any other RPC.
func (Transport) SetHeartbeatHandler(func(raft.RPC)) {}

// AppendEntries records, for a successful answer in the request's own term,
// when the request left: the proof FreshVerify needs.
func (t Transport) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	sent := time.Now() // no later than the bytes leave: a conservative send time
	err := t.NetworkTransport.AppendEntries(id, target, args, resp)
	if err == nil && resp.Success && resp.Term == args.Term {
		t.acks.record(id, args.Term, sent)
	}
	return err
}

// ackTracker keeps, per peer, the send time of the latest AppendEntries the
// peer accepted and its term. Safe for concurrent use.
type ackTracker struct {
	mu      sync.Mutex // guards the fields below
	last    map[raft.ServerID]ack
	changed chan struct{} // closed on a record while someone waits
	waiting int
}

type ack struct {
	term uint64
	sent time.Time
}

func newAckTracker() *ackTracker {
	return &ackTracker{last: map[raft.ServerID]ack{}, changed: make(chan struct{})}
}

func (a *ackTracker) record(id raft.ServerID, term uint64, sent time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if prev, ok := a.last[id]; ok && prev.term == term && prev.sent.After(sent) {
		return
	}
	a.last[id] = ack{term, sent}
	if a.waiting > 0 {
		close(a.changed)
		a.changed = make(chan struct{})
	}
}

// ackedSince reports whether enough of voters, besides self, accepted an
// AppendEntries of term sent at or after since to make a quorum with self,
// and otherwise returns a channel closed on the next record.
func (a *ackTracker) ackedSince(since time.Time, term uint64, self raft.ServerID, voters []raft.ServerID) (bool, <-chan struct{}) {
	a.mu.Lock()
	defer a.mu.Unlock()
	quorum := len(voters)/2 + 1
	n := 0
	for _, id := range voters {
		if id == self {
			n++
		} else if x, ok := a.last[id]; ok && x.term == term && !x.sent.Before(since) {
			n++
		}
	}
	if n >= quorum {
		return true, nil
	}
	a.waiting++
	return false, a.changed
}

func (a *ackTracker) doneWaiting() {
	a.mu.Lock()
	a.waiting--
	a.mu.Unlock()
}

// FreshVerify is raft with a VerifyLeader that counts only answers to
// requests sent after the call. raft v1.7.2 counts any successful
// AppendEntries answer that arrives while a verification waits, including
// one to a request sent before it: a leader paused (SIGSTOP, a long GC or
// VM stall) and resumed after its successor was elected reads the answers
// its followers gave before the election, and verifies. jepsen's pause
// storm found a read served that way, older than a write already
// acknowledged. So after raft's verification, a quorum must also have
// accepted an AppendEntries of this term sent after the call began; the
// heartbeats raft's verification triggers are such requests, so a leader
// that still leads waits no longer than raft's own verification.
type FreshVerify struct {
	*raft.Raft
	acks *ackTracker
	self raft.ServerID
}

// freshAckWait bounds the wait for answers to requests sent after a
// verification began (raft's own verification has succeeded by then).
const freshAckWait = 2 * time.Second

func (r FreshVerify) VerifyLeader() raft.Future {
	since, term := time.Now(), r.Raft.CurrentTerm()
	return &freshFuture{verify: r.Raft.VerifyLeader(), r: r, since: since, term: term}
}

type freshFuture struct {
	verify raft.Future
	r      FreshVerify
	since  time.Time
	term   uint64
	once   sync.Once
	err    error
}

func (f *freshFuture) Error() error {
	f.once.Do(func() { f.err = f.wait() })
	return f.err
}

func (f *freshFuture) wait() error {
	if err := f.verify.Error(); err != nil {
		return err
	}
	cf := f.r.Raft.GetConfiguration()
	if err := cf.Error(); err != nil {
		return err
	}
	var voters []raft.ServerID
	for _, s := range cf.Configuration().Servers {
		if s.Suffrage == raft.Voter {
			voters = append(voters, s.ID)
		}
	}
	timer := time.NewTimer(freshAckWait)
	defer timer.Stop()
	for {
		ok, changed := f.r.acks.ackedSince(f.since, f.term, f.r.self, voters)
		if ok {
			return nil
		}
		select {
		case <-changed:
			f.r.acks.doneWaiting()
		case <-timer.C:
			f.r.acks.doneWaiting()
			return fmt.Errorf("%w: no quorum accepted an AppendEntries of term %d sent after the verification began", raft.ErrNotLeader, f.term)
		}
	}
}
