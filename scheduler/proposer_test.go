package scheduler

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/fsm"
	"github.com/hotsplit/hotsplit/hlc"
	"github.com/hotsplit/hotsplit/internal/testutil"
)

// waitFor is how long a test waits for a condition before failing.
const waitFor = 5 * time.Second

// fakeFuture is an ApplyFuture answered when released.
type fakeFuture struct {
	release chan struct{}
	err     error
	resp    any
}

func (f *fakeFuture) Error() error     { <-f.release; return f.err }
func (f *fakeFuture) Response() any    { return f.resp }
func (f *fakeFuture) Index() uint64    { return 0 }
func (f *fakeFuture) Done() <-chan any { return nil }

// fakeRaft records the order in which commands were enqueued.
type fakeRaft struct {
	mu       sync.Mutex
	enqueued [][]byte
	futures  []*fakeFuture
	err      error
	hold     bool
}

func (r *fakeRaft) Apply(cmd []byte, _ time.Duration) raft.ApplyFuture {
	r.mu.Lock()
	defer r.mu.Unlock()
	f := &fakeFuture{release: make(chan struct{}), err: r.err, resp: &fsm.Result{CommandResult: &api.CommandResult{}}}
	if !r.hold {
		close(f.release)
	}
	r.enqueued = append(r.enqueued, cmd)
	r.futures = append(r.futures, f)
	return f
}

func TestProposerLogOrderIsHLCOrder(t *testing.T) {
	r := &fakeRaft{}
	clock := hlc.New(nil)
	clock.SetCeiling(1 << 46)
	p := NewProposer(r, clock, time.Second, func() uint32 { return 1 })
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 200 {
				if _, err := p.Propose(context.Background(), &api.Command{Body: &api.Command_AdvanceCeiling{AdvanceCeiling: &api.AdvanceCeiling{}}}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	var prev uint64
	for i, b := range r.enqueued {
		cmd, err := fsm.DecodeCommand(b)
		if err != nil {
			t.Fatal(err)
		}
		if cmd.Hlc <= prev {
			t.Fatalf("entry %d enqueued with hlc %s after %s", i, hlc.Format(cmd.Hlc), hlc.Format(prev))
		}
		if cmd.MinVersion != 1 {
			t.Fatalf("entry %d min_version %d", i, cmd.MinVersion)
		}
		prev = cmd.Hlc
	}
	if len(r.enqueued) != 1600 {
		t.Fatalf("%d entries enqueued", len(r.enqueued))
	}
}

func TestProposerWaitsOutsideTheLock(t *testing.T) {
	r := &fakeRaft{hold: true}
	clock := hlc.New(nil)
	clock.SetCeiling(1 << 46)
	p := NewProposer(r, clock, time.Second, func() uint32 { return 1 })
	first := make(chan error, 1)
	go func() {
		_, err := p.Propose(context.Background(), &api.Command{Body: &api.Command_AdvanceCeiling{AdvanceCeiling: &api.AdvanceCeiling{}}})
		first <- err
	}()
	testutil.WaitFor(t, waitFor, "the first proposal enqueued", func() bool { r.mu.Lock(); defer r.mu.Unlock(); return len(r.enqueued) == 1 })
	// The first proposal is waiting on its future; a second one must still
	// get through stamp+enqueue.
	second := make(chan error, 1)
	go func() {
		_, err := p.Propose(context.Background(), &api.Command{Body: &api.Command_AdvanceCeiling{AdvanceCeiling: &api.AdvanceCeiling{}}})
		second <- err
	}()
	testutil.WaitFor(t, waitFor, "the second proposal enqueued", func() bool { r.mu.Lock(); defer r.mu.Unlock(); return len(r.enqueued) == 2 })
	r.mu.Lock()
	for _, f := range r.futures {
		close(f.release)
	}
	r.mu.Unlock()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if err := <-second; err != nil {
		t.Fatal(err)
	}
}

func TestProposerExpiredFenceIsDefinite(t *testing.T) {
	r := &fakeRaft{}
	p := NewProposer(r, hlc.New(nil), time.Second, func() uint32 { return 1 }) // ceiling 0
	_, err := p.Propose(context.Background(), &api.Command{Body: &api.Command_SplitRange{SplitRange: &api.SplitRange{RouteId: 1}}})
	if !errors.Is(err, ErrNotReady) || !IsDefinite(err) {
		t.Fatalf("err = %v, want definite ErrNotReady", err)
	}
	if len(r.enqueued) != 0 {
		t.Fatalf("a command was enqueued without a fenced stamp")
	}
}

func TestProposerCallerGivesUpIsUnknown(t *testing.T) {
	r := &fakeRaft{hold: true}
	clock := hlc.New(nil)
	clock.SetCeiling(1 << 46)
	p := NewProposer(r, clock, time.Second, func() uint32 { return 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err := p.Propose(ctx, &api.Command{Body: &api.Command_AdvanceCeiling{AdvanceCeiling: &api.AdvanceCeiling{}}})
	if !errors.Is(err, ErrOutcomeUnknown) || IsDefinite(err) {
		t.Fatalf("err = %v, want ErrOutcomeUnknown", err)
	}
	close(r.futures[0].release)
}

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		in       error
		want     error
		definite bool
	}{
		{raft.ErrNotLeader, ErrNotLeader, true},
		{raft.ErrEnqueueTimeout, ErrEnqueueTimeout, true},
		{raft.ErrLeadershipTransferInProgress, ErrTransferInProgress, true},
		{raft.ErrLeadershipLost, ErrOutcomeUnknown, false},
		{raft.ErrRaftShutdown, ErrOutcomeUnknown, false},
		{errors.New("disk on fire"), ErrOutcomeUnknown, false},
	} {
		got := classify(tc.in)
		if !errors.Is(got, tc.want) || IsDefinite(got) != tc.definite || !errors.Is(got, tc.in) {
			t.Errorf("classify(%v) = %v (definite %v), want %v (definite %v)", tc.in, got, IsDefinite(got), tc.want, tc.definite)
		}
	}
}

// The fence is computed from the physical clock, never from the HLC: a
// renewal must not let the HLC's lead grow by a window each time. After a
// new leader observed an old ceiling ahead of its clock, the fence stays one
// millisecond above it, so the leader can still stamp entries.
func TestAdvanceCeilingFollowsThePhysicalClock(t *testing.T) {
	var ms atomic.Int64
	ms.Store(1_000_000)
	clock := hlc.New(func() int64 { return ms.Load() })
	s := &Scheduler{cfg: Config{CeilingWindow: time.Second}, clock: clock,
		proposer: NewProposer(&fakeRaft{}, clock, time.Second, func() uint32 { return 1 })}
	ctx := context.Background()
	if err := s.advanceCeiling(ctx); err != nil {
		t.Fatal(err)
	}
	if got := clock.Ceiling(); got != 1_001_000 {
		t.Fatalf("ceiling %d, want clock + window = 1001000", got)
	}
	// Renewals with the HLC ahead of the clock (an observed old ceiling)
	// do not move the fence further ahead.
	clock.Observe(hlc.Make(1_005_000, 0))
	for range 5 {
		if err := s.advanceCeiling(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if got := clock.Ceiling(); got != 1_005_001 {
		t.Fatalf("ceiling %d after renewals with the HLC 5 s ahead, want 1005001 (one ms above it)", got)
	}
	if _, err := clock.NextFenced(); err != nil {
		t.Fatalf("the leader cannot stamp under the observed ceiling: %v", err)
	}
}
