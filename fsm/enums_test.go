package fsm

import (
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/detector"
)

// The detector mirrors api.Reason and api.SplitOrigin without importing
// the generated code; the FSM converts them by number. Every api value must
// have its detector twin with the same number, and the other way round.
func TestDetectorEnumsMatchAPI(t *testing.T) {
	reasons := map[string]detector.Reason{
		"REASON_UNSPECIFIED":         detector.ReasonUnspecified,
		"REASON_PLANNED":             detector.ReasonPlanned,
		"REASON_COUNTING":            detector.ReasonCounting,
		"REASON_COOLDOWN":            detector.ReasonCooldown,
		"REASON_NO_SPLIT_KEY":        detector.ReasonNoSplitKey,
		"REASON_ROUTE_CAP":           detector.ReasonRouteCap,
		"REASON_BUDGET_EXHAUSTED":    detector.ReasonBudgetExhausted,
		"REASON_NON_ACTIVE":          detector.ReasonNonActive,
		"REASON_IN_LIVE_OP":          detector.ReasonInLiveOp,
		"REASON_SUPPRESSED_DISABLED": detector.ReasonSuppressedDisable,
		"REASON_ABSOLUTE_FLOOR":      detector.ReasonAbsoluteFloor,
		"REASON_TOPK_DEGRADED":       detector.ReasonTopKDegraded,
		"REASON_TOPK_ERROR_BOUND":    detector.ReasonTopKErrorBound,
		"REASON_ALREADY_ISOLATED":    detector.ReasonAlreadyIsolated,
		"REASON_KEY_TOO_LONG":        detector.ReasonKeyTooLong,
		"REASON_TOPK_SHARE":          detector.ReasonTopKShare,
		"REASON_NO_TOPK":             detector.ReasonNoTopK,
		"REASON_HOLD_BAND":           detector.ReasonHoldBand,
		"REASON_BELOW_THRESHOLD":     detector.ReasonBelowThreshold,
		"REASON_MERGE_PLANNED":       detector.ReasonMergePlanned,
		"REASON_MERGE_DELAY":         detector.ReasonMergeDelay,
		"REASON_MERGE_MARGIN":        detector.ReasonMergeMargin,
		"REASON_MERGE_SUPPRESSED":    detector.ReasonMergeSuppressed,
		"REASON_MERGE_BUDGET":        detector.ReasonMergeBudget,
		"REASON_NO_EVIDENCE":         detector.ReasonNoEvidence,
		"REASON_CUT_UNCERTAIN":       detector.ReasonCutUncertain,
	}
	origins := map[string]detector.Origin{
		"SPLIT_ORIGIN_UNSPECIFIED":                 detector.OriginUnspecified,
		"SPLIT_ORIGIN_MANUAL":                      detector.OriginManual,
		"SPLIT_ORIGIN_ISOLATION_COMPOUND":          detector.OriginIsolationCompound,
		"SPLIT_ORIGIN_ISOLATION_SINGLE_LOWER_EDGE": detector.OriginIsolationSingleLowerEdge,
		"SPLIT_ORIGIN_ISOLATION_SINGLE_UPPER_EDGE": detector.OriginIsolationSingleUpperEdge,
		"SPLIT_ORIGIN_SUB_BUCKET_MEDIAN":           detector.OriginSubBucketMedian,
		"SPLIT_ORIGIN_BALANCE":                     detector.OriginBalance,
	}
	evidence := map[string]detector.Evidence{
		"SPLIT_EVIDENCE_UNSPECIFIED": detector.EvidenceUnspecified,
		"SPLIT_EVIDENCE_BUCKETS":     detector.EvidenceBuckets,
		"SPLIT_EVIDENCE_TOP_KEYS":    detector.EvidenceTopKeys,
		"SPLIT_EVIDENCE_SAMPLES":     detector.EvidenceSamples,
		"SPLIT_EVIDENCE_KEY_LOAD":    detector.EvidenceKeyLoad,
	}
	check := func(desc protoreflect.EnumDescriptor, twin func(name string) (int32, bool), n int) {
		vals := desc.Values()
		if vals.Len() != n {
			t.Errorf("%s has %d values, the detector mirrors %d", desc.Name(), vals.Len(), n)
		}
		for i := range vals.Len() {
			v := vals.Get(i)
			got, ok := twin(string(v.Name()))
			if !ok {
				t.Errorf("%s: no detector value for %s", desc.Name(), v.Name())
				continue
			}
			if got != int32(v.Number()) {
				t.Errorf("%s: detector %d, api %d", v.Name(), got, v.Number())
			}
		}
	}
	check(api.Reason(0).Descriptor(), func(n string) (int32, bool) { r, ok := reasons[n]; return int32(r), ok }, len(reasons))
	check(api.SplitOrigin(0).Descriptor(), func(n string) (int32, bool) { o, ok := origins[n]; return int32(o), ok }, len(origins))
	check(api.SplitEvidence(0).Descriptor(), func(n string) (int32, bool) { e, ok := evidence[n]; return int32(e), ok }, len(evidence))
}
