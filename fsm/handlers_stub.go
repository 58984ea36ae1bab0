package fsm

import (
	"io"

	"github.com/hashicorp/raft"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
)

func notYet() *api.CommandResult {
	return fail(api.ResultCode_RESULT_CODE_INVALID_ARGUMENT, "not implemented yet")
}

func (a *applier) applyBootstrap(*api.Bootstrap) *api.CommandResult           { return notYet() }
func (a *applier) applyAdvanceCeiling(*api.AdvanceCeiling) *api.CommandResult { return notYet() }
func (a *applier) applySetMember(*api.SetMember) *api.CommandResult           { return notYet() }
func (a *applier) applyRemoveMember(*api.RemoveMember) *api.CommandResult     { return notYet() }
func (a *applier) applySplitRange(*api.SplitRange) *api.CommandResult         { return notYet() }
func (a *applier) applyObserveColumn(*api.ObserveColumn) *api.CommandResult   { return notYet() }
func (a *applier) applySetAutoSplit(*api.SetAutoSplit) *api.CommandResult     { return notYet() }
func (a *applier) applySetConfig(*api.SetConfig) *api.CommandResult           { return notYet() }
func (a *applier) applyAbortOp(*api.AbortOp) *api.CommandResult               { return notYet() }

func trackedToProto(any) []*api.TrackedRoute { return nil }

type snapshotLimits struct{}

func (f *FSM) limits() snapshotLimits { return snapshotLimits{} }

const snapshotFormatVersion = 1

type fsmSnapshot struct{ s *State }

func (*fsmSnapshot) Persist(sink raft.SnapshotSink) error { return sink.Cancel() }
func (*fsmSnapshot) Release()                             {}

func readSnapshot(io.Reader, snapshotLimits) (*State, error) {
	return nil, ErrSnapshot
}
