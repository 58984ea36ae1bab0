package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/clusterversion"
	"github.com/hotsplit/hotsplit/columns"
	"github.com/hotsplit/hotsplit/fsm"
	"github.com/hotsplit/hotsplit/hlc"
	"github.com/hotsplit/hotsplit/internal/raftfuture"
)

// Raft is the part of *raft.Raft the scheduler uses.
type Raft interface {
	Applier
	Barrier(timeout time.Duration) raft.Future
	VerifyLeader() raft.Future
	CommitIndex() uint64
	CurrentTerm() uint64
	State() raft.RaftState
	GetConfiguration() raft.ConfigurationFuture
	AddNonvoter(id raft.ServerID, address raft.ServerAddress, prevIndex uint64, timeout time.Duration) raft.IndexFuture
	AddVoter(id raft.ServerID, address raft.ServerAddress, prevIndex uint64, timeout time.Duration) raft.IndexFuture
	RemoveServer(id raft.ServerID, prevIndex uint64, timeout time.Duration) raft.IndexFuture
	LeadershipTransfer() raft.Future
	LeadershipTransferToServer(id raft.ServerID, address raft.ServerAddress) raft.Future
	LeaderWithID() (raft.ServerAddress, raft.ServerID)
}

// BootstrapParams are what a node started with --bootstrap proposes as the
// Bootstrap command once it leads a cluster whose FSM is not bootstrapped.
type BootstrapParams struct {
	ClusterID     string
	InitialSplits [][]byte
	GroupID       uint64
	// GroupCount is how many shard groups the bootstrap creates (0: one).
	GroupCount uint32
	Config     *api.Config
	AutoSplit  bool
}

// Config configures a Scheduler. Zero durations take the defaults.
type Config struct {
	Self *api.Member
	// CeilingWindow is the fence window (default 1 s): the leader may issue
	// timestamps up to this far past its last renewal.
	CeilingWindow time.Duration
	// RaftTimeout bounds barrier, enqueue and membership calls (default 5 s).
	RaftTimeout time.Duration
	Bootstrap   *BootstrapParams
	// PeerProgress reports a peer's applied index, for promoting caught-up
	// non-voters; nil disables promotion.
	PeerProgress func(ctx context.Context, m *api.Member) (uint64, error)
	// OpRetryMin and OpRetryMax bound the backoff between attempts at an op
	// step whose proposal failed (defaults 50 ms and 2 s).
	OpRetryMin, OpRetryMax time.Duration
	// OpStepDelay holds a newly planned op this long (measured on the HLC
	// from its creation) before its first step, so operators can review
	// planned ops in `autosplit status` and abort one before anything
	// changes. Default 0: step at once.
	OpStepDelay time.Duration
	// Columns configures the column aggregator, a duty of every term that
	// proposes through this scheduler's proposer (Loads); nil: none.
	Columns *columns.Config
	// ClockMonitor, when enabled, vetoes leadership while this node's clock
	// is off from a majority (docs/design.md#trust-and-integrity). nil: no monitor.
	ClockMonitor *ClockMonitor
	// StateChecks is this node's part in the cross-replica state check; nil
	// disables CheckState.
	StateChecks *StateChecker
	// StateCheckInterval: the leader commits a CheckState marker this often
	// (cluster version 2 only); 0 turns the periodic check off.
	StateCheckInterval time.Duration
	Logger             *slog.Logger
	Metrics            *Metrics
}

// Scheduler runs the leader duties of one node. Start it with Run.
type Scheduler struct {
	cfg      Config
	raft     Raft
	fsm      *fsm.FSM
	clock    *hlc.Clock
	proposer *Proposer
	log      *slog.Logger
	notify   <-chan bool

	loads *columns.Aggregator // the column aggregator, run for every term; nil: none

	mu   sync.Mutex // guards term
	term *termState // nil while not leader
}

// termState is one leadership term of this node.
type termState struct {
	raftTerm uint64
	cancel   context.CancelFunc
	ready    chan struct{} // closed once the fence of the term applied
	done     chan struct{} // closed when the term's goroutines have stopped
}

// New returns a scheduler. notify must be the raft Config.NotifyCh of r
// (buffered): it tells the scheduler when leadership changes.
func New(cfg Config, r Raft, f *fsm.FSM, clock *hlc.Clock, notify <-chan bool) *Scheduler {
	if cfg.CeilingWindow <= 0 {
		cfg.CeilingWindow = time.Second
	}
	if cfg.RaftTimeout <= 0 {
		cfg.RaftTimeout = 5 * time.Second
	}
	if cfg.OpRetryMin <= 0 {
		cfg.OpRetryMin = 50 * time.Millisecond
	}
	if cfg.OpRetryMax <= 0 {
		cfg.OpRetryMax = 2 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	s := &Scheduler{cfg: cfg, raft: r, fsm: f, clock: clock, notify: notify, log: cfg.Logger}
	s.proposer = NewProposer(r, clock, cfg.RaftTimeout, func() uint32 { return f.State().ClusterVersion() })
	if cfg.Columns != nil {
		s.loads = columns.NewAggregator(*cfg.Columns, columnProposer{s.proposer}, func() columns.State { return f.State() })
	}
	return s
}

// ClockOff reports whether this node's clock is off from a majority of the
// members (it refuses to lead).
func (s *Scheduler) ClockOff() bool { return s.cfg.ClockMonitor.Off() }

// StateChecks returns this node's state checker (nil if none).
func (s *Scheduler) StateChecks() *StateChecker { return s.cfg.StateChecks }

// Warnings are this node's operator warnings about integrity and time:
// clocks off beyond --maxClockOffset and the latest state check's findings,
// each naming the node.
func (s *Scheduler) Warnings() []string {
	var out []string
	if m := s.cfg.ClockMonitor; m != nil {
		out = append(out, m.Warnings()...)
	}
	if c := s.cfg.StateChecks; c != nil {
		out = append(out, c.Warnings()...)
	}
	return out
}

// CheckState commits a CheckState marker and returns this leader's
// verdict at its index: every member's state hash, compared by majority.
// Leader only; needs cluster version 2.
func (s *Scheduler) CheckState(ctx context.Context, actor string) (*api.CheckStateResponse, error) {
	if !s.IsReady() {
		return nil, ErrNotLeader
	}
	if s.cfg.StateChecks == nil {
		return nil, fmt.Errorf("%w: this node runs no state checker", ErrNoVerdict)
	}
	index, err := s.proposeCheck(ctx, actor)
	if err != nil {
		return nil, err
	}
	return s.cfg.StateChecks.Result(ctx, index)
}

// proposeCheck commits a CheckState marker and returns its index. Below the
// version fsm.StateCheck needs, or if the FSM refuses the marker (whose
// only refusals are of the version), it fails with fsm.ErrVersionTooLow.
func (s *Scheduler) proposeCheck(ctx context.Context, actor string) (uint64, error) {
	if err := s.fsm.State().Require(clusterversion.StateCheck); err != nil {
		return 0, err
	}
	res, err := s.proposer.Propose(ctx, &api.Command{MinVersion: clusterversion.StateCheck.Version(), Body: &api.Command_CheckState{CheckState: &api.CheckState{Actor: actor}}})
	if err != nil {
		return 0, err
	}
	if res.GetCode() != api.ResultCode_RESULT_CODE_OK {
		return 0, fmt.Errorf("%w: check_state refused: %s", clusterversion.ErrVersionTooLow, res.GetMessage())
	}
	return res.Index, nil
}

// Loads returns the column aggregator (nil without Config.Columns): the
// sink of load reports on the leader.
func (s *Scheduler) Loads() *columns.Aggregator { return s.loads }

// columnProposer is the single proposer as the column aggregator takes it.
type columnProposer struct{ p *Proposer }

func (c columnProposer) Propose(ctx context.Context, cmd *api.Command) (*api.CommandResult, error) {
	res, err := c.p.Propose(ctx, cmd)
	if err != nil || res == nil {
		return nil, err
	}
	return res.CommandResult, nil
}

// Proposer returns the node's single proposer.
func (s *Scheduler) Proposer() *Proposer { return s.proposer }

// Clock returns the node's HLC.
func (s *Scheduler) Clock() *hlc.Clock { return s.clock }

// Run follows leadership until ctx ends, starting the leader duties when
// this node gains leadership and stopping them (and revoking the fence)
// when it loses it.
func (s *Scheduler) Run(ctx context.Context) {
	defer s.stepDown()
	poll := time.NewTicker(250 * time.Millisecond)
	defer poll.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.notify:
		case <-poll.C:
		}
		// Notifications can be coalesced (a lose-and-regain may arrive as one
		// "true"), so the raft state and term decide: every new term gets
		// its own fence.
		if s.raft.State() == raft.Leader {
			s.stepUp(ctx, s.raft.CurrentTerm())
		} else {
			s.stepDown()
		}
	}
}

func (s *Scheduler) stepUp(parent context.Context, term uint64) {
	s.mu.Lock()
	cur := s.term
	s.mu.Unlock()
	if cur != nil {
		select {
		case <-cur.done: // the term's duties gave up (e.g. the barrier failed): retry
		default:
			if cur.raftTerm == term {
				return
			}
		}
		s.stepDown()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ctx, cancel := context.WithCancel(parent)
	t := &termState{raftTerm: term, cancel: cancel, ready: make(chan struct{}), done: make(chan struct{})}
	s.term = t
	s.metricsLeader(true)
	go func() {
		defer close(t.done)
		s.lead(ctx, t)
	}()
}

func (s *Scheduler) stepDown() {
	s.mu.Lock()
	t := s.term
	s.term = nil
	s.mu.Unlock()
	// Stop issuing at once: waiting for the ceiling to pass would let a
	// deposed leader keep handing out timestamps.
	s.clock.Revoke()
	if t != nil {
		t.cancel()
		<-t.done
		s.metricsLeader(false)
	}
}

// Ready returns a channel closed once this node leads and the fence of its
// term has applied, or nil if it does not lead (a request waiting through an
// election selects on it).
func (s *Scheduler) Ready() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.term == nil {
		return nil
	}
	return s.term.ready
}

// IsReady reports whether linearizable work may proceed on this node now:
// it leads, the fence of its term applied, and the term's duties still run
// (a term given away — its clock went off — is over although raft may still
// call this node leader for a moment).
func (s *Scheduler) IsReady() bool {
	s.mu.Lock()
	t := s.term
	s.mu.Unlock()
	if t == nil {
		return false
	}
	select {
	case <-t.done:
		return false
	default:
	}
	select {
	case <-t.ready:
		return true
	default:
		return false
	}
}

// ReadIndex implements the read path of docs/design.md#interfaces on the leader: after an
// entry of this term has applied (the fence), take the commit index, confirm
// leadership with a heartbeat round, and return the index the caller must
// wait for (fsm.WaitIndex) before answering.
func (s *Scheduler) ReadIndex(ctx context.Context) (uint64, error) {
	if !s.IsReady() {
		if s.raft.State() == raft.Leader {
			return 0, ErrNotReady
		}
		return 0, ErrNotLeader
	}
	idx := s.raft.CommitIndex()
	if err := s.verifyLeader(ctx); err != nil {
		return 0, err
	}
	return idx, nil
}

// VerifyLeader confirms, with a round of heartbeats, that no other leader
// has been elected; timestamps handed out before a successful verification
// cannot be undercut by a newer leader's.
func (s *Scheduler) verifyLeader(ctx context.Context) error {
	if err := raftfuture.Wait(ctx, s.raft.VerifyLeader()); err != nil {
		return fmt.Errorf("%w: verify leader: %w", ErrNotLeader, err)
	}
	return nil
}

// TimestampWait bounds how long a batch waits for the physical clock to
// reach its millisecond (hlc.ErrAheadOfClock) before the request fails as
// definitely not issued (Unavailable). One millisecond holds 65,536
// timestamps, so only a flood or a fresh leader whose clock trails the old
// ceiling waits at all.
const TimestampWait = 5 * time.Millisecond

// Timestamps reserves a batch of n fenced timestamps and confirms leadership
// before returning them, so a deposed leader that has not noticed yet cannot
// hand out values that a client could see before a newer leader's. A batch
// never carries the HLC past the physical clock
// (docs/design.md#the-timestamp-oracle): it waits up to TimestampWait for the
// clock, then fails with ErrNotReady.
func (s *Scheduler) Timestamps(ctx context.Context, n uint64) (uint64, error) {
	if !s.IsReady() {
		return 0, ErrNotLeader
	}
	first, err := s.clock.NextFencedBatchWait(n, TimestampWait)
	if err != nil {
		if errors.Is(err, hlc.ErrBatchSize) || errors.Is(err, hlc.ErrAheadOfClock) {
			return 0, err
		}
		return 0, fmt.Errorf("%w: %w", ErrNotReady, err)
	}
	if err := s.verifyLeader(ctx); err != nil {
		return 0, err
	}
	return first, nil
}

// lead runs the duties of one term: establish the fence, then renew it and
// run the periodic duties until ctx ends.
func (s *Scheduler) lead(ctx context.Context, t *termState) {
	log := s.log.With("term_start", time.Now().Format(time.RFC3339Nano))
	if s.cfg.ClockMonitor.Off() {
		// raft v1.7.2 cannot veto a candidacy: a node whose clock is off
		// may win an election. It commits nothing (no fence, so no
		// timestamp and no proposal) and hands leadership on.
		s.giveAway(ctx, log, t.raftTerm)
		return
	}
	if err := s.establishFence(ctx); err != nil {
		if ctx.Err() == nil {
			log.Warn("could not establish the fence of this term", "reason", err.Error())
		}
		return
	}
	close(t.ready)
	log.Info("leader ready", "ceiling_ms", s.clock.Ceiling(), "commit_hlc", hlc.Format(s.clock.Last()))
	s.ensureSelfMember(ctx)
	// The duties stop with the term, or earlier when the clock goes off.
	dctx, stopDuties := context.WithCancel(ctx)
	defer stopDuties()
	var duties sync.WaitGroup
	defer duties.Wait()
	duties.Add(1)
	go func() { defer duties.Done(); s.stepOps(dctx) }()
	if s.loads != nil {
		duties.Add(1)
		go func() { defer duties.Done(); s.loads.RunTerm(dctx) }()
	}

	renew := time.NewTicker(s.cfg.CeilingWindow / 4)
	defer renew.Stop()
	members := time.NewTicker(time.Second)
	defer members.Stop()
	var checks <-chan time.Time
	if s.cfg.StateCheckInterval > 0 && s.cfg.StateChecks != nil {
		tick := time.NewTicker(s.cfg.StateCheckInterval)
		defer tick.Stop()
		checks = tick.C
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-checks:
			if s.fsm.State().Has(clusterversion.StateCheck) {
				if _, err := s.proposeCheck(ctx, "periodic"); err != nil && ctx.Err() == nil {
					log.Warn("periodic state check not committed", "reason", err.Error())
				}
			}
		case <-renew.C:
			if s.cfg.ClockMonitor.Off() {
				// Stop issuing at once, end the term's duties, hand over.
				s.clock.Revoke()
				stopDuties()
				duties.Wait()
				s.giveAway(ctx, log, t.raftTerm)
				return
			}
			if err := s.advanceCeiling(ctx); err != nil && ctx.Err() == nil {
				log.Warn("fence renewal failed", "reason", err.Error())
				s.metricsRenewal(false)
			} else if err == nil {
				s.metricsRenewal(true)
			}
		case <-members.C:
			s.promoteCaughtUp(ctx)
		}
	}
}

// giveAway hands leadership to another voter because this node's clock is
// off; the term ends without a fence. If the transfer fails, the next poll
// of Run starts a new attempt (the term is over, so stepUp retries).
func (s *Scheduler) giveAway(ctx context.Context, log *slog.Logger, term uint64) {
	s.clock.Revoke()
	s.cfg.ClockMonitor.refused()
	log.Warn("refusing leadership: this node's clock is off by more than --maxClockOffset from a majority; transferring it",
		"raft_term", term, "warnings", strings.Join(s.cfg.ClockMonitor.Warnings(), "; "))
	tctx, cancel := context.WithTimeout(ctx, s.cfg.RaftTimeout)
	defer cancel()
	if err := raftfuture.Wait(tctx, s.raft.LeadershipTransfer()); err != nil && ctx.Err() == nil {
		log.Warn("leadership transfer away from an off clock failed", "reason", err.Error())
	}
}

// establishFence is docs/design.md#hlc-and-the-fence's order on gaining leadership: a Barrier (every
// earlier entry has applied), Observe the last applied HLC and the old
// ceiling, commit AdvanceCeiling, and only once it applied raise the local
// ceiling.
func (s *Scheduler) establishFence(ctx context.Context) error {
	if err := raftfuture.Wait(ctx, s.raft.Barrier(s.cfg.RaftTimeout)); err != nil {
		return fmt.Errorf("barrier: %w", err)
	}
	st := s.fsm.State()
	s.clock.Observe(st.LastHLC())
	// Every later timestamp is above anything the old leader could issue.
	if !skipCeilingObserve() {
		s.clock.Observe(hlc.Make(st.CeilingMs(), 0))
	}
	if !st.Bootstrapped() {
		// The first entry of a new cluster; nothing was ever issued before
		// it, so its stamp needs no fence.
		if err := s.bootstrap(ctx); err != nil {
			return err
		}
	}
	return s.advanceCeiling(ctx)
}

// advanceCeiling commits and then installs a new fence. The ceiling is
// computed from the physical clock, not from the HLC: were it computed from
// the HLC, every renewal would let the HLC run one more window ahead, and a
// timestamp flood could push it ahead of wall time without bound. It is at
// least one millisecond above the last timestamp, so a new leader whose
// clock trails an observed old ceiling can still stamp its entries (within
// that millisecond) instead of stalling until its clock catches up.
func (s *Scheduler) advanceCeiling(ctx context.Context) error {
	ceiling := max(s.clock.PhysicalNow()+uint64(s.cfg.CeilingWindow.Milliseconds()), hlc.Physical(s.clock.Last())+1)
	res, err := s.proposer.proposeUnfenced(ctx, &api.Command{Body: &api.Command_AdvanceCeiling{AdvanceCeiling: &api.AdvanceCeiling{CeilingMs: ceiling}}})
	if err != nil {
		return err
	}
	if res.GetCode() != api.ResultCode_RESULT_CODE_OK {
		return fmt.Errorf("advance ceiling rejected: %s: %s", res.GetCode(), res.GetMessage())
	}
	s.clock.SetCeiling(ceiling)
	return nil
}

// ErrNotBootstrapped: this node leads a cluster whose Bootstrap entry has
// not committed and it has no bootstrap parameters of its own.
var ErrNotBootstrapped = errors.New("cluster not bootstrapped and this node was not started with --bootstrap")

func (s *Scheduler) bootstrap(ctx context.Context) error {
	b := s.cfg.Bootstrap
	if b == nil {
		return ErrNotBootstrapped
	}
	cmd := &api.Command{Body: &api.Command_Bootstrap{Bootstrap: &api.Bootstrap{
		ClusterId: b.ClusterID, InitialSplits: b.InitialSplits, GroupId: b.GroupID, GroupCount: b.GroupCount,
		Config: b.Config, AutoSplit: b.AutoSplit, ClusterVersion: clusterversion.Supported,
	}}}
	res, err := s.proposer.proposeUnfenced(ctx, cmd)
	if err != nil {
		return fmt.Errorf("bootstrap: %w", err)
	}
	if res.GetCode() != api.ResultCode_RESULT_CODE_OK && res.GetCode() != api.ResultCode_RESULT_CODE_ALREADY_BOOTSTRAPPED {
		// A bad initial split key or config: nothing will fix it but the
		// operator. Say so loudly and keep leading without a catalog.
		s.log.Error("bootstrap rejected", "reason", res.GetMessage())
		return fmt.Errorf("bootstrap rejected: %s", res.GetMessage())
	}
	s.log.Info("cluster bootstrapped", "cluster_id", s.fsm.State().ClusterID(), "catalog_version", s.fsm.State().Catalog().Version())
	return nil
}

func (s *Scheduler) ensureSelfMember(ctx context.Context) {
	st := s.fsm.State()
	if !st.Bootstrapped() {
		return
	}
	self := s.cfg.Self
	if m, ok := st.Member(self.NodeId); ok && proto.Equal(m, self) {
		return
	}
	res, err := s.proposer.Propose(ctx, &api.Command{Body: &api.Command_SetMember{SetMember: &api.SetMember{Member: cloneMember(self)}}})
	switch {
	case err != nil: // res is nil: reading it would panic
		s.log.Warn("could not record this node as a member", "reason", err.Error())
	case res.GetCode() != api.ResultCode_RESULT_CODE_OK:
		s.log.Warn("could not record this node as a member", "reason", res.GetMessage())
	}
}

func cloneMember(m *api.Member) *api.Member { return proto.CloneOf(m) }
