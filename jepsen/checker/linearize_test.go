package checker

import (
	"testing"

	"github.com/anishathalye/porcupine"
	"pgregory.net/rapid"

	"github.com/hotsplit/hotsplit/jepsen/model"
)

// counterModel is a register that only moves forward by one: states never
// repeat, like the catalog's versions.
var counterModel = porcupine.Model{
	Init: func() interface{} { return 0 },
	Step: func(state, input, output interface{}) (bool, interface{}) {
		s := state.(int)
		if input.(bool) { // increment from s
			return true, s + 1
		}
		return output.(int) == s, s
	},
}

// Keeping only the extreme reads of each state never changes porcupine's
// verdict on histories whose states do not repeat — linearizable or not.
func TestExtremeReadsKeepTheVerdict(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(0, 5).Draw(t, "writes")
		// True change times 10, 20, ...; each write's window contains its time.
		var ops []porcupine.Operation
		for i := 1; i <= n; i++ {
			at := int64(10 * i)
			ops = append(ops, porcupine.Operation{ClientId: i, Call: at - rapid.Int64Range(0, 12).Draw(t, "wc"), Return: at + rapid.Int64Range(1, 12).Draw(t, "wr"), Input: true, Output: 0})
		}
		byValue := map[int][]porcupine.Operation{}
		reads := rapid.IntRange(1, 12).Draw(t, "reads")
		for i := 0; i < reads; i++ {
			call := rapid.Int64Range(0, int64(10*n+15)).Draw(t, "rc")
			ret := call + rapid.Int64Range(1, 15).Draw(t, "rl")
			v := int((call + ret) / 2 / 10) // mostly right...
			if rapid.IntRange(0, 4).Draw(t, "wrong") == 0 {
				v = rapid.IntRange(0, n).Draw(t, "v") // ...sometimes anything
			}
			v = min(v, n)
			op := porcupine.Operation{ClientId: 100 + i, Call: call, Return: ret, Input: false, Output: v}
			ops = append(ops, op)
			byValue[v] = append(byValue[v], op)
		}
		reduced := ops[:n:n]
		for v := 0; v <= n; v++ {
			if rs := byValue[v]; len(rs) > 0 {
				reduced = append(reduced, extremeReads(rs)...)
			}
		}
		full := porcupine.CheckOperations(counterModel, ops)
		less := porcupine.CheckOperations(counterModel, reduced)
		if full != less {
			t.Fatalf("verdict changed: full %v, reduced %v\nops %v\nreduced %v", full, less, ops, reduced)
		}
	})
}

// A merge the FSM refused fits a catalog only where the FSM would have
// refused it for that reason.
func TestMergeRefusalFits(t *testing.T) {
	c, _ := model.Initial([][]byte{[]byte("f"), []byte("m")}, 1) // v1: r1, r2, r3
	v := func(x uint64) *uint64 { return &x }
	for _, tc := range []struct {
		name        string
		left, right uint64
		expected    *uint64
		code        model.Code
		want        bool
	}{
		{"version mismatch at another version", 1, 2, v(7), model.VersionMismatch, true},
		{"version mismatch at that version", 1, 2, v(1), model.VersionMismatch, false},
		{"version mismatch without CAS", 1, 2, nil, model.VersionMismatch, false},
		{"not adjacent, and they are not", 1, 3, v(1), model.NotAdjacent, true},
		{"not adjacent, but they are", 1, 2, v(1), model.NotAdjacent, false},
		{"not adjacent, at another version (the CAS would have refused first)", 1, 3, v(2), model.NotAdjacent, false},
		{"unknown route", 1, 9, nil, model.RouteNotFound, true},
		{"live op, where the catalog allows the merge", 2, 3, v(1), model.RouteInLiveOp, true},
		{"live op, where the catalog refuses the merge", 1, 3, v(1), model.RouteInLiveOp, false},
		{"fence refusal: anywhere", 1, 2, v(1), model.FenceViolation, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := catInput{kind: catMergeRefused, routeID: tc.left, rightID: tc.right, expected: tc.expected, code: tc.code}
			if got := mergeRefusalFits(c, in); got != tc.want {
				t.Fatalf("fits = %v, want %v", got, tc.want)
			}
		})
	}
}
