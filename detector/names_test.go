package detector

import (
	"strings"
	"testing"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/internal/saturate"
)

// TestNamesMatchTheAPI: the numeric values and the names (as metric labels
// and log values) are the api enums', so the FSM can convert by number.
func TestNamesMatchTheAPI(t *testing.T) {
	for v, name := range api.Reason_name {
		want := strings.ToLower(strings.TrimPrefix(name, "REASON_"))
		if got := Reason(v).String(); got != want {
			t.Errorf("Reason(%d) = %q, api says %q", v, got, want)
		}
	}
	for v, name := range api.SplitOrigin_name {
		want := strings.ToLower(strings.TrimPrefix(name, "SPLIT_ORIGIN_"))
		if got := Origin(v).String(); got != want {
			t.Errorf("Origin(%d) = %q, api says %q", v, got, want)
		}
	}
	named := func(names []string) int {
		n := 0
		for _, s := range names {
			if s != "" {
				n++
			}
		}
		return n
	}
	if len(api.Reason_name) != named(reasonNames[:]) || len(api.SplitOrigin_name) != named(originNames[:]) {
		t.Errorf("%d reasons and %d origins here, %d and %d in the api",
			named(reasonNames[:]), named(originNames[:]), len(api.Reason_name), len(api.SplitOrigin_name))
	}
	if got := Reason(20).String(); got != "reason(20)" {
		t.Errorf("Reason(20), a gap between the v1 and v2 values, = %q", got)
	}
	if got := Reason(99).String(); got != "reason(99)" {
		t.Errorf("Reason(99) = %q", got)
	}
	if got := Origin(-1).String(); got != "origin(-1)" {
		t.Errorf("Origin(-1) = %q", got)
	}
}

func TestShareEdges(t *testing.T) {
	cases := []struct {
		part  uint64
		total saturate.U128
		want  uint32
	}{
		{0, saturate.U128{}, 0},
		{5, saturate.U128{}, 10_000},
		{3, saturate.Wide(3), 10_000},
		{9, saturate.Wide(3), 10_000},
		{1, saturate.Wide(3), 3333},
		{2, saturate.Wide(3), 6666},
		{^uint64(0), saturate.U128{Hi: 1}, 9999},
		{1, saturate.U128{Hi: 1}, 0},
	}
	for _, tc := range cases {
		if got := shareBP(tc.part, tc.total); got != tc.want {
			t.Errorf("shareBP(%d, %v) = %d, want %d", tc.part, tc.total, got, tc.want)
		}
	}
}
