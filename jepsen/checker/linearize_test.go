package checker

import (
	"testing"

	"github.com/anishathalye/porcupine"
	"pgregory.net/rapid"
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
