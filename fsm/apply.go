package fsm

import (
	"bytes"
	"fmt"

	"github.com/hashicorp/raft"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/clusterversion"
	"github.com/hotsplit/hotsplit/hlc"
)

// Apply applies one command entry and returns a *Result (never nil).
//
// Order: decode strictly (halt on anything unknown) -> last_hlc advances ->
// a known request id returns its first answer (from cluster version 3 only
// if the request is the same one; another request is refused and applies
// nothing) -> min_version against the replicated cluster version ->
// bootstrapped -> the command's applyXxx. The result of every
// non-duplicate entry carrying a request id, failures included, is stored
// in the request table (from version 3 with the request's fingerprint and
// description).
func (f *FSM) Apply(l *raft.Log) interface{} {
	t0 := f.m.start()
	cmd, err := DecodeCommand(l.Data)
	if err != nil {
		return f.halted(l.Index, fmt.Errorf("raft index %d: %w", l.Index, err))
	}
	if !clusterversion.IsSupported(cmd.GetMinVersion()) {
		return f.halted(l.Index, fmt.Errorf("raft index %d: %w: entry needs cluster version %d, this build supports %d",
			l.Index, ErrVersion, cmd.GetMinVersion(), clusterversion.Supported))
	}
	cur := f.State()
	ns := *cur
	ns.index = l.Index
	ns.lastHLC = max(cur.lastHLC, cmd.GetHlc())
	a := &applier{f: f, s: &ns, cmd: cmd, prevHLC: cur.lastHLC, nowHLC: ns.lastHLC, now: hlc.Physical(ns.lastHLC)}
	kind := commandKind(cmd)

	res := &Result{Index: l.Index}
	rid := cmd.GetRequestId()
	if prev, ok := lookupRequest(cur, rid); ok {
		if cur.Has(clusterversion.RequestFingerprints) && len(prev.GetFingerprint()) > 0 && !bytes.Equal(prev.GetFingerprint(), requestFingerprint(cmd)) {
			res.CommandResult = reusedRequest(rid, prev, cmd)
		} else {
			res.CommandResult, res.Duplicate = prev.GetResult(), true
		}
	} else {
		res.CommandResult = a.dispatch()
		if a.haltErr != nil {
			return f.halted(l.Index, fmt.Errorf("raft index %d: %w", l.Index, a.haltErr))
		}
		if rid != "" {
			rec := &api.RequestRecord{RequestId: rid, Seq: ns.nextRequestSeq, Result: res.CommandResult}
			if ns.Has(clusterversion.RequestFingerprints) {
				rec.Fingerprint, rec.Description = requestFingerprint(cmd), describeRequest(cmd)
			}
			ns.requests = ns.requests.with(rec, f.requestTableSize)
			ns.nextRequestSeq++
		}
	}
	f.seams.perturb(&ns)
	if a.checkState && f.onCheckState != nil {
		// Before publishing: a StateHash answer that sees this index
		// applied must also find the capture.
		f.onCheckState(l.Index, &ns)
	}
	f.publish(&ns)
	f.m.applied(kind, t0)
	return res
}

func lookupRequest(s *State, rid string) (*api.RequestRecord, bool) {
	if rid == "" {
		return nil, false
	}
	return s.requests.get(rid)
}

// halted stops the process (or, in tests, reports) and returns a result
// without publishing anything: not even the applied index moves.
func (f *FSM) halted(index uint64, err error) *Result {
	f.halt(err)
	return &Result{Index: index, CommandResult: &api.CommandResult{
		Code: api.ResultCode_RESULT_CODE_INVALID_ARGUMENT, Message: "halted: " + err.Error()}}
}

// applier carries one entry through its applyXxx function. s is the next
// State under construction (a shallow copy of the current one): handlers
// replace its fields, never modify what they point to, and write nothing
// before they have decided to succeed (or to make a documented change).
type applier struct {
	f   *FSM
	s   *State
	cmd *api.Command
	// prevHLC is last_hlc before this entry (the fence); nowHLC is
	// max(entry hlc, prevHLC) and now its physical part in ms.
	prevHLC, nowHLC, now uint64
	// haltErr, when set by a handler, halts instead of publishing.
	haltErr error
	// checkState is set by applyCheckState: the published state is handed
	// to Options.OnCheckState.
	checkState bool
}

func (a *applier) dispatch() *api.CommandResult {
	if a.s.bootstrapped && !clusterversion.Reaches(a.s.clusterVersion, a.cmd.GetMinVersion()) {
		return fail(api.ResultCode_RESULT_CODE_INVALID_ARGUMENT, "min_version %d above cluster version %d: the leader proposed a command the cluster has not enabled",
			a.cmd.GetMinVersion(), a.s.clusterVersion)
	}
	if b, ok := a.cmd.GetBody().(*api.Command_Bootstrap); ok {
		return a.applyBootstrap(b.Bootstrap)
	}
	if !a.s.bootstrapped {
		return fail(api.ResultCode_RESULT_CODE_NOT_BOOTSTRAPPED, "cluster not bootstrapped")
	}
	switch b := a.cmd.GetBody().(type) {
	case *api.Command_AdvanceCeiling:
		return a.applyAdvanceCeiling(b.AdvanceCeiling)
	case *api.Command_SetMember:
		return a.applySetMember(b.SetMember)
	case *api.Command_RemoveMember:
		return a.applyRemoveMember(b.RemoveMember)
	case *api.Command_SplitRange:
		return a.applySplitRange(b.SplitRange)
	case *api.Command_ObserveColumn:
		return a.applyObserveColumn(b.ObserveColumn)
	case *api.Command_SetAutoSplit:
		return a.applySetAutoSplit(b.SetAutoSplit)
	case *api.Command_SetConfig:
		return a.applySetConfig(b.SetConfig)
	case *api.Command_AbortOp:
		return a.applyAbortOp(b.AbortOp)
	case *api.Command_AdmitMember:
		return a.applyAdmitMember(b.AdmitMember)
	case *api.Command_CheckState:
		return a.applyCheckState(b.CheckState)
	case *api.Command_MergeRange:
		return a.applyMergeRange(b.MergeRange)
	case *api.Command_AddGroup:
		return a.applyAddGroup(b.AddGroup)
	case *api.Command_SetGroup:
		return a.applySetGroup(b.SetGroup)
	case *api.Command_RemoveGroup:
		return a.applyRemoveGroup(b.RemoveGroup)
	case *api.Command_MoveRange:
		return a.applyMoveRange(b.MoveRange)
	case *api.Command_AckMove:
		return a.applyAckMove(b.AckMove)
	}
	// DecodeCommand refused every other body already.
	a.haltErr = fmt.Errorf("%w: %T", ErrUnknownCommand, a.cmd.GetBody())
	return nil
}

func fail(code api.ResultCode, format string, args ...any) *api.CommandResult {
	return &api.CommandResult{Code: code, Message: fmt.Sprintf(format, args...)}
}

func ok() *api.CommandResult { return &api.CommandResult{} }
