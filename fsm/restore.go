package fsm

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/catalog"
	"github.com/hotsplit/hotsplit/clusterversion"
	"github.com/hotsplit/hotsplit/detector"
)

// maxOpSteps is the most split keys an op can have (a compound isolation).
const maxOpSteps = 2

// snapshotLimits are the local bounds of the replicated tables; a snapshot
// holding more than them came from a replica configured differently.
type snapshotLimits struct {
	requests, decisions, finishedOps int
}

func (f *FSM) limits() snapshotLimits {
	return snapshotLimits{requests: f.requestTableSize, decisions: f.decisionRingSize, finishedOps: f.finishedOps}
}

// readSnapshot decodes and checks a snapshot written by writeSnapshot. It
// allocates in proportion to the bytes it has read, never to counts it was
// told, and checks every invariant before returning a State.
func readSnapshot(r io.Reader, lim snapshotLimits) (*State, error) {
	s, err := decodeSnapshot(bufio.NewReaderSize(r, 1<<16), lim)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrSnapshot, err)
	}
	return s, nil
}

func decodeSnapshot(br *bufio.Reader, lim snapshotLimits) (*State, error) {
	magic := make([]byte, len(snapshotMagic))
	if _, err := io.ReadFull(br, magic); err != nil {
		return nil, fmt.Errorf("magic: %w", err)
	}
	if string(magic) != snapshotMagic {
		return nil, fmt.Errorf("magic: %q is not a hotsplit FSM snapshot", magic)
	}
	var hdr [5]uint64
	for i, name := range []string{"format version", "applied index", "route count", "tracked count", "request count"} {
		v, err := binary.ReadUvarint(br)
		if err != nil {
			return nil, fmt.Errorf("header %s: %w", name, noEOF(err))
		}
		hdr[i] = v
	}
	if hdr[0] != snapshotFormatVersion {
		return nil, fmt.Errorf("format version %d, this build reads %d", hdr[0], snapshotFormatVersion)
	}
	index, nRoutes, nTracked, nRequests := hdr[1], hdr[2], hdr[3], hdr[4]
	if nRequests > uint64(lim.requests) {
		return nil, fmt.Errorf("%d request records above the local table size %d", nRequests, lim.requests)
	}
	fr := frameReader{r: br}
	core := &api.StateSnapshot{}
	if err := fr.read(core, "core"); err != nil {
		return nil, err
	}
	if core.GetCatalog().GetRoutes() != nil || core.GetTracked() != nil || core.GetRequests() != nil {
		return nil, errors.New("core frame holds paged lists")
	}
	if core.GetCatalog() == nil && nRoutes != 0 {
		return nil, fmt.Errorf("%d routes in a snapshot that is not bootstrapped", nRoutes)
	}
	// The header's count is trusted for one page only; beyond that the
	// slice grows with the pages actually read.
	routes := make([]*api.RouteDescriptor, 0, min(nRoutes, routePage))
	for uint64(len(routes)) < nRoutes {
		page := &api.CatalogSnapshot{}
		if err := fr.readRoutes(page); err != nil {
			return nil, err
		}
		if err := pageSize(len(page.GetRoutes()), routePage, nRoutes-uint64(len(routes)), "routes", page.GetVersion() != 0 || page.GetNextRouteId() != 0); err != nil {
			return nil, err
		}
		routes = append(routes, page.GetRoutes()...)
	}
	var tracked []*api.TrackedRoute
	for uint64(len(tracked)) < nTracked {
		page := &api.StateSnapshot{}
		if err := fr.read(page, "tracked"); err != nil {
			return nil, err
		}
		if err := pageSize(len(page.GetTracked()), trackedPage, nTracked-uint64(len(tracked)), "tracked", onlyField(page, "tracked")); err != nil {
			return nil, err
		}
		tracked = append(tracked, page.GetTracked()...)
	}
	var requests []*api.RequestRecord
	for uint64(len(requests)) < nRequests {
		page := &api.StateSnapshot{}
		if err := fr.read(page, "requests"); err != nil {
			return nil, err
		}
		if err := pageSize(len(page.GetRequests()), requestPage, nRequests-uint64(len(requests)), "requests", onlyField(page, "requests")); err != nil {
			return nil, err
		}
		requests = append(requests, page.GetRequests()...)
	}
	if err := readHeatPages(&fr, core); err != nil {
		return nil, err
	}
	if _, err := br.ReadByte(); err != io.EOF {
		return nil, errors.New("trailing bytes after the last frame")
	}
	if core.GetCatalog() != nil {
		core.Catalog.Routes = routes
	}
	core.Tracked = tracked
	core.Requests = requests
	s, err := stateFromProto(core, lim)
	if err != nil {
		return nil, err
	}
	s.index = index
	return s, nil
}

// pageSize checks that a page holds exactly the expected number of entries
// and nothing else.
func pageSize(got, page int, remaining uint64, what string, extra bool) error {
	want := uint64(page)
	if remaining < want {
		want = remaining
	}
	if uint64(got) != want {
		return fmt.Errorf("%s page holds %d entries, want %d", what, got, want)
	}
	if extra {
		return fmt.Errorf("%s page holds other fields", what)
	}
	return nil
}

// onlyField reports whether m has any field set besides the named one.
func onlyField(m proto.Message, name string) bool {
	other := false
	m.ProtoReflect().Range(func(fd protoreflect.FieldDescriptor, _ protoreflect.Value) bool {
		if string(fd.Name()) != name {
			other = true
		}
		return !other
	})
	return other
}

// frameReader reads length-delimited strict messages, growing its buffer
// only as bytes actually arrive.
type frameReader struct {
	r   *bufio.Reader
	buf bytes.Buffer
}

func (fr *frameReader) read(m proto.Message, what string) error {
	if err := fr.readFrame(what); err != nil {
		return err
	}
	if err := api.UnmarshalStrict(fr.buf.Bytes(), m); err != nil {
		return fmt.Errorf("%s frame: %w", what, err)
	}
	return nil
}

// readFrame reads the next frame's bytes into fr.buf.
func (fr *frameReader) readFrame(what string) error {
	n, err := binary.ReadUvarint(fr.r)
	if err != nil {
		return fmt.Errorf("%s frame length: %w", what, noEOF(err))
	}
	if n > maxFrame {
		return fmt.Errorf("%s frame of %d bytes above %d", what, n, maxFrame)
	}
	fr.buf.Reset()
	got, err := fr.buf.ReadFrom(io.LimitReader(fr.r, int64(n)))
	if err != nil {
		return fmt.Errorf("%s frame: %w", what, err)
	}
	if uint64(got) != n {
		return fmt.Errorf("%s frame: %d of %d bytes: %w", what, got, n, io.ErrUnexpectedEOF)
	}
	return nil
}

// readRoutes reads a route page. It checks unknown fields directly on the
// page and on each route instead of the reflective walk of
// api.UnmarshalStrict, which dominates restoring a large catalog; the two
// are equivalent because RouteDescriptor has no message fields
// (TestFillRouteMatchesToProto pins its field count).
func (fr *frameReader) readRoutes(page *api.CatalogSnapshot) error {
	if err := fr.readFrame("routes"); err != nil {
		return err
	}
	if err := proto.Unmarshal(fr.buf.Bytes(), page); err != nil {
		return fmt.Errorf("routes frame: %w", err)
	}
	if len(page.ProtoReflect().GetUnknown()) > 0 {
		return errors.New("routes frame: unknown fields")
	}
	for i, r := range page.GetRoutes() {
		if len(r.ProtoReflect().GetUnknown()) > 0 {
			return fmt.Errorf("routes frame: route %d: unknown fields", i)
		}
	}
	return nil
}

func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// stateFromProto rebuilds a State from its canonical form and checks every
// invariant the apply path maintains. It is the inverse of Proto.
func stateFromProto(p *api.StateSnapshot, lim snapshotLimits) (*State, error) {
	if p.GetFormatVersion() != snapshotFormatVersion {
		return nil, fmt.Errorf("state format version %d, want %d", p.GetFormatVersion(), snapshotFormatVersion)
	}
	if !clusterversion.IsSupported(p.GetClusterVersion()) {
		return nil, fmt.Errorf("%w: cluster version %d, this build supports %d", ErrVersion, p.GetClusterVersion(), clusterversion.Supported)
	}
	if p.GetNextOpId() < 1 || p.GetNextDecisionSeq() < 1 || p.GetNextRequestSeq() < 1 {
		return nil, errors.New("id counters must be >= 1")
	}
	s := &State{
		clusterID:       p.GetClusterId(),
		clusterVersion:  p.GetClusterVersion(),
		ceilingMs:       p.GetCeilingMs(),
		lastHLC:         p.GetLastHlc(),
		lastColumnAtMs:  p.GetLastColumnAtMs(),
		reporters:       p.GetLastColumnReporters(),
		nextOpID:        p.GetNextOpId(),
		nextDecisionSeq: p.GetNextDecisionSeq(),
		nextRequestSeq:  p.GetNextRequestSeq(),
		fenceViolations: p.GetFenceViolations(),
	}
	if p.GetCatalog() == nil {
		if err := checkEmpty(p); err != nil {
			return nil, err
		}
	} else if err := restoreBootstrapped(s, p); err != nil {
		return nil, err
	}
	if err := checkMembers(p.GetMembers()); err != nil {
		return nil, err
	}
	if err := checkPreviousClusterIDs(p); err != nil {
		return nil, err
	}
	if err := restoreHeat(s, p); err != nil {
		return nil, err
	}
	if err := checkGroups(p, s.cat); err != nil {
		return nil, err
	}
	s.groups, s.nextGroupID = p.GetGroups(), p.GetNextGroupId()
	if err := checkPlacement(p); err != nil {
		return nil, err
	}
	s.placement = p.GetPlacement()
	s.previousClusterIDs = p.GetPreviousClusterIds()
	s.members = p.GetMembers()
	if err := checkAdmissions(p.GetAdmissions(), s.members); err != nil {
		return nil, err
	}
	s.admissions = p.GetAdmissions()
	if err := checkOps(p.GetOps(), p.GetNextOpId(), s.cat, lim.finishedOps, p.GetClusterVersion()); err != nil {
		return nil, err
	}
	s.ops = p.GetOps()
	if err := checkDecisions(p.GetDecisions(), p.GetNextDecisionSeq(), lim.decisions); err != nil {
		return nil, err
	}
	s.decisions = p.GetDecisions()
	reqs, err := restoreRequests(p.GetRequests(), p.GetNextRequestSeq(), lim.requests, p.GetClusterVersion())
	if err != nil {
		return nil, err
	}
	s.requests = reqs
	for i, r := range s.reporters {
		if r == "" || (i > 0 && r <= s.reporters[i-1]) {
			return nil, fmt.Errorf("last_column_reporters[%d] %q empty, unsorted or repeated", i, r)
		}
	}
	return s, nil
}

// checkEmpty: a state that is not bootstrapped has only request answers,
// clocks and counters.
func checkEmpty(p *api.StateSnapshot) error {
	if p.GetClusterId() != "" || clusterversion.IsVersion(p.GetClusterVersion()) || p.GetConfig() != nil || p.GetSwitch() != nil ||
		len(p.GetMembers()) != 0 || len(p.GetTracked()) != 0 || len(p.GetOps()) != 0 || len(p.GetDecisions()) != 0 ||
		p.GetLastColumnAtMs() != 0 || len(p.GetLastColumnReporters()) != 0 || p.GetNextOpId() != 1 || p.GetNextDecisionSeq() != 1 ||
		p.GetCeilingMs() != 0 || p.GetFenceViolations() != 0 || p.GetCold() != nil || p.GetHeatHistory() != nil ||
		len(p.GetGroups()) != 0 || p.GetNextGroupId() != 0 || p.GetPlacement() != nil {
		return errors.New("state without a catalog (not bootstrapped) holds bootstrapped fields")
	}
	return nil
}

func restoreBootstrapped(s *State, p *api.StateSnapshot) error {
	if p.GetClusterId() == "" {
		return errors.New("cluster_id empty")
	}
	if !clusterversion.IsVersion(p.GetClusterVersion()) {
		return errors.New("cluster_version 0")
	}
	cat, err := catalog.FromProto(p.GetCatalog())
	if err != nil {
		return err
	}
	if err := checkCatalogFeatures(cat, p.GetClusterVersion()); err != nil {
		return err
	}
	if err := ValidateConfig(p.GetConfig()); err != nil {
		return err
	}
	if err := checkConfigFeatures(p.GetConfig(), p.GetClusterVersion()); err != nil {
		return err
	}
	sw := p.GetSwitch()
	if sw == nil {
		return errors.New("switch missing")
	}
	if src := sw.GetSource(); src != api.SwitchSource_SWITCH_SOURCE_BOOTSTRAP_FLAG && src != api.SwitchSource_SWITCH_SOURCE_OPERATOR {
		return fmt.Errorf("switch source %s", src)
	}
	if err := checkPooledEvidence(p); err != nil {
		return err
	}
	det, err := detector.NewState(trackedFromProto(p.GetTracked()), p.GetLastColumnAtMs())
	if err != nil {
		return fmt.Errorf("tracked routes: %w", err)
	}
	if det, err = restoreCold(det, p); err != nil {
		return err
	}
	s.bootstrapped = true
	s.cat = cat
	s.cfg = p.GetConfig()
	s.detCfg = detectorConfig(s.cfg)
	s.sw = sw
	s.det = det
	return nil
}

// checkCatalogFeatures: below the version merges exist, no route was made
// by a merge; below the version placements are recorded, no route's start
// is marked as an operator's (no replica of that version writes either).
// The walk over the routes runs only there.
func checkCatalogFeatures(cat *catalog.Catalog, version uint32) error {
	merges, marks := clusterversion.ManualMerge.EnabledAt(version), clusterversion.OperatorBoundariesKept.EnabledAt(version)
	if merges && marks {
		return nil
	}
	var err error
	cat.Ascend(func(r *catalog.RouteDescriptor) bool {
		switch {
		case !merges && r.Merged():
			err = fmt.Errorf("catalog holds merged route %d, which needs cluster version %d, at cluster version %d",
				r.ID, clusterversion.ManualMerge.Version(), version)
		case !marks && r.OperatorStart:
			err = fmt.Errorf("catalog route %d: operator_start, which needs cluster version %d (%s), at cluster version %d",
				r.ID, clusterversion.OperatorBoundariesKept.Version(), clusterversion.OperatorBoundariesKept, version)
		}
		return err == nil
	})
	return err
}

// checkPooledEvidence: below the version that pools split evidence, no
// tracked route holds any (no replica of that version writes it). The
// detector checks the pool's bounds (detector.NewState).
func checkPooledEvidence(p *api.StateSnapshot) error {
	if clusterversion.PooledEvidence.EnabledAt(p.GetClusterVersion()) {
		return nil
	}
	for i, t := range p.GetTracked() {
		if len(t.GetPooledEvidence()) > 0 {
			return fmt.Errorf("tracked[%d]: pooled_evidence, which needs cluster version %d (%s), at cluster version %d",
				i, clusterversion.PooledEvidence.Version(), clusterversion.PooledEvidence, p.GetClusterVersion())
		}
	}
	return nil
}

// restoreCold adds the cold state to det: only where AutoMerge is on (no
// replica below it writes one, nor a merge explanation), and only merge
// explanations that have a reason (trackedToProto writes no other).
func restoreCold(det *detector.State, p *api.StateSnapshot) (*detector.State, error) {
	on := clusterversion.AutoMerge.EnabledAt(p.GetClusterVersion())
	for i, t := range p.GetTracked() {
		switch x := t.GetMergeExplanation(); {
		case x == nil:
		case !on:
			return nil, fmt.Errorf("tracked[%d]: a merge explanation, which needs cluster version %d, at cluster version %d", i, clusterversion.AutoMerge.Version(), p.GetClusterVersion())
		case x.GetReason() == api.Reason_REASON_UNSPECIFIED:
			return nil, fmt.Errorf("tracked[%d]: a merge explanation without a reason", i)
		}
	}
	if p.GetCold() == nil {
		return det, nil
	}
	if !on {
		return nil, fmt.Errorf("cold state, which needs cluster version %d, at cluster version %d", clusterversion.AutoMerge.Version(), p.GetClusterVersion())
	}
	c, err := coldFromProto(p.GetCold())
	if err != nil {
		return nil, err
	}
	return det.WithCold(c)
}

// checkConfigFeatures: a config holds no setting of a feature off at the
// cluster version (no replica of that version writes one).
func checkConfigFeatures(c *api.Config, version uint32) error {
	for _, x := range []struct {
		f     clusterversion.Feature
		set   bool
		field string
	}{
		{clusterversion.HoldBand, c.HoldBandBp != nil, "hold_band_bp"},
		{clusterversion.FloorFollowsThreshold, c.GetFloorFollowsThreshold(), "floor_follows_threshold"},
		{clusterversion.ScheduledStepChange, c.GetNextStepMs() != 0 || c.GetNextStepAtMs() != 0, "next_step_ms"},
		{clusterversion.AutoMerge, c.MergeThresholdBp != nil || c.MergeWindows != nil || c.MergeDelayMs != nil || c.MaxMergesPerCycle != nil || c.MergeMarginBp != nil, "merge_threshold_bp"},
	} {
		if x.set && !x.f.EnabledAt(version) {
			return fmt.Errorf("config holds %s, a setting of cluster version %d, at cluster version %d", x.field, x.f.Version(), version)
		}
	}
	return nil
}

func checkMembers(ms []*api.Member) error {
	for i, m := range ms {
		if m.GetNodeId() == "" || !clusterversion.IsVersion(m.GetSupportedVersion()) {
			return fmt.Errorf("members[%d]: empty node id or supported version 0", i)
		}
		if i > 0 && m.GetNodeId() <= ms[i-1].GetNodeId() {
			return fmt.Errorf("members[%d] %q: not sorted or repeated", i, m.GetNodeId())
		}
	}
	return nil
}

func checkAdmissions(as []*api.Admission, members []*api.Member) error {
	if len(as) > maxAdmissions {
		return fmt.Errorf("%d admissions, at most %d", len(as), maxAdmissions)
	}
	for i, a := range as {
		if err := api.ValidateNodeID(a.GetNodeId()); err != nil || a.GetRaftAddr() == "" {
			return fmt.Errorf("admissions[%d]: node id %q or raft address %q invalid", i, a.GetNodeId(), a.GetRaftAddr())
		}
		if i > 0 && a.GetNodeId() <= as[i-1].GetNodeId() {
			return fmt.Errorf("admissions[%d] %q: not sorted or repeated", i, a.GetNodeId())
		}
		if _, member := findMember(members, a.GetNodeId()); member {
			return fmt.Errorf("admissions[%d] %q: already a member", i, a.GetNodeId())
		}
	}
	return nil
}

// checkOps verifies what the op-step path relies on: ids sorted, unique and
// below next_op_id; 1..maxOpSteps keys; next_step within bounds and in line
// with the state and the recorded step results; targets that are (or were)
// real routes.
func checkOps(ops []*api.Op, nextOpID uint64, cat *catalog.Catalog, maxFinished int, version uint32) error {
	finished := 0
	for i, op := range ops {
		id := op.GetOpId()
		if id == 0 || id >= nextOpID || (i > 0 && id <= ops[i-1].GetOpId()) {
			return fmt.Errorf("ops[%d]: id %d unsorted, repeated or not below next_op_id %d", i, id, nextOpID)
		}
		keys := len(op.GetSplitKeys())
		switch op.GetKind() {
		case api.OpKind_OP_KIND_SPLIT:
			if keys < 1 || keys > maxOpSteps {
				return fmt.Errorf("op %d: %d split keys", id, keys)
			}
		case api.OpKind_OP_KIND_MERGE:
			if err := checkMergeOp(op, version); err != nil {
				return err
			}
			if r := op.GetRightRouteId(); cat == nil || r >= cat.NextRouteID() {
				return fmt.Errorf("op %d: right route %d was never a route", id, r)
			}
			keys = 1 // one step
		case api.OpKind_OP_KIND_MOVE:
			if err := checkMoveOp(op, version, cat); err != nil {
				return err
			}
			keys = moveStepCommit
		default:
			return fmt.Errorf("op %d: kind %s", id, op.GetKind())
		}
		next := int(op.GetNextStep())
		if next < 1 || next > keys+1 || len(op.GetStepResults()) != next-1 {
			return fmt.Errorf("op %d: next_step %d with %d keys and %d step results", id, next, keys, len(op.GetStepResults()))
		}
		switch op.GetState() {
		case api.OpState_OP_STATE_PENDING, api.OpState_OP_STATE_RUNNING, api.OpState_OP_STATE_PAUSED:
			if next > keys {
				return fmt.Errorf("op %d: live with every step applied", id)
			}
			if op.GetState() == api.OpState_OP_STATE_PAUSED && op.GetPausedAtHlc() == 0 {
				return fmt.Errorf("op %d: paused without paused_at_hlc", id)
			}
		case api.OpState_OP_STATE_DONE:
			if next != keys+1 {
				return fmt.Errorf("op %d: done at next_step %d of %d", id, next, keys)
			}
			finished++
		case api.OpState_OP_STATE_ABORTED:
			finished++
		default:
			return fmt.Errorf("op %d: state %s", id, op.GetState())
		}
		if t := op.GetTargetRouteId(); cat == nil || t == 0 || t >= cat.NextRouteID() {
			return fmt.Errorf("op %d: target route %d was never a route", id, t)
		}
	}
	if finished > maxFinished {
		return fmt.Errorf("%d finished ops above the local bound %d", finished, maxFinished)
	}
	return checkMovingRoutes(ops, cat)
}

// checkMoveOp: a move needs RangeMoves, two different groups, and while
// live its route moving for it (begun before the fence, fenced after).
func checkMoveOp(op *api.Op, version uint32, cat *catalog.Catalog) error {
	id := op.GetOpId()
	switch {
	case !clusterversion.RangeMoves.EnabledAt(version):
		return fmt.Errorf("op %d: a move at cluster version %d", id, version)
	case op.GetSourceGroupId() == op.GetTargetGroupId():
		return fmt.Errorf("op %d: a move within group %d", id, op.GetSourceGroupId())
	case !isLive(op):
		return nil
	}
	r, ok := cat.Route(op.GetTargetRouteId())
	if op.GetNextStep() == moveStepBegin {
		// Planned, not begun: the route is not moving yet.
		if ok && r.Moving() != nil && r.Moving().OpID == id {
			return fmt.Errorf("op %d: planned move whose route already moves for it", id)
		}
		return nil
	}
	want := catalog.StateMigratingSource
	if op.GetNextStep() > moveStepFence {
		want = catalog.StateWriteFenced
	}
	if !ok || r.State != want || r.Moving() == nil || r.Moving().OpID != id || r.Moving().TargetGroupID != op.GetTargetGroupId() || r.GroupID != op.GetSourceGroupId() {
		return fmt.Errorf("op %d: live move at step %d, but its route is %v", id, op.GetNextStep(), r)
	}
	return nil
}

// checkMovingRoutes: every route the catalog has moving belongs to a live
// move op.
func checkMovingRoutes(ops []*api.Op, cat *catalog.Catalog) error {
	if cat == nil {
		return nil
	}
	var err error
	cat.Ascend(func(r *catalog.RouteDescriptor) bool {
		if m := r.Moving(); m != nil {
			if i, ok := findOp(ops, m.OpID); !ok || !isLive(ops[i]) || !isMoveOp(ops[i]) {
				err = fmt.Errorf("route %d moves for op %d, which is no live move", r.ID, m.OpID)
			}
		}
		return err == nil
	})
	return err
}

func checkDecisions(ds []*api.Decision, nextSeq uint64, limit int) error {
	if len(ds) > limit {
		return fmt.Errorf("%d decisions above the local ring size %d", len(ds), limit)
	}
	for i, d := range ds {
		if d.GetSeq() == 0 || d.GetSeq() >= nextSeq || (i > 0 && d.GetSeq() <= ds[i-1].GetSeq()) {
			return fmt.Errorf("decisions[%d]: seq %d unsorted, repeated or not below %d", i, d.GetSeq(), nextSeq)
		}
	}
	return nil
}

func restoreRequests(rs []*api.RequestRecord, nextSeq uint64, limit int, version uint32) (*requestTable, error) {
	if len(rs) > limit {
		return nil, fmt.Errorf("%d request records above the local table size %d", len(rs), limit)
	}
	t := newRequestTable()
	for i, r := range rs {
		if r.GetRequestId() == "" || r.GetResult() == nil {
			return nil, fmt.Errorf("requests[%d]: empty id or no result", i)
		}
		if r.GetSeq() == 0 || r.GetSeq() >= nextSeq || (i > 0 && r.GetSeq() <= rs[i-1].GetSeq()) {
			return nil, fmt.Errorf("requests[%d]: seq %d unsorted, repeated or not below %d", i, r.GetSeq(), nextSeq)
		}
		if err := checkRequestBinding(r, version); err != nil {
			return nil, fmt.Errorf("requests[%d]: %w", i, err)
		}
		if _, dup := t.byID.ReplaceOrInsert(r); dup {
			return nil, fmt.Errorf("requests[%d]: id %q repeated", i, r.GetRequestId())
		}
		t.bySeq.ReplaceOrInsert(r)
	}
	return t, nil
}
