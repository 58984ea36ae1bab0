package fsm

import (
	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/detector"
)

// TrackedProto converts one detector tracked entry to its API form, for the
// status and explain answers of the transport.
func TrackedProto(t detector.Tracked) *api.TrackedRoute {
	return trackedToProto([]detector.Tracked{t})[0]
}
