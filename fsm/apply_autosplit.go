package fsm

import (
	"fmt"
	"strings"

	"google.golang.org/protobuf/proto"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/clusterversion"
	"github.com/hotsplit/hotsplit/hlc"
)

// applySetAutoSplit flips the kill switch
// (docs/design.md#ops-the-scheduler-and-the-switch). A bootstrap flag never
// overrides an operator's choice. Disabling pauses every PENDING/RUNNING op;
// enabling resumes every PAUSED op, or aborts it as stale when it has been
// paused longer than op_ttl_ms.
func (a *applier) applySetAutoSplit(c *api.SetAutoSplit) *api.CommandResult {
	src := c.GetSource()
	if src != api.SwitchSource_SWITCH_SOURCE_BOOTSTRAP_FLAG && src != api.SwitchSource_SWITCH_SOURCE_OPERATOR {
		return fail(api.ResultCode_RESULT_CODE_INVALID_ARGUMENT, "source: %s, want BOOTSTRAP_FLAG or OPERATOR", src)
	}
	if src == api.SwitchSource_SWITCH_SOURCE_BOOTSTRAP_FLAG && a.s.sw.GetSource() == api.SwitchSource_SWITCH_SOURCE_OPERATOR {
		return &api.CommandResult{Switch: a.s.sw, Message: "switch was set by an operator; the bootstrap flag does not change it"}
	}
	sw := &api.AutoSplitSwitch{Enabled: c.GetEnabled(), Actor: c.GetActor(), Note: a.s.KeptNote(c.GetNote()), Reason: c.GetReason(), Source: src, ChangedAtHlc: a.nowHLC}
	a.s.sw = sw
	a.decide(&api.Decision{Kind: api.DecisionKind_DECISION_KIND_SWITCH, Actor: c.GetActor(), Note: sw.Note, Detail: switchDetail(sw)})
	for _, op := range a.s.LiveOps() {
		switch {
		case isMoveOp(op) && op.GetNextStep() > moveStepFence:
			// A fenced move always finishes: the switch never blocks writes.
		case !sw.Enabled && op.GetState() != api.OpState_OP_STATE_PAUSED:
			a.pauseOp(op)
		case sw.Enabled && op.GetState() == api.OpState_OP_STATE_PAUSED:
			a.resumeOp(op)
		}
	}
	a.f.log.Info("fsm: auto-split switch set", "enabled", sw.Enabled, "actor", sw.Actor, "reason", sw.Reason,
		"source", EnumName(sw.Source), "commit_hlc", a.nowHLC)
	return &api.CommandResult{Switch: sw}
}

func switchDetail(sw *api.AutoSplitSwitch) string {
	state := "disabled"
	if sw.GetEnabled() {
		state = "enabled"
	}
	if sw.GetReason() == "" {
		return state
	}
	return state + ": " + sw.GetReason()
}

// resumeOp continues a PAUSED op where it stopped, unless it was paused for
// longer than op_ttl_ms: then it is ABORTED(STALE).
func (a *applier) resumeOp(op *api.Op) {
	paused := a.now - min(a.now, hlc.Physical(op.GetPausedAtHlc()))
	// A move held too long is aborted by the leader when its move_ttl_ms
	// has passed: that abort is a catalog change, which this entry may
	// not make (it is not fenced).
	if ttl := a.s.cfg.GetOpTtlMs(); paused > ttl && !isMoveOp(op) {
		a.abortOp(op, api.OpAbortReason_OP_ABORT_REASON_STALE, fmt.Sprintf("paused for %d ms, op_ttl_ms %d", paused, ttl))
		return
	}
	n := cloneOp(op)
	n.State = api.OpState_OP_STATE_PENDING
	if n.GetNextStep() > 1 {
		n.State = api.OpState_OP_STATE_RUNNING
	}
	n.PausedAtHlc = 0
	n.UpdatedHlc = a.nowHLC
	a.putOp(n)
	a.decide(&api.Decision{Kind: api.DecisionKind_DECISION_KIND_OP_RESUMED, RouteId: n.GetTargetRouteId(), OpId: n.GetOpId(), Origin: n.GetOrigin()})
	a.f.log.Info("fsm: op resumed", "op_id", n.GetOpId(), "route_id", n.GetTargetRouteId(), "next_step", n.GetNextStep())
}

// applySetConfig patches, validates and stores the config; every
// hysteresis counter restarts (its evidence was scored under other rules).
// With ScheduledStepChange a step change is scheduled at a boundary both
// steps share (ScheduleStep) instead of applying at once, so that no
// column is lost while reporters switch.
func (a *applier) applySetConfig(c *api.SetConfig) *api.CommandResult {
	p := c.GetPatch()
	if p == nil {
		return fail(api.ResultCode_RESULT_CODE_INVALID_ARGUMENT, "patch: required")
	}
	cfg, err := PatchConfig(a.s.cfg, a.s.clusterVersion, p, a.now)
	if err != nil {
		return fail(api.ResultCode_RESULT_CODE_INVALID_ARGUMENT, "%v", err)
	}
	if a.s.Has(clusterversion.UnchangedPatchNoop) && proto.Equal(cfg, a.s.cfg) {
		// Re-sending the settings in force (a script's idempotent config
		// step) must not reset every route's hysteresis.
		a.f.log.Info("fsm: config set changed nothing", "actor", c.GetActor(), "patch", patchSummary(p), "commit_hlc", a.nowHLC)
		return &api.CommandResult{Config: a.s.cfg, Message: ConfigUnchanged}
	}
	placementOnly := onlyPlacement(p)
	if !cfg.GetCrossGroup() {
		a.s.placement = nil // streaks start afresh when placement is back on
	}
	a.s.cfg = cfg
	a.s.detCfg = detectorConfig(cfg)
	if !placementOnly {
		a.s.det = a.s.det.ResetHysteresis()
	}
	changed := patchSummary(p)
	if at := cfg.GetNextStepAtMs(); at != 0 {
		changed += fmt.Sprintf(" (step_ms %d from window %d on)", cfg.GetNextStepMs(), at)
	}
	a.decide(&api.Decision{Kind: api.DecisionKind_DECISION_KIND_CONFIG, Actor: c.GetActor(), Note: a.s.KeptNote(c.GetNote()), Detail: changed})
	a.f.log.Info("fsm: config set", "actor", c.GetActor(), "changed", changed, "commit_hlc", a.nowHLC)
	return &api.CommandResult{Config: cfg}
}

// ConfigUnchanged is the message of a SetConfig result that changed
// nothing (UnchangedPatchNoop).
const ConfigUnchanged = "unchanged: the patch leaves the config as it is"

// KeptNote is the note a mutation's self-declared actor text becomes in a
// cluster at this state's version: the text itself with ActorNotes on
// (docs/design.md#trust-and-integrity: the actor is the authenticated identity, the text a note
// beside it), nothing before — replicas of older versions refuse the
// field. The transport and Apply both use it.
func (s *State) KeptNote(n string) string {
	if !s.Has(clusterversion.ActorNotes) {
		return ""
	}
	return n
}

// patchSummary lists the set fields of p as name=value in field order.
func patchSummary(p *api.ConfigPatch) string {
	m := p.ProtoReflect()
	fields := m.Descriptor().Fields()
	var parts []string
	for i := range fields.Len() {
		fd := fields.Get(i)
		if m.Has(fd) {
			parts = append(parts, fmt.Sprintf("%s=%v", fd.Name(), m.Get(fd).Interface()))
		}
	}
	return strings.Join(parts, " ")
}

// applyAbortOp cancels a live op on an operator's request; steps already
// applied stand and a middle child gets its cooldown.
func (a *applier) applyAbortOp(c *api.AbortOp) *api.CommandResult {
	i, found := findOp(a.s.ops, c.GetOpId())
	if !found {
		return fail(api.ResultCode_RESULT_CODE_OP_NOT_FOUND, "op %d not found", c.GetOpId())
	}
	op := a.s.ops[i]
	if !isLive(op) {
		return fail(api.ResultCode_RESULT_CODE_OP_FINISHED, "op %d already %s", op.GetOpId(), op.GetState())
	}
	if c.GetMoveTtl() {
		switch {
		case !isMoveOp(op):
			return fail(api.ResultCode_RESULT_CODE_INVALID_ARGUMENT, "move_ttl: op %d is not a move", op.GetOpId())
		case op.GetState() == api.OpState_OP_STATE_PAUSED || !moveExpired(op, a.s.cfg, a.now):
			return fail(api.ResultCode_RESULT_CODE_INVALID_ARGUMENT, "move_ttl: op %d's step %d started at %s and waits until %d ms past it (move_ttl_ms)",
				op.GetOpId(), op.GetNextStep()-1, HLCTime(op.GetStepHlc()), a.s.cfg.GetMoveTtlMs())
		}
		return a.abortMove(op, api.OpAbortReason_OP_ABORT_REASON_MOVE_TTL,
			fmt.Sprintf("step %d waited %d ms (move_ttl_ms) for its acknowledgements", op.GetNextStep()-1, a.s.cfg.GetMoveTtlMs()))
	}
	n := cloneOp(op)
	n.Actor, n.Note = c.GetActor(), a.s.KeptNote(c.GetNote())
	if isMoveOp(n) {
		return a.abortMove(n, api.OpAbortReason_OP_ABORT_REASON_OPERATOR, c.GetReason())
	}
	n = a.abortOp(n, api.OpAbortReason_OP_ABORT_REASON_OPERATOR, c.GetReason())
	return &api.CommandResult{OpId: n.GetOpId(), Op: n}
}
