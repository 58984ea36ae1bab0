package fsm

import (
	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/hlc"
)

// fence is docs/design.md#hlc-and-the-fence's one rule for every command that changes the catalog —
// a manual split, an op step, a merge: its commit HLC must move forward.
// The HLC is recorded in the catalog (split_at_hlc, merged_at_hlc) and data
// nodes order their own events against it, so a change stamped at or below
// an earlier entry's HLC — which only a deposed leader's stamp can be —
// would put the catalog's history out of clock order. The refusal is
// counted and logged with the command and its route ids (attrs); nothing
// else changes. Commands that only carry time use now = max(entry hlc,
// last hlc) instead and are never refused.
func (a *applier) fence(command string, attrs ...any) *api.CommandResult {
	if a.cmd.GetHlc() > a.prevHLC {
		return nil
	}
	a.s.fenceViolations++
	a.f.m.fenceViolation()
	args := append([]any{"command", command}, attrs...)
	a.f.log.Error("fsm: fence violation: the commit HLC of a catalog change does not move forward",
		append(args, "commit_hlc", a.cmd.GetHlc(), "last_hlc", a.prevHLC, "reason", "commit_hlc_not_after_last_hlc")...)
	return fail(api.ResultCode_RESULT_CODE_FENCE_VIOLATION, "commit hlc %s not after last applied hlc %s",
		hlc.Format(a.cmd.GetHlc()), hlc.Format(a.prevHLC))
}
