package fsm

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/catalog"
)

// Each size of Options: 0 and negative take its default, a positive one
// is kept.
func TestOptionSizes(t *testing.T) {
	sizes := []struct {
		name string
		set  func(*Options, int)
		get  func(*FSM) int
		def  int
	}{
		{"RequestTableSize", func(o *Options, v int) { o.RequestTableSize = v }, func(f *FSM) int { return f.requestTableSize }, DefaultRequestTableSize},
		{"DecisionRingSize", func(o *Options, v int) { o.DecisionRingSize = v }, func(f *FSM) int { return f.decisionRingSize }, DefaultDecisionRingSize},
		{"FinishedOps", func(o *Options, v int) { o.FinishedOps = v }, func(f *FSM) int { return f.finishedOps }, DefaultFinishedOps},
		{"HistorySize", func(o *Options, v int) { o.HistorySize = v }, func(f *FSM) int { return f.historySize }, catalog.DefaultHistory},
	}
	for _, sz := range sizes {
		for _, tc := range []struct{ in, want int }{{0, sz.def}, {-1, sz.def}, {7, 7}} {
			var o Options
			sz.set(&o, tc.in)
			if got := sz.get(New(o)); got != tc.want {
				t.Errorf("%s %d: got %d, want %d", sz.name, tc.in, got, tc.want)
			}
		}
	}
}

func TestStoreConfigurationAdvancesIndex(t *testing.T) {
	h := bootstrapped(t, nil, nil)
	before := h.state()
	ch := h.f.Changed()
	h.f.StoreConfiguration(before.Index()+5, raft.Configuration{})
	select {
	case <-ch:
	default:
		t.Fatal("Changed not closed by a configuration entry")
	}
	if got := h.state().Index(); got != before.Index()+5 {
		t.Fatalf("index %d, want %d", got, before.Index()+5)
	}
	if h.state().Hash() != before.Hash() {
		t.Fatal("a configuration entry changed the replicated state")
	}
}

func TestWaitIndex(t *testing.T) {
	h := bootstrapped(t, nil, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if s, err := h.f.WaitIndex(ctx, h.index); err != nil || s.Index() != h.index {
		t.Fatalf("WaitIndex on the current index: %v %v", s, err)
	}
	target := h.index + 3
	done := make(chan *State, 1)
	go func() {
		s, err := h.f.WaitIndex(ctx, target)
		if err != nil {
			t.Error(err)
		}
		done <- s
	}()
	for range 3 {
		h.run(&api.Command{Body: &api.Command_AdvanceCeiling{AdvanceCeiling: &api.AdvanceCeiling{CeilingMs: 1}}})
	}
	select {
	case s := <-done:
		if s.Index() < target {
			t.Fatalf("woke at index %d < %d", s.Index(), target)
		}
	case <-ctx.Done():
		t.Fatal("WaitIndex did not return")
	}
	short, cancelShort := context.WithCancel(context.Background())
	cancelShort()
	if _, err := h.f.WaitIndex(short, target+100); !errors.Is(err, context.Canceled) {
		t.Fatalf("WaitIndex with a canceled context: %v", err)
	}
}

// Readers hold old States while Apply publishes new ones: run under -race.
func TestConcurrentReaders(t *testing.T) {
	h := bootstrapped(t, nil, nil)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				s := h.f.State()
				_ = s.Hash()
				s.Catalog().Lookup([]byte("k"))
				s.RequestResult("r")
				select {
				case <-h.f.Changed():
				case <-ctx.Done():
				}
			}
		}()
	}
	for i := range 200 {
		key := fmt.Sprintf("k%04d", i)
		r := h.run(split(h.state().Catalog().Lookup([]byte(key)).ID, key))
		if r.Code != api.ResultCode_RESULT_CODE_OK {
			t.Errorf("split %d: %v %s", i, r.Code, r.Message)
			break
		}
	}
	cancel()
	wg.Wait()
}
