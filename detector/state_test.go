package detector

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

func TestDefaultConfigIsTheSpec(t *testing.T) {
	got := DefaultConfig()
	want := Config{
		Threshold: 50_000, WriteWeight: 4, ReadWeight: 1, CandidateWindows: 3,
		CooldownMs: 600_000, MaxSplitsPerCycle: 1, MaxAutoRoutes: 1024,
		TopKeyShareBP: 8000, TopKeyAbsoluteFloor: 25_000, Buckets: 16, SmoothingWindows: 5, HoldBandBP: 8000,
		// docs/design.md "Merges" (docs/design.md#merges leaves them to the simlab comparison).
		MergeThresholdBP: 2500, MergeWindows: 10, MergeDelayMs: 1_800_000, MaxMergesPerCycle: 1, MergeMarginBP: 5000,
	}
	if got != want {
		t.Fatalf("DefaultConfig() = %+v\nwant %+v", got, want)
	}
	if err := got.Validate(); err != nil {
		t.Fatalf("defaults invalid: %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	cases := []struct {
		name  string
		edit  func(*Config)
		field string // "" = valid
	}{
		{"threshold 0", func(c *Config) { c.Threshold = 0 }, "threshold: must be >= 1"},
		{"threshold 1", func(c *Config) { c.Threshold = 1 }, ""},
		{"write weight above limit", func(c *Config) { c.WriteWeight = 1001 }, "write_weight"},
		{"read weight above limit", func(c *Config) { c.ReadWeight = 1001 }, "read_weight"},
		{"both weights 0", func(c *Config) { c.WriteWeight, c.ReadWeight = 0, 0 }, "write_weight"},
		{"reads only", func(c *Config) { c.WriteWeight = 0 }, ""},
		{"candidate windows 0", func(c *Config) { c.CandidateWindows = 0 }, "candidate_windows"},
		{"candidate windows above limit", func(c *Config) { c.CandidateWindows = 1001 }, "candidate_windows"},
		{"cooldown 0", func(c *Config) { c.CooldownMs = 0 }, ""},
		{"cooldown above 7 days", func(c *Config) { c.CooldownMs = 7*24*3600*1000 + 1 }, "cooldown_ms"},
		{"splits per cycle 0", func(c *Config) { c.MaxSplitsPerCycle = 0 }, "max_splits_per_cycle"},
		{"splits per cycle above limit", func(c *Config) { c.MaxSplitsPerCycle = 1025 }, "max_splits_per_cycle"},
		{"max auto routes 0", func(c *Config) { c.MaxAutoRoutes = 0 }, "max_auto_routes"},
		{"top key share 0", func(c *Config) { c.TopKeyShareBP = 0 }, "top_key_share_bp"},
		{"top key share above 10000", func(c *Config) { c.TopKeyShareBP = 10_001 }, "top_key_share_bp"},
		{"top key share 10000", func(c *Config) { c.TopKeyShareBP = 10_000 }, ""},
		{"absolute floor 0", func(c *Config) { c.TopKeyAbsoluteFloor = 0 }, ""},
		{"buckets 0", func(c *Config) { c.Buckets = 0 }, "buckets"},
		{"buckets 257", func(c *Config) { c.Buckets = 257 }, "buckets"},
		{"buckets 256", func(c *Config) { c.Buckets = 256 }, ""},
		{"smoothing windows 0", func(c *Config) { c.SmoothingWindows = 0 }, "smoothing_windows"},
		{"smoothing windows 65", func(c *Config) { c.SmoothingWindows = 65 }, "smoothing_windows"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			tc.edit(&c)
			err := c.Validate()
			if tc.field == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil || !errors.Is(err, ErrInvalidConfig) || !strings.HasPrefix(err.Error(), tc.field) {
				t.Fatalf("Validate = %v, want an ErrInvalidConfig starting %q", err, tc.field)
			}
		})
	}
}

func TestNewStateRejectsBadOrder(t *testing.T) {
	cases := []struct {
		name string
		ids  []uint64
	}{
		{"unsorted", []uint64{3, 2}},
		{"duplicate", []uint64{2, 2}},
		{"route id 0", []uint64{0, 1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tr := make([]Tracked, len(tc.ids))
			for i, id := range tc.ids {
				tr[i].RouteID = id
			}
			if _, err := NewState(tr, 0); !errors.Is(err, ErrInvalidState) {
				t.Fatalf("NewState(%v) = %v, want ErrInvalidState", tc.ids, err)
			}
		})
	}
}

func TestNewStateCopiesItsInput(t *testing.T) {
	in := []Tracked{{RouteID: 4, RecentScores: []uint64{1, 2}, Explanation: Explanation{HotKey: []byte("k"), SplitKeys: keys("k", "k\x00")}}}
	s, err := NewState(in, 77)
	if err != nil {
		t.Fatal(err)
	}
	before := dump(s, nil)
	in[0].RouteID = 5
	in[0].RecentScores[0] = 99
	in[0].Explanation.HotKey[0] = 'z'
	in[0].Explanation.SplitKeys[1][0] = 'z'
	if after := dump(s, nil); after != before {
		t.Fatalf("changing NewState's input changed the state:\n%s\n%s", before, after)
	}
	if s.LastColumnAtMs() != 77 || s.Len() != 1 {
		t.Fatalf("LastColumnAtMs %d, Len %d", s.LastColumnAtMs(), s.Len())
	}
}

func TestNilStateIsEmpty(t *testing.T) {
	var s *State
	if s.Len() != 0 || s.LastColumnAtMs() != 0 || s.Tracked() != nil {
		t.Fatal("nil state not empty")
	}
	if _, ok := s.Get(1); ok {
		t.Fatal("nil state has an entry")
	}
	cfg := DefaultConfig()
	if got := s.OnSplit(cfg, 1, []uint64{2, 3}, 0, t0); got.Len() != 2 {
		t.Fatalf("OnSplit on nil state: %d entries", got.Len())
	}
	if got := s.StartCooldown(cfg, 2, t0); got.Len() != 1 {
		t.Fatalf("StartCooldown on nil state: %d entries", got.Len())
	}
	if got := s.ResetHysteresis(); got == nil || got.Len() != 0 {
		t.Fatal("ResetHysteresis on nil state")
	}
	got, plans := Observe(enabledInput(newCatalog(t, "m"), cfg), nil, column(hot(1)))
	if got.Len() != 1 || len(plans) != 0 || got.LastColumnAtMs() != t0+minute {
		t.Fatalf("Observe on nil state: %s", dump(got, plans))
	}
}

func TestOnSplit(t *testing.T) {
	cfg := DefaultConfig()
	old := mustState(t,
		Tracked{RouteID: 3, ConsecutiveOver: 4},
		Tracked{RouteID: 8, CooldownUntilMs: t0 + 100*minute},
		Tracked{RouteID: 9, ConsecutiveOver: 1},
	)
	before := dump(old, nil)

	t.Run("parent dropped, children cool down", func(t *testing.T) {
		s := old.OnSplit(cfg, 3, []uint64{10, 11}, 0, t0)
		if _, ok := s.Get(3); ok {
			t.Error("parent still tracked")
		}
		for _, id := range []uint64{10, 11} {
			if tr, ok := s.Get(id); !ok || tr.CooldownUntilMs != t0+cfg.CooldownMs || tr.ConsecutiveOver != 0 {
				t.Errorf("child %d: %+v, %v", id, tr, ok)
			}
		}
		assertSorted(t, s)
	})
	t.Run("the consumed middle child gets no cooldown", func(t *testing.T) {
		s := old.OnSplit(cfg, 3, []uint64{10, 11}, 11, t0)
		if _, ok := s.Get(11); ok {
			t.Error("consumed child tracked")
		}
		if tr, _ := s.Get(10); tr.CooldownUntilMs != t0+cfg.CooldownMs {
			t.Errorf("left child cooldown %d", tr.CooldownUntilMs)
		}
	})
	t.Run("a cooldown is never shortened", func(t *testing.T) {
		s := old.OnSplit(cfg, 3, []uint64{8, 12}, 0, t0)
		if tr, _ := s.Get(8); tr.CooldownUntilMs != t0+100*minute {
			t.Errorf("cooldown shortened to %d", tr.CooldownUntilMs)
		}
	})
	t.Run("zero cooldown adds no entries", func(t *testing.T) {
		s := old.OnSplit(Config{}, 3, []uint64{10, 11}, 0, t0)
		if s.Len() != 2 {
			t.Errorf("%d entries, want 2", s.Len())
		}
	})
	t.Run("untracked parent", func(t *testing.T) {
		s := old.OnSplit(cfg, 42, []uint64{43, 44}, 0, t0)
		if s.Len() != 5 {
			t.Errorf("%d entries, want 5", s.Len())
		}
		assertSorted(t, s)
	})
	if after := dump(old, nil); after != before {
		t.Fatalf("OnSplit modified its receiver:\n%s\n%s", before, after)
	}
}

func TestOnMerge(t *testing.T) {
	cfg := DefaultConfig()
	old := mustState(t,
		Tracked{RouteID: 3, ConsecutiveOver: 4, CooldownUntilMs: t0 + 100*minute, Explanation: Explanation{Reason: ReasonCooldown}},
		Tracked{RouteID: 4, ConsecutiveOver: 1},
		Tracked{RouteID: 9, ConsecutiveOver: 2},
	)
	before := dump(old, nil)

	t.Run("parents dropped, the merged route cools down", func(t *testing.T) {
		s := old.OnMerge(cfg, 3, 4, 10, t0)
		for _, id := range []uint64{3, 4} {
			if _, ok := s.Get(id); ok {
				t.Errorf("parent %d still tracked", id)
			}
		}
		tr, ok := s.Get(10)
		if !ok || tr.CooldownUntilMs != t0+cfg.CooldownMs || tr.ConsecutiveOver != 0 || tr.Explanation.Reason != ReasonUnspecified {
			t.Errorf("merged route: %+v, %v", tr, ok)
		}
		if tr, ok := s.Get(9); !ok || tr.ConsecutiveOver != 2 {
			t.Errorf("unrelated route 9: %+v, %v", tr, ok)
		}
		if s.Len() != 2 {
			t.Errorf("%d entries, want 2", s.Len())
		}
		assertSorted(t, s)
	})
	t.Run("untracked parents", func(t *testing.T) {
		s := old.OnMerge(cfg, 20, 21, 22, t0)
		if s.Len() != 4 {
			t.Errorf("%d entries, want 4", s.Len())
		}
	})
	t.Run("zero cooldown adds no entry", func(t *testing.T) {
		s := old.OnMerge(Config{}, 3, 4, 10, t0)
		if _, ok := s.Get(10); ok || s.Len() != 1 {
			t.Errorf("merged route tracked with no cooldown; %d entries", s.Len())
		}
	})
	t.Run("the cooldown saturates", func(t *testing.T) {
		s := old.OnMerge(Config{CooldownMs: ^uint64(0)}, 3, 4, 10, 5)
		if tr, _ := s.Get(10); tr.CooldownUntilMs != ^uint64(0) {
			t.Errorf("cooldown %d", tr.CooldownUntilMs)
		}
	})
	if after := dump(old, nil); after != before {
		t.Fatalf("OnMerge modified its receiver:\n%s\n%s", before, after)
	}
	var nilState *State
	if got := nilState.OnMerge(cfg, 1, 2, 3, t0); got.Len() != 1 {
		t.Fatalf("OnMerge on nil state: %d entries", got.Len())
	}
}

func TestStartCooldownAndResetHysteresis(t *testing.T) {
	cfg := DefaultConfig()
	old := mustState(t,
		Tracked{RouteID: 3, ConsecutiveOver: 4, Explanation: Explanation{Reason: ReasonCounting}},
		Tracked{RouteID: 8, ConsecutiveOver: 2, CooldownUntilMs: t0 + 100*minute},
	)
	before := dump(old, nil)

	s := old.StartCooldown(cfg, 5, t0)
	if tr, ok := s.Get(5); !ok || tr.CooldownUntilMs != t0+cfg.CooldownMs {
		t.Errorf("StartCooldown: %+v %v", tr, ok)
	}
	if tr, _ := s.Get(3); tr.CooldownUntilMs != 0 || tr.ConsecutiveOver != 4 {
		t.Errorf("StartCooldown touched route 3: %+v", tr)
	}
	assertSorted(t, s)

	r := s.ResetHysteresis()
	for _, tr := range r.Tracked() {
		if tr.ConsecutiveOver != 0 {
			t.Errorf("route %d still counts %d", tr.RouteID, tr.ConsecutiveOver)
		}
	}
	if tr, _ := r.Get(8); tr.CooldownUntilMs != t0+100*minute {
		t.Errorf("ResetHysteresis lost a cooldown: %+v", tr)
	}
	if tr, _ := r.Get(3); tr.Explanation.Reason != ReasonCounting {
		t.Errorf("ResetHysteresis lost an explanation: %+v", tr)
	}
	if counterOf(s, 3) != 4 {
		t.Error("ResetHysteresis modified its receiver")
	}
	if after := dump(old, nil); after != before {
		t.Fatalf("transitions modified the original state:\n%s\n%s", before, after)
	}
}

func assertSorted(t *testing.T, s *State) {
	t.Helper()
	tr := s.Tracked()
	for i := 1; i < len(tr); i++ {
		if tr[i-1].RouteID >= tr[i].RouteID {
			t.Fatalf("entries out of order: %d then %d", tr[i-1].RouteID, tr[i].RouteID)
		}
	}
}

// observeSeq runs columns of 60 s back to back from t0 and returns the
// state after each.
func observeSeq(t *testing.T, in Input, s *State, rows ...[]Row) []*State {
	t.Helper()
	var out []*State
	at := s.LastColumnAtMs()
	if at == 0 {
		at = t0
	}
	for _, r := range rows {
		col := Column{WindowStartMs: at, AtMs: at + minute, Rows: r}
		in.NowMs = col.AtMs
		s, _ = Observe(in, s, col)
		out = append(out, s)
		at = col.AtMs
	}
	return out
}

func TestRepeatedReasonKeepsOneExplanation(t *testing.T) {
	cfg := DefaultConfig()
	c := newCatalog(t, "m")
	in := enabledInput(c, cfg)
	cool := mustState(t).StartCooldown(cfg, 1, t0)
	hot1 := []Row{hot(1)}
	st := observeSeq(t, in, cool, hot1, hot1, hot1, hot1, hot1)
	// Columns 3, 4 and 5 say "cooldown": one explanation, repeated.
	x := st[4].Tracked()[0].Explanation
	if x.Reason != ReasonCooldown || x.FirstAtMs != t0+3*minute || x.AtMs != t0+5*minute || x.Repeats != 2 {
		t.Fatalf("after 3 cooldown columns: %+v", x)
	}
	// Counting: columns 1 and 2 form one run too.
	if x := st[1].Tracked()[0].Explanation; x.Reason != ReasonCounting || x.FirstAtMs != t0+minute || x.Repeats != 1 {
		t.Fatalf("after 2 counting columns: %+v", x)
	}
	// A new reason starts a new explanation.
	if x := st[2].Tracked()[0].Explanation; x.FirstAtMs != t0+3*minute || x.Repeats != 0 {
		t.Fatalf("first cooldown column: %+v", x)
	}
	// A gap starts a new one even for the same reason (the route counts
	// from 1 again, so it says counting).
	gapCol := Column{WindowStartMs: t0 + 6*minute, AtMs: t0 + 7*minute, Rows: hot1}
	in.NowMs = gapCol.AtMs
	s, _ := Observe(in, st[4], gapCol)
	if x := s.Tracked()[0].Explanation; x.Reason != ReasonCounting || x.FirstAtMs != gapCol.AtMs || x.Repeats != 0 {
		t.Fatalf("after a gap: %+v", x)
	}
	// A cold column says nothing new: the last explanation stays as it was.
	s2 := observeSeq(t, in, st[4], []Row{cold(1)})[0]
	if got, want := s2.Tracked()[0].Explanation, st[4].Tracked()[0].Explanation; !reflect.DeepEqual(got, want) {
		t.Fatalf("cold column changed the explanation:\n%+v\n%+v", got, want)
	}
}

func TestRecentScores(t *testing.T) {
	cfg := DefaultConfig()
	cfg.SmoothingWindows = 3
	in := enabledInput(newCatalog(t, "m"), cfg)
	rows := func(writes uint64) []Row { return []Row{writesRow(1, writes)} }
	st := observeSeq(t, in, nil, rows(15_000), rows(16_000), []Row{}, rows(17_000), rows(18_000))
	want := [][]uint64{{60_000}, {60_000, 64_000}, {60_000, 64_000, 0}, {64_000, 0, 68_000}, {0, 68_000, 72_000}}
	for i, s := range st {
		tr, _ := s.Get(1)
		if !reflect.DeepEqual(tr.RecentScores, want[i]) {
			t.Errorf("column %d: recent scores %v, want %v", i+1, tr.RecentScores, want[i])
		}
		if tr.LastScore != want[i][len(want[i])-1] {
			t.Errorf("column %d: last score %d", i+1, tr.LastScore)
		}
	}
	// A gap forgets the old scores along with the counter.
	gapCol := Column{WindowStartMs: t0 + 6*minute, AtMs: t0 + 7*minute, Rows: rows(15_000)}
	s, _ := Observe(in, st[4], gapCol)
	if tr, _ := s.Get(1); !reflect.DeepEqual(tr.RecentScores, []uint64{60_000}) {
		t.Errorf("after a gap: %v", tr.RecentScores)
	}
}

// TestSparseState: entries exist only while they carry something, and cold
// rows never create one.
func TestSparseState(t *testing.T) {
	cfg := DefaultConfig()
	cfg.CooldownMs = 5 * minute
	in := enabledInput(newCatalog(t, "c", "f", "m"), cfg)

	// Cold rows (the column's display rows below the threshold) and routes
	// absent from the column: no entries.
	s := observeSeq(t, in, nil, []Row{cold(1), cold(2), cold(3)})[0]
	if s.Len() != 0 {
		t.Fatalf("cold rows created entries: %+v", s.Tracked())
	}

	// A route hot once is tracked while its explanation is recent:
	// max(cooldown 5 min, 10 columns of 1 min) = 10 minutes.
	cols := [][]Row{{hot(1)}}
	for range 10 {
		cols = append(cols, []Row{cold(1)})
	}
	st := observeSeq(t, in, nil, cols...)
	for i := range 10 {
		if _, ok := st[i].Get(1); !ok {
			t.Fatalf("column %d: entry dropped while its explanation is %d min old", i+1, i)
		}
	}
	if _, ok := st[10].Get(1); ok {
		t.Fatalf("entry kept with a 10 min old explanation: %+v", st[9].Tracked())
	}

	// A cooldown keeps an entry exactly until it is over.
	cool := mustState(t).StartCooldown(cfg, 2, t0)
	cst := observeSeq(t, in, cool, nil, nil, nil, nil, nil)
	if _, ok := cst[3].Get(2); !ok {
		t.Fatal("entry dropped during its cooldown")
	}
	if _, ok := cst[4].Get(2); ok {
		t.Fatal("entry kept after its cooldown with nothing to say")
	}

	// A cooldown longer than 10 columns keeps explanations for its length.
	cfg.CooldownMs = 15 * minute
	in.Config = cfg
	cols = cols[:1]
	for range 15 {
		cols = append(cols, []Row{cold(1)})
	}
	st = observeSeq(t, in, nil, cols...)
	if _, ok := st[14].Get(1); !ok {
		t.Fatal("entry dropped before the cooldown-long retention")
	}
	if _, ok := st[15].Get(1); ok {
		t.Fatal("entry kept after the cooldown-long retention")
	}
}

func TestInvalidOrStaleColumnChangesNothing(t *testing.T) {
	cfg := DefaultConfig()
	in := enabledInput(newCatalog(t, "m"), cfg)
	s := observeSeq(t, in, nil, []Row{hot(1)}, []Row{hot(1)})[1]
	last := s.LastColumnAtMs()
	cases := []struct {
		name  string
		col   Column
		field string // in Validate's error; "" = valid but stale
	}{
		{"empty duration", Column{WindowStartMs: last, AtMs: last, Rows: []Row{hot(1)}}, "at_ms"},
		{"negative duration", Column{WindowStartMs: last + 5, AtMs: last + 1, Rows: []Row{hot(1)}}, "at_ms"},
		{"duplicate route rows", Column{WindowStartMs: last, AtMs: last + minute, Rows: []Row{hot(1), hot(2), hot(1)}}, "duplicate route_id 1"},
		{"ends at the last column", Column{WindowStartMs: last - minute, AtMs: last, Rows: []Row{hot(1)}}, ""},
		{"ends before the last column", Column{WindowStartMs: last - 2*minute, AtMs: last - minute, Rows: []Row{hot(1)}}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.col.Validate()
			switch {
			case tc.field == "" && err != nil:
				t.Fatalf("Validate: %v", err)
			case tc.field != "" && (!errors.Is(err, ErrInvalidColumn) || !strings.Contains(err.Error(), tc.field)):
				t.Fatalf("Validate = %v, want ErrInvalidColumn naming %q", err, tc.field)
			}
			got, plans := Observe(in, s, tc.col)
			if got != s || plans != nil {
				t.Fatalf("column applied: %s", dump(got, plans))
			}
		})
	}
}

// TestObserveModifiesNoInput: Observe leaves its state, column rows,
// evidence slices and live ops as they were.
func TestObserveModifiesNoInput(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxSplitsPerCycle = 3
	c := newCatalog(t, "b", "d", "f", "h")
	rows := []Row{
		isoRow(2, 30_000, "b"),
		// H with spare capacity: appending 0x00 in place would write here.
		{RouteID: 3, Writes: 20_000, TopKeys: []KeyEstimate{{Key: []byte("dx\xff")[:2], Lower: 79_000, Upper: 80_000}}},
		medRow(4, 15_000),
		isoRow(5, 16_000, "h"),
	}
	col := Column{WindowStartMs: t0, AtMs: t0 + minute, Rows: rows}
	in := enabledInput(c, cfg)
	in.LiveOps = []LiveOp{{OpID: 1, RouteIDs: []uint64{5, 1}, RemainingDelta: 1}}
	s := eligibleState(t, cfg, 2, 3, 4, 5)
	wantCol, wantState, wantOps := deepDump(col), dump(s, nil), deepDump(in.LiveOps)
	next, plans := Observe(in, s, col)
	if len(plans) != 3 {
		t.Fatalf("%d plans", len(plans))
	}
	if got := deepDump(col); got != wantCol {
		t.Fatalf("column modified:\n%s\n%s", wantCol, got)
	}
	if got := dump(s, nil); got != wantState {
		t.Fatalf("state modified:\n%s\n%s", wantState, got)
	}
	if got := deepDump(in.LiveOps); got != wantOps {
		t.Fatalf("live ops modified")
	}
	if rows[1].TopKeys[0].Key[:3][2] != 0xff {
		t.Fatal("hot key's spare capacity overwritten")
	}
	// And the new state does not alias the column: changing the column
	// afterwards leaves it alone.
	after := dump(next, plans)
	rows[1].TopKeys[0].Key[0] = 'z'
	if dump(next, plans) != after {
		t.Fatal("new state aliases the column's key bytes")
	}
}

func deepDump(v any) string { return fmt.Sprintf("%+v", v) }

// TestNilCatalogKnowsNoRoute: without a catalog no route exists, so every
// entry goes and nothing is planned.
func TestNilCatalogKnowsNoRoute(t *testing.T) {
	cfg := DefaultConfig()
	s := eligibleState(t, cfg, 1, 2)
	got, plans := Observe(Input{Config: cfg, Enabled: true}, s, column(hot(1), hot(2)))
	if got.Len() != 0 || plans != nil {
		t.Fatalf("nil catalog: %s", dump(got, plans))
	}
}
