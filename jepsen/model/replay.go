package model

import (
	"bytes"
	"fmt"

	"github.com/hashicorp/raft"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/jepsen/raftlog"
)

// RequestTableSize is the bound of the FSM's replicated request-id table
// (fsm.DefaultRequestTableSize, restated here so that the model does not
// import the FSM): the oldest id, by apply order, is forgotten first.
const RequestTableSize = 10000

// Default detector timings (docs/design.md#the-detector) for a Bootstrap config that leaves
// them zero: the cooldown is 10 min and the op TTL follows the cooldown;
// an absent merge delay is 30 min (restated from detector, which the model
// does not import).
const (
	defaultCooldownMs   = 10 * 60 * 1000
	defaultMergeDelayMs = 30 * 60 * 1000
)

// Outcome is the model's answer to one command entry.
type Outcome struct {
	Index uint64
	Code  Code
	// Version and HLC describe an applied split or merge; Children the
	// split's two routes, Merged the merge's one.
	Version  uint64
	Children [2]Route
	Merged   Route
	HLC      uint64
	// Duplicate: the entry's request id was known, so it returned the first
	// answer and changed nothing.
	Duplicate bool
}

// SplitEvent is one applied split: it made catalog version Version.
type SplitEvent struct {
	Version   uint64
	Index     uint64
	Term      uint64
	HLC       uint64
	Parent    Route
	Children  [2]Route
	RequestID string // manual splits
	OpID      uint64 // op steps
	Step      uint32
	// Middle: an op step after the first, splitting the child its previous
	// step created (the one exemption of the cooldown rule).
	Middle     bool
	CooldownMs uint64
}

// Auto reports whether the split was an op step.
func (s SplitEvent) Auto() bool { return s.OpID != 0 }

// MergeEvent is one applied merge: it made catalog version Version.
type MergeEvent struct {
	Version     uint64
	Index       uint64
	Term        uint64
	HLC         uint64
	Left, Right Route
	Merged      Route
	RequestID   string // manual merges
	OpID        uint64 // automatic merges (one-step ops)
	// DelayMs is merge_delay_ms when the merge applied: an automatic merge
	// of a route made less than this long before is against the rules.
	DelayMs uint64
}

// Auto reports whether the merge was an op step.
func (m MergeEvent) Auto() bool { return m.OpID != 0 }

// SwitchEvent is one SetAutoSplit entry (or the Bootstrap seed).
type SwitchEvent struct {
	Index     uint64
	HLC       uint64
	Enabled   bool
	Reason    string
	Actor     string
	Source    api.SwitchSource
	RequestID string
	Applied   bool
}

// StepEntry is one op-step entry (SplitRange, or MergeRange of a merge
// op) and the model's outcome.
type StepEntry struct {
	Index   uint64
	Term    uint64
	HLC     uint64
	OpID    uint64
	Step    uint32
	RouteID uint64 // a split step's route, a merge step's left route
	Key     []byte
	// Merge: a merge step; RightRouteID is its right route.
	Merge        bool
	RightRouteID uint64
	Outcome      Outcome
	Enabled      bool // the switch when the entry applied
}

// Replay is the committed log as the model reads it.
type Replay struct {
	Committed      uint64
	BootstrapIndex uint64
	// Catalogs[i] is version InitialVersion+i.
	Catalogs []*Catalog
	Splits   []SplitEvent
	Merges   []MergeEvent
	// Requests holds the first answer per request id (by apply order).
	Requests map[string]Outcome
	// Reused lists the entries refused because their request id was bound
	// to another request.
	Reused   []Outcome
	Switches []SwitchEvent
	Steps    []StepEntry
	// FenceRejections lists the indexes of split and merge entries
	// refused because their HLC did not move forward.
	FenceRejections []uint64
	// Notes say where the model followed the leader's proposals instead of
	// knowing the plan (see the package doc).
	Notes []string
	// Config in force at the end.
	CooldownMs, OpTTLMs, MergeDelayMs uint64
}

// CatalogAt returns catalog version v.
func (r *Replay) CatalogAt(v uint64) (*Catalog, bool) {
	if v < InitialVersion || v-InitialVersion >= uint64(len(r.Catalogs)) {
		return nil, false
	}
	return r.Catalogs[v-InitialVersion], true
}

// Final is the last catalog (nil before Bootstrap).
func (r *Replay) Final() *Catalog {
	if len(r.Catalogs) == 0 {
		return nil
	}
	return r.Catalogs[len(r.Catalogs)-1]
}

// EnabledBefore reports the switch as of just before log index idx.
func (r *Replay) EnabledBefore(idx uint64) bool {
	on := false
	for _, s := range r.Switches {
		if s.Index >= idx {
			break
		}
		if s.Applied {
			on = s.Enabled
		}
	}
	return on
}

type opState int

const (
	opLive opState = iota
	opPaused
	opAborted
	opDone // a merge op after its one step (a split op's step count is the detector's)
)

// opTrack is what the model knows of one op: only what its step entries
// showed (the plan itself was made by the detector inside ObserveColumn).
type opTrack struct {
	id       uint64
	merge    bool   // a merge op (one MergeRange step)
	next     uint32 // next step, 1-based
	state    opState
	pausedAt uint64 // HLC, 0 when not paused
	// plan of step `next`, fixed by the first entry proposing it
	planRoute uint64
	planRight uint64 // a merge op's right route
	planKey   []byte
	planned   bool
	children  [2]Route // of the last applied step
	results   []Outcome
	// firstSeenAfterStale: created at an unknown time before a stale enable.
	ambiguous string
}

// pause puts op in PAUSED, keeping the time it first paused at (its TTL
// runs from there), as the FSM does for a step under a disabled switch and
// for a disable.
func (op *opTrack) pause(now uint64) {
	op.state = opPaused
	if op.pausedAt == 0 {
		op.pausedAt = now
	}
}

type replayer struct {
	r            *Replay
	bootstrapped bool
	// clusterVer is the replicated cluster version (Bootstrap's, raised by
	// member records to the lowest version every member supports); members
	// maps node id to its supported version.
	clusterVer uint32
	members    map[string]uint32
	// stepsNaming maps a route id to the op-step entries of the whole
	// committed log that name it (see liveOpOn).
	stepsNaming map[uint64][]stepRef
	cat         *Catalog
	lastHLC     uint64
	enabled     bool
	source      api.SwitchSource
	lastDisable uint64 // nowHLC of the last applied disable
	staleEnable string // description of an enable that found ops paused longer than the TTL
	ops         map[uint64]*opTrack
	aborted     map[uint64]bool // AbortOp of ops the model had not seen
	reqOrder    []string
	reqHead     int
	// config in force (Bootstrap's, patched by SetConfig)
	cooldownMs, opTTLMs, mergeDelayMs uint64
	// reqShape is the request each remembered id is bound to (see
	// requestShape), nil for an id remembered below requestBinding.
	reqShape map[string][]byte
}

// Run replays entries[0:committed] (index order, from index 1).
func Run(entries []raftlog.Entry, committed uint64) (*Replay, error) {
	if committed > uint64(len(entries)) {
		return nil, fmt.Errorf("committed index %d beyond the log's %d entries", committed, len(entries))
	}
	p := &replayer{r: &Replay{Committed: committed, Requests: map[string]Outcome{}}, ops: map[uint64]*opTrack{}, aborted: map[uint64]bool{},
		members: map[string]uint32{}, stepsNaming: stepsNaming(entries[:committed]), reqShape: map[string][]byte{}}
	for i := uint64(0); i < committed; i++ {
		e := entries[i]
		if e.Index != i+1 {
			return nil, fmt.Errorf("entry %d holds index %d: the log is not contiguous from 1", i+1, e.Index)
		}
		if e.Type != raft.LogCommand {
			continue
		}
		if err := p.apply(e); err != nil {
			return nil, fmt.Errorf("raft index %d: %w", e.Index, err)
		}
	}
	p.r.CooldownMs, p.r.OpTTLMs, p.r.MergeDelayMs = p.cooldownMs, p.opTTLMs, p.mergeDelayMs
	return p.r, nil
}

func physical(h uint64) uint64 { return h >> 16 }

// apply follows the FSM's documented order: last_hlc advances for every
// entry; a known request id returns its first answer (from cluster version
// 3, only to the same request: another one is refused and changes
// nothing); then the command.
func (p *replayer) apply(e raftlog.Entry) error {
	cmd := e.Command
	prev := p.lastHLC
	p.lastHLC = max(prev, cmd.GetHlc())
	rid := cmd.GetRequestId()
	if rid != "" {
		if first, ok := p.r.Requests[rid]; ok {
			if bound := p.reqShape[rid]; bound != nil && p.has(requestBinding) && !bytes.Equal(bound, requestShape(cmd)) {
				p.r.Reused = append(p.r.Reused, Outcome{Index: e.Index, Code: RequestIDReused})
				p.record(e, cmd, Outcome{Index: e.Index, Code: RequestIDReused})
				return nil
			}
			first.Duplicate = true
			p.record(e, cmd, first)
			return nil
		}
	}
	out, err := p.dispatch(e, cmd, prev)
	if err != nil {
		return err
	}
	out.Index = e.Index
	if rid != "" {
		p.remember(rid, out)
		if p.has(requestBinding) {
			p.reqShape[rid] = requestShape(cmd)
		}
	}
	p.record(e, cmd, out)
	return nil
}

// record notes step entries (duplicates included).
func (p *replayer) record(e raftlog.Entry, cmd *api.Command, out Outcome) {
	if s := cmd.GetSplitRange(); s != nil && s.GetOpId() != 0 {
		p.r.Steps = append(p.r.Steps, StepEntry{Index: e.Index, Term: e.Term, HLC: cmd.GetHlc(), OpID: s.GetOpId(), Step: s.GetStep(),
			RouteID: s.GetRouteId(), Key: s.GetSplitKey(), Outcome: out, Enabled: p.enabled})
	}
	if m := cmd.GetMergeRange(); m != nil && m.GetOpId() != 0 {
		p.r.Steps = append(p.r.Steps, StepEntry{Index: e.Index, Term: e.Term, HLC: cmd.GetHlc(), OpID: m.GetOpId(), Step: m.GetStep(),
			RouteID: m.GetLeftRouteId(), Merge: true, RightRouteID: m.GetRightRouteId(), Outcome: out, Enabled: p.enabled})
	}
}

func (p *replayer) remember(rid string, out Outcome) {
	p.r.Requests[rid] = out
	p.reqOrder = append(p.reqOrder, rid)
	if len(p.reqOrder)-p.reqHead > RequestTableSize {
		delete(p.r.Requests, p.reqOrder[p.reqHead])
		delete(p.reqShape, p.reqOrder[p.reqHead])
		p.reqHead++
	}
}

func (p *replayer) dispatch(e raftlog.Entry, cmd *api.Command, prevHLC uint64) (Outcome, error) {
	if b := cmd.GetBootstrap(); b != nil {
		return p.bootstrap(e, cmd, b)
	}
	if !p.bootstrapped {
		return Outcome{Code: NotBootstrapped}, nil
	}
	if !reaches(p.clusterVer, cmd.GetMinVersion()) {
		// The leader proposed a command the cluster has not enabled.
		return Outcome{Code: InvalidArgument}, nil
	}
	now := p.lastHLC
	switch b := cmd.GetBody().(type) {
	case *api.Command_MergeRange:
		return p.mergeRange(e, cmd, b.MergeRange, prevHLC, now)
	case *api.Command_SetMember:
		return p.setMember(b.SetMember), nil
	case *api.Command_RemoveMember:
		return p.removeMember(b.RemoveMember), nil
	case *api.Command_SplitRange:
		if b.SplitRange.GetOpId() == 0 {
			return p.manualSplit(e, cmd, b.SplitRange, prevHLC), nil
		}
		return p.opStep(e, cmd, b.SplitRange, prevHLC, now)
	case *api.Command_SetAutoSplit:
		return p.setAutoSplit(e, cmd, b.SetAutoSplit, now)
	case *api.Command_SetConfig:
		p.setConfig(b.SetConfig)
		return Outcome{Code: OK}, nil
	case *api.Command_AbortOp:
		return p.abortOp(b.AbortOp), nil
	}
	// AdvanceCeiling, AdmitMember, CheckState, ObserveColumn: no catalog
	// or switch effect. (ObserveColumn may plan ops; the model learns of
	// them from their step entries.)
	return Outcome{Code: OK}, nil
}

func (p *replayer) bootstrap(e raftlog.Entry, cmd *api.Command, b *api.Bootstrap) (Outcome, error) {
	if p.bootstrapped {
		return Outcome{Code: AlreadyBootstrapped}, nil
	}
	if b.GetClusterId() == "" {
		return Outcome{Code: InvalidArgument}, nil
	}
	cat, err := Initial(b.GetInitialSplits(), b.GetGroupId())
	if err != nil {
		return Outcome{Code: InvalidArgument}, nil
	}
	p.bootstrapped = true
	p.clusterVer = max(1, b.GetClusterVersion())
	if p.has(operatorBoundaries) {
		// The initial split keys are the operator's.
		cat, _ = cat.MarkAllStarts()
	}
	p.cat = cat
	p.r.BootstrapIndex = e.Index
	p.r.Catalogs = append(p.r.Catalogs, cat)
	p.cooldownMs = b.GetConfig().GetCooldownMs()
	if p.cooldownMs == 0 {
		p.cooldownMs = defaultCooldownMs
	}
	p.opTTLMs = b.GetConfig().GetOpTtlMs()
	if p.opTTLMs == 0 {
		p.opTTLMs = p.cooldownMs
	}
	p.mergeDelayMs = defaultMergeDelayMs
	if c := b.GetConfig(); c != nil && c.MergeDelayMs != nil {
		p.mergeDelayMs = c.GetMergeDelayMs()
	}
	p.enabled = b.GetAutoSplit()
	p.source = api.SwitchSource_SWITCH_SOURCE_BOOTSTRAP_FLAG
	p.r.Switches = append(p.r.Switches, SwitchEvent{Index: e.Index, HLC: p.lastHLC, Enabled: p.enabled, Actor: "bootstrap",
		Source: p.source, Applied: true})
	return Outcome{Code: OK, Version: cat.Version}, nil
}

// fence: a split whose HLC does not move past the last applied HLC is
// refused (docs/design.md#hlc-and-the-fence).
func (p *replayer) fence(e raftlog.Entry, cmd *api.Command, prevHLC uint64) bool {
	if cmd.GetHlc() > prevHLC {
		return true
	}
	p.r.FenceRejections = append(p.r.FenceRejections, e.Index)
	return false
}

func (p *replayer) manualSplit(e raftlog.Entry, cmd *api.Command, s *api.SplitRange, prevHLC uint64) Outcome {
	if s.GetStep() != 0 {
		return Outcome{Code: InvalidArgument}
	}
	if !p.fence(e, cmd, prevHLC) {
		return Outcome{Code: FenceViolation}
	}
	if s.ExpectedVersion != nil && s.GetExpectedVersion() != p.cat.Version {
		return Outcome{Code: VersionMismatch}
	}
	return p.split(e, cmd, s.GetRouteId(), s.GetSplitKey(), true, func(ev *SplitEvent) { ev.RequestID = cmd.GetRequestId() })
}

// split applies a split to the current catalog and records it; byOperator:
// a manual split, whose key an operator placed.
func (p *replayer) split(e raftlog.Entry, cmd *api.Command, routeID uint64, key []byte, byOperator bool, fill func(*SplitEvent)) Outcome {
	parent, _ := p.cat.Route(routeID)
	next, children, code := p.cat.Split(routeID, key, cmd.GetHlc(), byOperator)
	if code != OK {
		return Outcome{Code: code}
	}
	p.cat = next
	p.r.Catalogs = append(p.r.Catalogs, next)
	ev := SplitEvent{Version: next.Version, Index: e.Index, Term: e.Term, HLC: cmd.GetHlc(), Parent: parent, Children: children, CooldownMs: p.cooldownMs}
	fill(&ev)
	p.r.Splits = append(p.r.Splits, ev)
	return Outcome{Code: OK, Version: next.Version, Children: children, HLC: cmd.GetHlc()}
}

// opStep follows docs/design.md#ops-the-scheduler-and-the-switch in the FSM's
// documented order: duplicate, step from the future, finished op, plan
// mismatch, switch off (pause), fence, target gone or reshaped (abort), split.
func (p *replayer) opStep(e raftlog.Entry, cmd *api.Command, s *api.SplitRange, prevHLC, now uint64) (Outcome, error) {
	op, err := p.opOf(s.GetOpId(), false, now)
	if err != nil {
		return Outcome{}, err
	}
	if op.merge {
		return Outcome{Code: InvalidArgument}, nil
	}
	step := s.GetStep()
	switch {
	case step == 0:
		return Outcome{Code: InvalidArgument}, nil
	case step < op.next:
		if int(step) <= len(op.results) {
			first := op.results[step-1]
			first.Duplicate = true
			return first, nil
		}
		return Outcome{Code: InvalidArgument}, nil
	case step > op.next:
		return Outcome{Code: InvalidArgument}, nil
	}
	if op.ambiguous != "" {
		return Outcome{}, fmt.Errorf("op %d first seen after %s: the model cannot tell whether it was aborted as stale "+
			"(keep the op TTL above every disable in jepsen scenarios)", op.id, op.ambiguous)
	}
	if op.state == opAborted {
		return Outcome{Code: OpAborted}, nil
	}
	if !op.planned {
		// The first entry proposing this step fixes the plan as far as the
		// model can know it; step 2 onwards must split the child of the
		// previous step that holds the key.
		if step > 1 {
			want := op.children[0]
			if op.children[1].Contains(s.GetSplitKey()) {
				want = op.children[1]
			}
			if s.GetRouteId() != want.ID {
				p.r.Notes = append(p.r.Notes, fmt.Sprintf("index %d: op %d step %d names route %d, not the child %s of step %d",
					e.Index, op.id, step, s.GetRouteId(), want, step-1))
				return Outcome{Code: InvalidArgument}, nil
			}
		}
		op.planRoute, op.planKey, op.planned = s.GetRouteId(), s.GetSplitKey(), true
	} else if s.GetRouteId() != op.planRoute || !bytes.Equal(s.GetSplitKey(), op.planKey) {
		return Outcome{Code: InvalidArgument}, nil
	}
	if !p.enabled {
		op.pause(now)
		return Outcome{Code: OpPaused}, nil
	}
	if !p.fence(e, cmd, prevHLC) {
		return Outcome{Code: FenceViolation}, nil
	}
	route, live := p.cat.Route(op.planRoute)
	if !live {
		op.state = opAborted
		return Outcome{Code: OpAborted}, nil
	}
	out := p.split(e, cmd, route.ID, op.planKey, false, func(ev *SplitEvent) {
		ev.OpID, ev.Step, ev.Middle = op.id, step, step > 1
	})
	if out.Code != OK {
		// Not ACTIVE, or the key no longer strictly inside: the op aborts.
		op.state = opAborted
		return Outcome{Code: OpAborted}, nil
	}
	op.results = append(op.results, out)
	op.children = out.Children
	op.next++
	op.planned, op.planRoute, op.planKey = false, 0, nil
	return out, nil
}

// opOf returns the op an op-step entry names, first seen now if the model
// has not met it: the first step entry of an op is where the model learns
// of it (and of its kind, split or merge).
func (p *replayer) opOf(id uint64, merge bool, now uint64) (*opTrack, error) {
	if op := p.ops[id]; op != nil {
		return op, nil
	}
	if p.aborted[id] {
		return nil, fmt.Errorf("op %d: step entry after an AbortOp the model could not place (the op had no step yet)", id)
	}
	op := &opTrack{id: id, next: 1, merge: merge}
	if !p.enabled {
		// The detector plans nothing while the switch is off, so the op
		// existed at the last disable and was paused by it.
		op.state, op.pausedAt = opPaused, p.lastDisable
		if op.pausedAt == 0 {
			op.pausedAt = now
		}
	} else if p.staleEnable != "" {
		op.ambiguous = p.staleEnable
	}
	p.ops[id] = op
	return op, nil
}

func (p *replayer) setAutoSplit(e raftlog.Entry, cmd *api.Command, c *api.SetAutoSplit, now uint64) (Outcome, error) {
	ev := SwitchEvent{Index: e.Index, HLC: now, Enabled: c.GetEnabled(), Reason: c.GetReason(), Actor: c.GetActor(),
		Source: c.GetSource(), RequestID: cmd.GetRequestId()}
	src := c.GetSource()
	switch {
	case src != api.SwitchSource_SWITCH_SOURCE_BOOTSTRAP_FLAG && src != api.SwitchSource_SWITCH_SOURCE_OPERATOR:
		p.r.Switches = append(p.r.Switches, ev)
		return Outcome{Code: InvalidArgument}, nil
	case src == api.SwitchSource_SWITCH_SOURCE_BOOTSTRAP_FLAG && p.source == api.SwitchSource_SWITCH_SOURCE_OPERATOR:
		p.r.Switches = append(p.r.Switches, ev)
		return Outcome{Code: Ignored}, nil
	}
	ev.Applied = true
	p.r.Switches = append(p.r.Switches, ev)
	p.enabled, p.source = c.GetEnabled(), src
	if !c.GetEnabled() {
		p.lastDisable = now
		for _, op := range p.ops {
			if op.state == opLive {
				op.pause(now)
			}
		}
		return Outcome{Code: OK}, nil
	}
	if p.lastDisable != 0 && physical(now)-min(physical(now), physical(p.lastDisable)) > p.opTTLMs {
		// Ops the model has not seen yet may have been paused by that
		// disable and are now stale: the model cannot place them.
		p.staleEnable = fmt.Sprintf("the enable at index %d (paused %d ms > op TTL %d ms)", e.Index,
			physical(now)-physical(p.lastDisable), p.opTTLMs)
	}
	for _, op := range p.ops {
		if op.state != opPaused {
			continue
		}
		if physical(now)-min(physical(now), physical(op.pausedAt)) > p.opTTLMs {
			op.state = opAborted
			continue
		}
		op.state, op.pausedAt = opLive, 0
	}
	return Outcome{Code: OK}, nil
}

// setConfig follows the timings the invariants need. Its validation is not
// modelled, beyond one rule: merge settings below auto_merge refuse the
// whole patch. A patch the FSM refuses for another reason would be
// followed here too: jepsen scenarios send only patches the harness saw
// applied, and every SetConfig is named in the notes.
func (p *replayer) setConfig(c *api.SetConfig) {
	p.r.Notes = append(p.r.Notes, "SetConfig in the log: its validation is not modelled")
	patch := c.GetPatch()
	if patch == nil {
		return
	}
	mergeFields := patch.MergeThresholdBp != nil || patch.MergeWindows != nil || patch.MergeDelayMs != nil ||
		patch.MaxMergesPerCycle != nil || patch.MergeMarginBp != nil
	if mergeFields && !p.has(autoMerge) {
		return
	}
	if patch.CooldownMs != nil {
		p.cooldownMs = patch.GetCooldownMs()
	}
	if patch.OpTtlMs != nil {
		p.opTTLMs = patch.GetOpTtlMs()
	}
	if patch.MergeDelayMs != nil {
		p.mergeDelayMs = patch.GetMergeDelayMs()
	}
}

func (p *replayer) abortOp(c *api.AbortOp) Outcome {
	op := p.ops[c.GetOpId()]
	if op == nil {
		p.aborted[c.GetOpId()] = true
		return Outcome{Code: OK}
	}
	if op.state == opAborted || op.state == opDone {
		return Outcome{Code: OpFinished}
	}
	op.state = opAborted
	return Outcome{Code: OK}
}
