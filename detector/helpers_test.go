package detector

import (
	"fmt"
	"strings"
	"testing"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/catalog"
)

// Test time: columns are 60 s long unless a test says otherwise and the
// first one starts at t0, so a 60 s column scores exactly writes·4 + reads
// under the default weights.
const (
	t0     = uint64(1_000_000_000)
	minute = uint64(60_000)
)

// The rule sets the tests run besides AllRules: none (the first rules,
// cluster version 1) and the balance rules that cluster version 2 turns on
// (fsm tests that mapping).
const (
	noRules      Rules = 0
	balanceRules       = RuleHoldBand | RuleBalanceSplit | RuleLowerBoundIsolation | RuleColumnExplanations
)

// Loads against the default threshold of 50000 weighted ops/min.
const (
	hotWrites  = 15_000 // 60000/min: hot
	coldWrites = 10_000 // 40000/min: below
)

// newCatalog builds a catalog from split keys given as strings; route i+1
// is [splits[i-1], splits[i]).
func newCatalog(t testing.TB, splits ...string) *catalog.Catalog {
	t.Helper()
	keys := make([][]byte, len(splits))
	for i, s := range splits {
		keys[i] = []byte(s)
	}
	c, err := catalog.New(keys, 1)
	if err != nil {
		t.Fatalf("catalog.New(%q): %v", splits, err)
	}
	return c
}

// fataler is what test helpers need of a *testing.T or a *rapid.T.
type fataler interface {
	Helper()
	Fatalf(format string, args ...any)
}

// withStates returns c with the given routes in the given states.
func withStates(t fataler, c *catalog.Catalog, states map[uint64]catalog.RouteState) *catalog.Catalog {
	t.Helper()
	if len(states) == 0 {
		return c
	}
	p := c.ToProto()
	for _, r := range p.Routes {
		if st, ok := states[r.RouteId]; ok {
			r.State = api.RouteState(st)
		}
	}
	out, err := catalog.FromProto(p)
	if err != nil {
		t.Fatalf("FromProto: %v", err)
	}
	return out
}

// nonActive marks the listed routes WRITE_FENCED.
func nonActive(ids ...uint64) map[uint64]catalog.RouteState {
	m := make(map[uint64]catalog.RouteState, len(ids))
	for _, id := range ids {
		m[id] = catalog.StateWriteFenced
	}
	return m
}

// writesRow is a row with the given writes and 16 buckets with all load in
// bucket 7, so that an eligible route has a median split key.
func writesRow(id, writes uint64) Row {
	b := make([]uint64, 16)
	b[7] = writes * 4
	return Row{RouteID: id, Writes: writes, Buckets: b}
}

func hot(id uint64) Row  { return writesRow(id, hotWrites) }
func cold(id uint64) Row { return writesRow(id, coldWrites) }

// buckets returns n buckets with the given loads at the given positions.
func buckets(n int, at map[int]uint64) []uint64 {
	b := make([]uint64, n)
	for i, v := range at {
		b[i] = v
	}
	return b
}

func keys(ks ...string) [][]byte {
	out := make([][]byte, len(ks))
	for i, k := range ks {
		out[i] = []byte(k)
	}
	return out
}

func fmtKeys(ks [][]byte) string {
	parts := make([]string, len(ks))
	for i, k := range ks {
		parts[i] = catalog.FormatKey(k)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// eligibleState is a state in which the listed routes have been hot for
// CandidateWindows-1 columns up to t0, so one more hot column starting at
// t0 makes them eligible.
func eligibleState(t testing.TB, cfg Config, ids ...uint64) *State {
	t.Helper()
	tr := make([]Tracked, len(ids))
	for i, id := range ids {
		tr[i] = Tracked{RouteID: id, ConsecutiveOver: cfg.CandidateWindows - 1}
	}
	s, err := NewState(tr, t0)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// column is a 60 s column starting at t0.
func column(rows ...Row) Column {
	return Column{WindowStartMs: t0, AtMs: t0 + minute, Rows: rows}
}

func enabledInput(c *catalog.Catalog, cfg Config) Input {
	return Input{Config: cfg, Catalog: c, NowMs: t0 + minute, Enabled: true, NextOpID: 100}
}

// dump renders a state and plans completely and canonically: two outcomes
// are identical iff their dumps are (no pointers inside).
func dump(s *State, plans []Plan) string {
	return fmt.Sprintf("%d %+v %+v", s.LastColumnAtMs(), s.Tracked(), plans)
}

func reasonOf(s *State, id uint64) Reason {
	tr, _ := s.Get(id)
	return tr.Explanation.Reason
}

func counterOf(s *State, id uint64) uint32 {
	tr, _ := s.Get(id)
	return tr.ConsecutiveOver
}

func mustState(t testing.TB, tracked ...Tracked) *State {
	t.Helper()
	s, err := NewState(tracked, 0)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
