package checker

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/hotsplit/hotsplit/jepsen/history"
)

// maxReported bounds how many findings of one kind are listed.
const maxReported = 10

// checkMonotonicVersions: once an operation has returned version v (a read
// of the catalog or of one route, or a split or merge that made v), no
// operation invoked later returns a lower version. Porcupine implies it; this check names the two
// operations.
func checkMonotonicVersions(ops []history.Op) []error {
	var vs []history.Op
	for _, op := range ops {
		versioned := op.Kind == history.ListRoutes || op.Kind == history.Split || op.Kind == history.Merge || (op.Kind == history.GetRoute && !op.Gone)
		if op.Status == history.OK && versioned {
			vs = append(vs, op)
		}
	}
	byReturn := slices.Clone(vs)
	slices.SortFunc(byReturn, func(a, b history.Op) int { return cmp.Compare(a.Return, b.Return) })
	slices.SortFunc(vs, func(a, b history.Op) int { return cmp.Compare(a.Call, b.Call) })
	var errs []error
	var best history.Op // highest version among ops returned so far
	j := 0
	for _, op := range vs {
		for ; j < len(byReturn) && byReturn[j].Return < op.Call; j++ {
			if byReturn[j].Version > best.Version {
				best = byReturn[j]
			}
		}
		if op.Version < best.Version {
			errs = append(errs, fmt.Errorf("op %d (%s by client %d, served by %s) returned version %d, but op %d (%s by client %d) had returned version %d %.3f ms before it was invoked",
				op.ID, op.Kind, op.Client, op.ServedBy, op.Version, best.ID, best.Kind, best.Client, best.Version, float64(op.Call-best.Return)/1e6))
			if len(errs) == maxReported {
				break
			}
		}
	}
	return errs
}

// checkTimestamps: GetTimestamp batches strictly increase in real time (a
// batch returned before another was requested is entirely below it), and
// no two batches overlap at all.
func checkTimestamps(ops []history.Op) []error {
	var ts []history.Op
	for _, op := range ops {
		if op.Kind == history.GetTimestamp && op.Status == history.OK {
			ts = append(ts, op)
		}
	}
	last := func(op history.Op) uint64 { return op.First + uint64(op.Count) - 1 }
	var errs []error
	byFirst := slices.Clone(ts)
	slices.SortFunc(byFirst, func(a, b history.Op) int { return cmp.Compare(a.First, b.First) })
	for i := 1; i < len(byFirst) && len(errs) < maxReported; i++ {
		a, b := byFirst[i-1], byFirst[i]
		if last(a) >= b.First {
			errs = append(errs, fmt.Errorf("timestamp batches overlap: op %d got [%d, %d], op %d got [%d, %d]", a.ID, a.First, last(a), b.ID, b.First, last(b)))
		}
	}
	byReturn := slices.Clone(ts)
	slices.SortFunc(byReturn, func(a, b history.Op) int { return cmp.Compare(a.Return, b.Return) })
	slices.SortFunc(ts, func(a, b history.Op) int { return cmp.Compare(a.Call, b.Call) })
	var best history.Op
	seen := false
	j := 0
	for _, op := range ts {
		for ; j < len(byReturn) && byReturn[j].Return < op.Call; j++ {
			if !seen || last(byReturn[j]) > last(best) {
				best, seen = byReturn[j], true
			}
		}
		if seen && op.First <= last(best) {
			errs = append(errs, fmt.Errorf("op %d got timestamps from %d, not above %d returned by op %d %.3f ms before it was requested",
				op.ID, op.First, last(best), best.ID, float64(op.Call-best.Return)/1e6))
			if len(errs) >= 2*maxReported {
				break
			}
		}
	}
	return errs
}
