package checker

import (
	"cmp"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/anishathalye/porcupine"

	"github.com/hotsplit/hotsplit/jepsen/history"
	"github.com/hotsplit/hotsplit/jepsen/model"
)

// catState is the porcupine state of the catalog: its version and the hash
// of its routes.
type catState struct {
	version uint64
	hash    model.Hash
}

type catKind int

const (
	catRead catKind = iota
	catSplit
	catAutoSplit    // an op step from the log, with no client
	catRefused      // a manual split the FSM refused: it changed nothing
	catMerge        // a manual merge that applied
	catAutoMerge    // a merge op step from the log, with no client
	catMergeRefused // a manual merge the FSM refused (code says why): it changed nothing
	catGetRoute     // a linearizable read of one route, by id or by key
)

type catInput struct {
	kind     catKind
	routeID  uint64 // a split's route, a merge's left route
	rightID  uint64 // a merge's right route
	key      []byte
	expected *uint64
	hlc      uint64 // the commit HLC, which becomes the children's split_at_hlc or the merged route's merged_at_hlc
	opID     uint64
	step     uint32
	client   int
	code     model.Code // why the log refused a merge
	byKey    bool       // a GetRoute by key (key), else by id (routeID)
}

type catOutput struct {
	version         uint64
	hash            model.Hash
	leftID, rightID uint64 // a split's children
	mergedID        uint64
	unknown         bool // the client never saw an answer
	// A GetRoute's answer: the route (its id and hash, at version), or
	// gone: no live route with that id.
	routeID uint64
	gone    bool
}

// catalogs remembers the catalog of every state the search reaches, so the
// model can split it; it starts with every version of the log.
type catalogs struct {
	mu sync.Mutex
	m  map[catState]*model.Catalog
}

func (c *catalogs) get(s catState) *model.Catalog {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[s]
}

func (c *catalogs) put(cat *model.Catalog) catState {
	s := catState{cat.Version, cat.Hash()}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[s]; !ok {
		c.m[s] = cat
	}
	return s
}

// catalogHistory builds porcupine's view of the catalog: linearizable reads,
// manual splits and merges (applied, refused by the FSM, or unknown and
// resolved by the log) from clients, and every applied op step, split or
// merge — plus any applied manual split or merge no recorded client sent —
// from the log. The latter have no client times, so they may linearize
// anywhere in the run.
func catalogHistory(ops []history.Op, replay *model.Replay) ([]porcupine.Operation, porcupine.Model) {
	cats := &catalogs{m: map[catState]*model.Catalog{}}
	for _, c := range replay.Catalogs {
		cats.put(c)
	}
	init := catState{replay.Catalogs[0].Version, replay.Catalogs[0].Hash()}
	var end int64
	for _, op := range ops {
		end = max(end, op.Return, op.Call)
	}
	end++
	var out []porcupine.Operation
	clientRIDs := map[string]bool{}
	reads := map[catState][]porcupine.Operation{}
	for _, op := range ops {
		if op.Kind == history.Split || op.Kind == history.Merge {
			clientRIDs[op.RequestID] = true
		}
		switch {
		case op.Kind == history.ListRoutes && op.Status == history.OK:
			h, err := parseHash(op.RoutesHash)
			if err != nil {
				continue // checkRead reported it
			}
			s := catState{op.Version, h}
			reads[s] = append(reads[s], porcupine.Operation{ClientId: op.Client, Call: op.Call, Return: op.Return,
				Input: catInput{kind: catRead, client: op.Client}, Output: catOutput{version: op.Version, hash: h}})
		case op.Kind == history.Split && op.Status == history.OK:
			out = append(out, porcupine.Operation{ClientId: op.Client, Call: op.Call, Return: op.Return,
				Input:  catInput{kind: catSplit, routeID: op.RouteID, key: op.SplitKey, expected: op.ExpectedVersion, hlc: op.CommitHLC, client: op.Client},
				Output: catOutput{version: op.Version, leftID: op.LeftID, rightID: op.RightID}})
		case op.Kind == history.Split && op.Status == history.Fail && op.FromFSM:
			out = append(out, porcupine.Operation{ClientId: op.Client, Call: op.Call, Return: op.Return,
				Input: catInput{kind: catRefused, routeID: op.RouteID, key: op.SplitKey, expected: op.ExpectedVersion, client: op.Client}, Output: catOutput{}})
		case op.Kind == history.Split && op.Status == history.Unknown && op.LeftID != 0:
			out = append(out, porcupine.Operation{ClientId: op.Client, Call: op.Call, Return: end,
				Input:  catInput{kind: catSplit, routeID: op.RouteID, key: op.SplitKey, expected: op.ExpectedVersion, hlc: op.CommitHLC, client: op.Client},
				Output: catOutput{version: op.Version, leftID: op.LeftID, rightID: op.RightID, unknown: true}})
		case op.Kind == history.Merge:
			if o, ok := mergeOp(op, replay, end); ok {
				out = append(out, o)
			}
		case op.Kind == history.GetRoute && op.Status == history.OK:
			var h model.Hash
			if !op.Gone {
				var err error
				if h, err = parseHash(op.RoutesHash); err != nil {
					continue // checkGetRoute reported it
				}
			}
			in := catInput{kind: catGetRoute, byKey: op.ByKey, key: op.Key, client: op.Client}
			if !op.ByKey {
				in.routeID = op.RouteID
			}
			out = append(out, porcupine.Operation{ClientId: op.Client, Call: op.Call, Return: op.Return, Input: in,
				Output: catOutput{version: op.Version, hash: h, routeID: op.RouteID, gone: op.Gone}})
		}
	}
	for _, s := range slices.SortedFunc(maps.Keys(reads), func(a, b catState) int { return cmp.Compare(a.version, b.version) }) {
		out = append(out, extremeReads(reads[s])...)
	}
	maxClient := 0
	for _, op := range ops {
		maxClient = max(maxClient, op.Client)
	}
	for i, s := range replay.Splits {
		if !s.Auto() && clientRIDs[s.RequestID] {
			continue
		}
		in := catInput{kind: catAutoSplit, routeID: s.Parent.ID, key: s.Children[1].Start, hlc: s.HLC, opID: s.OpID, step: s.Step, client: maxClient + 1 + i}
		if !s.Auto() {
			in.kind = catSplit
		}
		out = append(out, porcupine.Operation{ClientId: in.client, Call: 0, Return: end, Input: in,
			Output: catOutput{version: s.Version, leftID: s.Children[0].ID, rightID: s.Children[1].ID, unknown: true}})
	}
	for i, m := range replay.Merges {
		if !m.Auto() && clientRIDs[m.RequestID] {
			continue
		}
		in := catInput{kind: catAutoMerge, routeID: m.Left.ID, rightID: m.Right.ID, hlc: m.HLC, opID: m.OpID, step: 1, client: maxClient + 1 + len(replay.Splits) + i}
		if !m.Auto() {
			in.kind = catMerge
		}
		out = append(out, porcupine.Operation{ClientId: in.client, Call: 0, Return: end, Input: in,
			Output: catOutput{version: m.Version, mergedID: m.Merged.ID, unknown: true}})
	}
	m := porcupine.Model{
		Init: func() interface{} { return init },
		Step: func(state, input, output interface{}) (bool, interface{}) {
			return stepCatalog(cats, state.(catState), input.(catInput), output.(catOutput))
		},
		Hash: func(state interface{}) uint64 {
			s := state.(catState)
			return s.version ^ binary.BigEndian.Uint64(s.hash[:8])
		},
		DescribeOperation: describeCatalogOp,
		DescribeState: func(state interface{}) string {
			s := state.(catState)
			return fmt.Sprintf("v%d %s", s.version, s.hash)
		},
	}
	return out, m
}

// extremeReads keeps, of reads that all saw the same state (which occurs
// once in the history: it is never re-entered), the one that
// returned first and the one that was invoked last. The others cannot
// change porcupine's verdict, and with dozens of concurrent readers they
// make its search explode.
//
// Why: states are never repeated (every change raises the version), so in
// any linearization the state S holds on one interval [p, q) between two
// changes. A read of S fits iff its window meets that interval, i.e. p <=
// its return and q >= its call. Over all reads of S that is p <= the
// earliest return and q >= the latest call — exactly what the two kept
// reads require; and any linearization meeting those two leaves room for
// every other read of S (call <= latest call <= q and p <= earliest return
// <= return). Reads of a state that never existed are kept this way too
// and still cannot be placed.
func extremeReads(rs []porcupine.Operation) []porcupine.Operation {
	first, last := 0, 0
	for i, r := range rs {
		if r.Return < rs[first].Return {
			first = i
		}
		if r.Call > rs[last].Call {
			last = i
		}
	}
	if first == last {
		return rs[first : first+1]
	}
	return []porcupine.Operation{rs[first], rs[last]}
}

// mergeOp is porcupine's operation for a client's merge: applied (with its
// client times), refused by the FSM (with the log's reason), or unknown and
// applied per the log (it may take effect until the end of time). A merge
// that never reached the log, or whose unknown outcome the log refused,
// changed nothing and is left out.
func mergeOp(op history.Op, replay *model.Replay, end int64) (porcupine.Operation, bool) {
	in := catInput{kind: catMerge, routeID: op.RouteID, rightID: op.RightRouteID, expected: op.ExpectedVersion, hlc: op.CommitHLC, client: op.Client}
	o := porcupine.Operation{ClientId: op.Client, Call: op.Call, Return: op.Return, Input: in,
		Output: catOutput{version: op.Version, mergedID: op.MergedID}}
	switch {
	case op.Status == history.OK:
		return o, true
	case op.Status == history.Fail && op.FromFSM:
		in.kind, in.code = catMergeRefused, replay.Requests[op.RequestID].Code
		o.Input, o.Output = in, catOutput{}
		return o, true
	case op.Status == history.Unknown && op.MergedID != 0:
		o.Return = end
		o.Output = catOutput{version: op.Version, mergedID: op.MergedID, unknown: true}
		return o, true
	}
	return o, false
}

func stepCatalog(cats *catalogs, s catState, in catInput, out catOutput) (bool, interface{}) {
	switch in.kind {
	case catRead:
		return out.version == s.version && out.hash == s.hash, s
	case catMergeRefused:
		return mergeRefusalFits(cats.get(s), in), s
	case catGetRoute:
		return getRouteFits(cats.get(s), in, out), s
	case catMerge, catAutoMerge:
		if in.expected != nil && *in.expected != s.version {
			return false, s
		}
		next, merged, code := cats.get(s).Merge(in.routeID, in.rightID, in.hlc)
		if code != model.OK || merged.ID != out.mergedID || next.Version != out.version {
			return false, s
		}
		return true, cats.put(next)
	case catRefused:
		// The FSM checks the expected version first, then the split.
		if in.expected != nil && *in.expected != s.version {
			return true, s
		}
		_, _, code := cats.get(s).Split(in.routeID, in.key, 0, true)
		return code != model.OK, s
	}
	if in.expected != nil && *in.expected != s.version {
		return false, s
	}
	// A client's (or a logged manual) split places an operator's boundary;
	// an op step's is the detector's.
	next, children, code := cats.get(s).Split(in.routeID, in.key, in.hlc, in.kind == catSplit)
	if code != model.OK || children[0].ID != out.leftID || children[1].ID != out.rightID || next.Version != out.version {
		return false, s
	}
	return true, cats.put(next)
}

// getRouteFits reports whether a GetRoute's answer is catalog c's: the
// route by that id (or holding that key) as c has it, at c's version; or,
// for a lookup by id, no live route with that id.
func getRouteFits(c *model.Catalog, in catInput, out catOutput) bool {
	var (
		r    model.Route
		live bool
	)
	if in.byKey {
		for _, x := range c.Routes {
			if x.Contains(in.key) {
				r, live = x, true
				break
			}
		}
	} else {
		r, live = c.Route(in.routeID)
	}
	if out.gone {
		return !in.byKey && !live
	}
	return live && out.version == c.Version && r.ID == out.routeID && model.HashRoutes([]model.Route{r}) == out.hash
}

// mergeRefusalFits reports whether a merge refused for code could have
// been refused so at catalog c. The FSM checks, in order, the fence, the
// expected version, the catalog's rules and last the live ops: a version
// mismatch needs another version; a catalog refusal needs the expected
// version (if any) and that refusal from the catalog; a live-op refusal
// needs the expected version and a merge the catalog allows (the live op
// itself is not catalog state). A fence or structural refusal does not
// depend on the catalog.
func mergeRefusalFits(c *model.Catalog, in catInput) bool {
	casOK := in.expected == nil || *in.expected == c.Version
	switch in.code {
	case model.VersionMismatch:
		return !casOK
	case model.RouteNotFound, model.NotAdjacent, model.DifferentGroups, model.MergeRouteNotActive:
		_, _, code := c.Merge(in.routeID, in.rightID, 1)
		return casOK && code == in.code
	case model.RouteInLiveOp:
		_, _, code := c.Merge(in.routeID, in.rightID, 1)
		return casOK && code == model.OK
	}
	return true
}

func describeCatalogOp(input, output interface{}) string {
	in, out := input.(catInput), output.(catOutput)
	exp := ""
	if in.expected != nil {
		exp = fmt.Sprintf(" if v%d", *in.expected)
	}
	switch in.kind {
	case catRead:
		return fmt.Sprintf("read -> v%d %s", out.version, out.hash)
	case catRefused:
		return fmt.Sprintf("split r%d at %q%s -> refused", in.routeID, in.key, exp)
	case catAutoSplit:
		return fmt.Sprintf("op %d step %d: split r%d at %q -> v%d (from the log)", in.opID, in.step, in.routeID, in.key, out.version)
	case catMergeRefused:
		return fmt.Sprintf("merge r%d r%d%s -> refused (%s)", in.routeID, in.rightID, exp, in.code)
	case catGetRoute:
		what := fmt.Sprintf("get r%d", in.routeID)
		if in.byKey {
			what = fmt.Sprintf("get route of %q", in.key)
		}
		if out.gone {
			return what + " -> gone"
		}
		return fmt.Sprintf("%s -> v%d r%d %s", what, out.version, out.routeID, out.hash)
	case catAutoMerge:
		return fmt.Sprintf("op %d: merge r%d r%d -> v%d r%d (from the log)", in.opID, in.routeID, in.rightID, out.version, out.mergedID)
	case catMerge:
		suffix := ""
		if out.unknown {
			suffix = " (outcome unknown to the client, or sent by none; from the log)"
		}
		return fmt.Sprintf("merge r%d r%d%s -> v%d r%d%s", in.routeID, in.rightID, exp, out.version, out.mergedID, suffix)
	}
	suffix := ""
	if out.unknown {
		suffix = " (outcome unknown to the client; from the log)"
	}
	return fmt.Sprintf("split r%d at %q%s -> v%d r%d,r%d%s", in.routeID, in.key, exp, out.version, out.leftID, out.rightID, suffix)
}

func parseHash(s string) (model.Hash, error) {
	var h model.Hash
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != len(h) {
		return h, fmt.Errorf("bad routes hash %q", s)
	}
	copy(h[:], b)
	return h, nil
}

// swState is the porcupine state of the auto-split switch. Every client
// write carries a unique reason, so the reason identifies the write.
type swState struct {
	enabled bool
	reason  string
}

type swInput struct {
	write   bool
	enabled bool
	reason  string
}

// switchHistory builds porcupine's view of the switch: SetEnabled writes
// (applied, or unknown and applied per the log), linearizable Status reads,
// and switch changes in the log that no client sent (a member's start
// flag), which may linearize anywhere.
func switchHistory(ops []history.Op, replay *model.Replay) ([]porcupine.Operation, porcupine.Model) {
	boot := replay.Switches[0]
	init := swState{boot.Enabled, boot.Reason}
	var end int64
	for _, op := range ops {
		end = max(end, op.Return, op.Call)
	}
	end++
	var out []porcupine.Operation
	rids := map[string]bool{}
	reads := map[swState][]porcupine.Operation{}
	var readOrder []swState
	for _, op := range ops {
		switch {
		case op.Kind == history.SetEnabled:
			rids[op.RequestID] = true
			if op.Status == history.OK || (op.Status == history.Unknown && strings.HasPrefix(op.Resolution, "applied")) {
				ret := op.Return
				if op.Status == history.Unknown {
					ret = end
				}
				out = append(out, porcupine.Operation{ClientId: op.Client, Call: op.Call, Return: ret,
					Input: swInput{write: true, enabled: op.Enabled, reason: op.Reason}, Output: swState{}})
			}
		case op.Kind == history.ReadSwitch && op.Status == history.OK:
			st := swState{op.SwitchEnabled, op.SwitchReason}
			if _, seen := reads[st]; !seen {
				readOrder = append(readOrder, st)
			}
			reads[st] = append(reads[st], porcupine.Operation{ClientId: op.Client, Call: op.Call, Return: op.Return,
				Input: swInput{}, Output: st})
		}
	}
	// Client writes carry unique reasons, so switch states do not repeat and
	// the reduction of catalog reads holds here too — except for a state
	// written more than once (e.g. by a member's start flag), whose reads
	// are all kept.
	written := map[swState]int{init: 1}
	for _, o := range out {
		if in := o.Input.(swInput); in.write {
			written[swState{in.enabled, in.reason}]++
		}
	}
	for _, s := range replay.Switches[1:] {
		if s.Applied && !rids[s.RequestID] {
			written[swState{s.Enabled, s.Reason}]++
		}
	}
	for _, st := range readOrder {
		if written[st] > 1 {
			out = append(out, reads[st]...)
		} else {
			out = append(out, extremeReads(reads[st])...)
		}
	}
	maxClient := 0
	for _, op := range ops {
		maxClient = max(maxClient, op.Client)
	}
	for i, s := range replay.Switches[1:] {
		if s.Applied && !rids[s.RequestID] {
			out = append(out, porcupine.Operation{ClientId: maxClient + 1 + i, Call: 0, Return: end,
				Input: swInput{write: true, enabled: s.Enabled, reason: s.Reason}, Output: swState{}})
		}
	}
	m := porcupine.Model{
		Init: func() interface{} { return init },
		Step: func(state, input, output interface{}) (bool, interface{}) {
			in := input.(swInput)
			if in.write {
				return true, swState{in.enabled, in.reason}
			}
			return output.(swState) == state.(swState), state
		},
		DescribeOperation: func(input, output interface{}) string {
			in := input.(swInput)
			if in.write {
				return fmt.Sprintf("set enabled=%v %q", in.enabled, in.reason)
			}
			o := output.(swState)
			return fmt.Sprintf("status -> enabled=%v %q", o.enabled, o.reason)
		},
		DescribeState: func(state interface{}) string {
			s := state.(swState)
			return fmt.Sprintf("enabled=%v %q", s.enabled, s.reason)
		},
	}
	return out, m
}
