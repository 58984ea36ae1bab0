package fsm

import (
	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/detector"
)

// TrackedProto converts one detector tracked entry to its API form, for the
// status and explain answers of the transport. The pooled evidence (up to
// detector.MaxPooledKeys keys) is the detector's working data, not an
// answer: it is left out.
func TrackedProto(t detector.Tracked) *api.TrackedRoute {
	t.Pool = nil
	return trackedToProto([]detector.Tracked{t})[0]
}
