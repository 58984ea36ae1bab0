package simlab

import (
	"bytes"
	"fmt"
	"log/slog"
	"strconv"

	"github.com/hashicorp/raft"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/catalog"
	"github.com/hotsplit/hotsplit/clusterversion"
	"github.com/hotsplit/hotsplit/columns"
	"github.com/hotsplit/hotsplit/fsm"
	"github.com/hotsplit/hotsplit/hlc"
	"github.com/hotsplit/hotsplit/keyviz"
)

// Isolation trials: is a key whose true load is a given multiple of the
// absolute floor isolated? Each trial is one independent column through
// the real pipeline — three sampling reporters (1 in 16), the leader's
// merge, a fresh state machine that promotes after one hot column — so the
// only thing that varies between trials is the sampling.

// TrialSpec describes a set of isolation trials.
type TrialSpec struct {
	// FloorMultiple is the key's true weighted load in floors.
	FloorMultiple float64
	// StepMs is the column length: with the floor it sets how many
	// sampled events the key is worth.
	StepMs uint64
	// Trials and Seed: independent columns, reproducibly sampled.
	Trials int
	Seed   uint64
	// ClusterVersion selects the rules (default fsm.SupportedVersion).
	ClusterVersion uint32
}

// Trial settings: a floor pinned above the threshold, so a route the key
// dominates is hot and only the floor (and the share) stand between the
// key and isolation; background reads of 5% of the floor.
const (
	trialThreshold = 20_000
	trialFloor     = 25_000
)

// IsolationTrials runs spec and returns in how many trials the key was
// planned for isolation.
func IsolationTrials(spec TrialSpec) (int, error) {
	if !clusterversion.IsVersion(spec.ClusterVersion) { // unset
		spec.ClusterVersion = clusterversion.Supported
	}
	key := []byte("tenant:0042:orders:incidental")
	perColumn := func(perMin float64) int { return int(perMin*float64(spec.StepMs)/60_000 + 0.5) }
	writes := perColumn(spec.FloorMultiple * trialFloor / 4)
	reads := perColumn(0.05 * trialFloor)
	samplers := make([]*keyviz.Sampler, 3)
	cat, err := catalog.New(nil, 1)
	if err != nil {
		return 0, err
	}
	routes := []*catalog.RouteDescriptor{cat.Lookup(nil)}
	lc := keyviz.LoadConfig{StepMs: spec.StepMs, Buckets: 16, WriteWeight: 4, ReadWeight: 1}
	for i := range samplers {
		s, err := keyviz.NewSampler(keyviz.SamplerConfig{Load: lc, Seed: spec.Seed*31 + uint64(i) + 1})
		if err != nil {
			return 0, err
		}
		if err := s.SetRoutes(routes, cat.Version()); err != nil {
			return 0, err
		}
		samplers[i] = s
	}
	const start = 1_800_000_000_000
	for _, s := range samplers {
		s.CloseColumn(start)
	}
	planned := 0
	other := make([]byte, 0, 64)
	for trial := range spec.Trials {
		w := start + uint64(trial)*spec.StepMs
		n := 0
		for i := range writes {
			samplers[n%3].Observe(1, key, true)
			n++
			if i < reads {
				other = strconv.AppendInt(append(other[:0], "tenant:0042:orders:"...), int64(i), 10)
				samplers[n%3].Observe(1, other, false)
				n++
			}
		}
		contribs := make([]columns.Contribution, 3)
		for i, s := range samplers {
			contribs[i] = columns.Contribution{Reporter: "node-" + strconv.Itoa(i), Column: s.CloseColumn(w + spec.StepMs)}
		}
		ok, err := trialPlans(spec, cat, contribs, key)
		if err != nil {
			return planned, fmt.Errorf("trial %d: %w", trial, err)
		}
		if ok {
			planned++
		}
	}
	return planned, nil
}

// trialPlans commits one column to a fresh state machine and reports
// whether it planned the key's isolation.
func trialPlans(spec TrialSpec, cat *catalog.Catalog, contribs []columns.Contribution, key []byte) (bool, error) {
	f := fsm.New(fsm.Options{Logger: slog.New(slog.DiscardHandler), Halt: func(error) {}})
	cfg := &api.Config{Threshold: trialThreshold, TopKeyAbsoluteFloor: trialFloor, CandidateWindows: 1, StepMs: spec.StepMs, GraceMs: spec.StepMs / 2}
	var index uint64
	apply := func(c *api.Command) (*api.CommandResult, error) {
		index++
		c.Hlc = hlc.Make(1_900_000_000_000+index, 0)
		b, err := fsm.EncodeCommand(c)
		if err != nil {
			return nil, err
		}
		return f.Apply(&raft.Log{Index: index, Term: 1, Type: raft.LogCommand, Data: b}).(*fsm.Result).CommandResult, nil
	}
	if _, err := apply(&api.Command{Body: &api.Command_Bootstrap{Bootstrap: &api.Bootstrap{ClusterId: "trial",
		Config: cfg, AutoSplit: true, ClusterVersion: spec.ClusterVersion}}}); err != nil {
		return false, err
	}
	st := f.State()
	entry := columns.MergeColumn(contribs, cat, st.DetectorConfig(), st.ClusterVersion())
	res, err := apply(&api.Command{Body: &api.Command_ObserveColumn{ObserveColumn: entry}})
	if err != nil {
		return false, err
	}
	if res.GetCode() != api.ResultCode_RESULT_CODE_OK {
		return false, fmt.Errorf("column refused: %s", res.GetMessage())
	}
	for _, id := range res.GetPlannedOpIds() {
		if op, ok := f.State().Op(id); ok && len(op.GetSplitKeys()) > 0 && isolatesKey(op, key) {
			return true, nil
		}
	}
	return false, nil
}

func isolatesKey(op *api.Op, key []byte) bool {
	for _, k := range op.GetSplitKeys() {
		if bytes.Equal(k, key) || bytes.Equal(k, append(bytes.Clone(key), 0)) {
			return true
		}
	}
	return false
}
