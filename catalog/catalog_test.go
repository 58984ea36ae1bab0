package catalog

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// keyGen draws keys from a tiny alphabet so that shared prefixes, 0x00
// suffixes and equal windows are common.
func keyGen(maxLen int) *rapid.Generator[[]byte] {
	return rapid.SliceOfN(rapid.SampledFrom([]byte{0x00, 0x01, 'a', 'b', 0x7f, 0xff}), 0, maxLen)
}

// model is the naive reference: a sorted slice of routes.
type model struct {
	routes []*RouteDescriptor
}

func (m *model) lookup(key []byte) *RouteDescriptor {
	var found *RouteDescriptor
	for _, r := range m.routes {
		if r.Contains(key) {
			if found != nil {
				panic("model: overlapping routes")
			}
			found = r
		}
	}
	return found
}

func routesOf(c *Catalog) []*RouteDescriptor {
	var out []*RouteDescriptor
	c.Ascend(func(r *RouteDescriptor) bool { out = append(out, r); return true })
	return out
}

func TestSplitSequenceProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		splits := rapid.SliceOfNDistinct(keyGen(6).Filter(func(k []byte) bool { return len(k) > 0 }), 0, 4, func(k []byte) string { return string(k) }).Draw(t, "initial")
		sortKeys(splits)
		c, err := New(splits, 7)
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		m := &model{routes: routesOf(c)}
		for i := range rapid.IntRange(0, 60).Draw(t, "splits") {
			// Mostly live ids, sometimes dead or never-used ones.
			var id uint64
			if rapid.IntRange(0, 4).Draw(t, "idKind") == 0 {
				id = rapid.Uint64Range(0, c.NextRouteID()+2).Draw(t, "anyID")
			} else {
				id = m.routes[rapid.IntRange(0, len(m.routes)-1).Draw(t, "idx")].ID
			}
			key := keyGen(8).Draw(t, "key")
			hlc := uint64(1000 + i)
			before := c
			next, children, err := c.Split(id, key, hlc)
			parent, live := c.Route(id)
			valid := live && parent.Contains(key) && !bytes.Equal(key, parent.Start)
			if valid != (err == nil) {
				t.Fatalf("split r%d at %q: valid=%v err=%v", id, key, valid, err)
			}
			if err != nil {
				if !Equal(before, c) {
					t.Fatalf("failed split changed the catalog")
				}
				continue
			}
			if next.Version() != c.Version()+1 || next.NextRouteID() != c.NextRouteID()+2 {
				t.Fatalf("version %d->%d next id %d->%d", c.Version(), next.Version(), c.NextRouteID(), next.NextRouteID())
			}
			if err := next.CheckInvariants(); err != nil {
				t.Fatalf("after split: %v", err)
			}
			// The old version is untouched (persistence).
			if err := c.CheckInvariants(); err != nil || c.Len() != len(m.routes) {
				t.Fatalf("old version damaged: %v", err)
			}
			l, r := children[0], children[1]
			if l.ParentID != id || r.ParentID != id || l.SplitAtHLC != hlc || l.GroupID != parent.GroupID ||
				!bytes.Equal(l.Start, parent.Start) || !bytes.Equal(l.End, key) || !bytes.Equal(r.Start, key) || !bytes.Equal(r.End, parent.End) {
				t.Fatalf("children %v %v of %v at %q", l, r, parent, key)
			}
			var nr []*RouteDescriptor
			for _, x := range m.routes {
				if x.ID == id {
					nr = append(nr, l, r)
				} else {
					nr = append(nr, x)
				}
			}
			m.routes = nr
			c = next
		}
		got := routesOf(c)
		if len(got) != len(m.routes) {
			t.Fatalf("catalog has %d routes, model %d", len(got), len(m.routes))
		}
		for i := range got {
			if !routeEqual(got[i], m.routes[i]) {
				t.Fatalf("route %d: %v vs model %v", i, got[i], m.routes[i])
			}
		}
		for range 50 {
			key := keyGen(10).Draw(t, "probe")
			if got, want := c.Lookup(key), m.lookup(key); got != want {
				t.Fatalf("Lookup(%q) = %v, model %v", key, got, want)
			}
		}
	})
}

func sortKeys(ks [][]byte) {
	for i := 1; i < len(ks); i++ {
		for j := i; j > 0 && bytes.Compare(ks[j-1], ks[j]) > 0; j-- {
			ks[j-1], ks[j] = ks[j], ks[j-1]
		}
	}
}

func TestLayoutProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		start := keyGen(10).Draw(t, "start")
		var end []byte
		if rapid.Bool().Draw(t, "bounded") {
			end = keyGen(12).Filter(func(e []byte) bool { return bytes.Compare(start, e) < 0 }).Draw(t, "end")
		}
		k := rapid.IntRange(-1, MaxBuckets+2).Draw(t, "k")
		l := NewLayout(start, end, k)
		if l.K() < 1 || l.K() > max(min(k, MaxBuckets), 1) {
			t.Fatalf("K() = %d for k %d", l.K(), k)
		}
		if n := BucketCount(start, end, k); n != l.K() {
			t.Fatalf("BucketCount = %d, NewLayout's K() = %d", n, l.K())
		}
		bounds := BucketBoundaries(start, end, k)
		if len(bounds) != l.K()-1 {
			t.Fatalf("%d boundaries for K %d", len(bounds), l.K())
		}
		r := &RouteDescriptor{Start: start, End: end}
		for i, b := range bounds {
			if !r.Contains(b) || bytes.Equal(b, start) {
				t.Fatalf("boundary %d %q not strictly inside [%q, %q)", i, b, start, end)
			}
			if i > 0 && bytes.Compare(bounds[i-1], b) >= 0 {
				t.Fatalf("boundaries not increasing: %q then %q", bounds[i-1], b)
			}
			if got := l.Bucket(b); got != i+1 {
				t.Fatalf("boundary %d %q falls in bucket %d", i, b, got)
			}
		}
		for range 40 {
			key := keyGen(14).Draw(t, "key")
			if !r.Contains(key) {
				continue
			}
			// Exactly one bucket [lower_i, lower_{i+1}) holds key.
			want := 0
			for i, b := range bounds {
				if bytes.Compare(key, b) >= 0 {
					want = i + 1
				}
			}
			if got := l.Bucket(key); got != want {
				t.Fatalf("Bucket(%q) = %d, boundaries say %d (bounds %q)", key, got, want, bounds)
			}
		}
	})
}

func TestLayoutExamples(t *testing.T) {
	tests := []struct {
		name       string
		start, end string
		k          int
		wantK      int
		key        string
		wantBucket int
	}{
		{"whole space 16", "", "", 16, 16, "\x80", 8},
		{"whole space first", "", "", 16, 16, "\x00", 0},
		{"whole space last", "", "", 16, 16, "\xff\xff", 15},
		{"common prefix", "user:0", "user:8", 8, 8, "user:4", 4},
		{"isolated key has one bucket", "hot", "hot\x00", 16, 1, "hot", 0},
		{"narrow span clamps k", "a", "a\x00\x00\x00\x00\x00\x00\x00\x04", 16, 4, "a\x00\x00\x00\x00\x00\x00\x00\x02", 2},
		{"right edge clamped", "a", "b", 4, 4, "a\xff\xff\xff\xff\xff\xff\xff\xff", 3},
		{"rightmost route low half", "m", "", 2, 2, "z", 0},
		{"rightmost route high half", "m", "", 2, 2, "\xf0", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var end []byte
			if tt.end != "" {
				end = []byte(tt.end)
			}
			l := NewLayout([]byte(tt.start), end, tt.k)
			if l.K() != tt.wantK {
				t.Fatalf("K = %d, want %d", l.K(), tt.wantK)
			}
			if got := l.Bucket([]byte(tt.key)); got != tt.wantBucket {
				t.Fatalf("Bucket(%q) = %d, want %d", tt.key, got, tt.wantBucket)
			}
		})
	}
}

func TestSplitEdgeCases(t *testing.T) {
	base, err := New([][]byte{[]byte("m")}, 1)
	if err != nil {
		t.Fatal(err)
	}
	// r1 = ["", "m"), r2 = ["m", +inf)
	long := func(n int) []byte { return []byte(strings.Repeat("z", n)) }
	hot := long(MaxKeyLen)
	tests := []struct {
		name    string
		route   uint64
		key     []byte
		wantErr error
	}{
		{"rightmost route", 2, []byte("z"), nil},
		{"0x00 right after empty start", 1, []byte{0x00}, nil},
		{"key equal to start", 2, []byte("m"), ErrSplitKeyAtBoundary},
		{"empty key at empty start", 1, nil, ErrSplitKeyAtBoundary},
		{"key equal to end", 1, []byte("m"), ErrSplitKeyAtBoundary},
		{"key above end", 1, []byte("n"), ErrSplitKeyOutsideRoute},
		{"key below start", 2, []byte("a"), ErrSplitKeyOutsideRoute},
		{"route 0", 0, []byte("a"), ErrRouteNotFound},
		{"unknown route", 99, []byte("a"), ErrRouteNotFound},
		{"4096-byte data key", 2, hot, nil},
		{"4097-byte boundary H·0x00", 2, append(bytes.Clone(hot), 0x00), nil},
		{"4098 bytes rejected", 2, long(MaxKeyLen + 2), ErrKeyTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			next, children, err := base.Split(tt.route, tt.key, 5)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if err != nil {
				if !strings.Contains(err.Error(), "route") {
					t.Fatalf("error %q does not name the route", err)
				}
				if next != nil || base.Version() != InitialVersion || base.Len() != 2 {
					t.Fatalf("failed split produced a catalog or changed the base")
				}
				return
			}
			if err := next.CheckInvariants(); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(children[1].Start, tt.key) || next.Lookup(tt.key) != children[1] {
				t.Fatalf("key %q not at the start of the right child", tt.key)
			}
		})
	}
}

func TestIsolateKeyWithTwoSplits(t *testing.T) {
	c, _ := New(nil, 1)
	h := []byte(strings.Repeat("h", MaxKeyLen))
	c, ch, err := c.Split(1, h, 10)
	if err != nil {
		t.Fatal(err)
	}
	c, ch2, err := c.Split(ch[1].ID, append(bytes.Clone(h), 0), 11)
	if err != nil {
		t.Fatal(err)
	}
	iso := ch2[0]
	if !bytes.Equal(iso.Start, h) || !bytes.Equal(iso.End, append(bytes.Clone(h), 0)) || c.Lookup(h) != iso {
		t.Fatalf("isolated route %v", iso)
	}
	// Already isolated: no key fits strictly inside.
	for _, k := range [][]byte{h, append(bytes.Clone(h), 0), append(bytes.Clone(h), 0, 0)} {
		if _, _, err := c.Split(iso.ID, k, 12); err == nil {
			t.Fatalf("split of isolated route at %q succeeded", k)
		}
	}
}

func TestNonActiveRejected(t *testing.T) {
	for _, st := range []RouteState{StateWriteFenced, StateMigratingSource, StateMigratingTarget} {
		r := &RouteDescriptor{ID: 1, State: st}
		c, err := build(3, 2, []*RouteDescriptor{r})
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := c.Split(1, []byte("a"), 1); !errors.Is(err, ErrRouteNotActive) || !strings.Contains(err.Error(), st.String()) {
			t.Fatalf("state %v: err = %v", st, err)
		}
	}
}

func TestSplitCAS(t *testing.T) {
	c, _ := New(nil, 1)
	if _, _, err := c.SplitCAS(2, PlacedByOperator, 1, []byte("a"), 1); !errors.Is(err, ErrVersionMismatch) {
		t.Fatalf("stale version: err = %v", err)
	}
	next, ch, err := c.SplitCAS(1, PlacedByOperator, 1, []byte("a"), 1)
	if err != nil || next.Version() != 2 {
		t.Fatalf("CAS at current version: %v", err)
	}
	if ch[0].OperatorStart || !ch[1].OperatorStart {
		t.Fatalf("an operator's CAS split marks %v, %v; want only the right child", ch[0].OperatorStart, ch[1].OperatorStart)
	}
}

func TestNewRejectsBadSplits(t *testing.T) {
	for name, splits := range map[string][][]byte{
		"empty key": {[]byte("a"), {}},
		"unsorted":  {[]byte("b"), []byte("a")},
		"duplicate": {[]byte("a"), []byte("a")},
		"too long":  {[]byte(strings.Repeat("x", MaxBoundaryLen+1))},
	} {
		if _, err := New(splits, 1); !errors.Is(err, ErrInvalidSplits) {
			t.Errorf("%s: err = %v", name, err)
		}
	}
}

func TestInvariantViolationsDetected(t *testing.T) {
	mk := func(id uint64, s, e string) *RouteDescriptor {
		r := &RouteDescriptor{ID: id, Start: []byte(s), State: StateActive}
		if e != "" {
			r.End = []byte(e)
		}
		return r
	}
	cases := map[string]struct {
		next   uint64
		routes []*RouteDescriptor
	}{
		"gap":            {9, []*RouteDescriptor{mk(1, "", "b"), mk(2, "c", "")}},
		"overlap":        {9, []*RouteDescriptor{mk(1, "", "c"), mk(2, "b", "")}},
		"not from empty": {9, []*RouteDescriptor{mk(1, "a", "")}},
		"bounded last":   {9, []*RouteDescriptor{mk(1, "", "z")}},
		"id at next":     {2, []*RouteDescriptor{mk(1, "", "b"), mk(2, "b", "")}},
		"duplicate id":   {9, []*RouteDescriptor{mk(1, "", "b"), mk(1, "b", "")}},
		"start >= end":   {9, []*RouteDescriptor{mk(1, "", "b"), mk(2, "b", "b"), mk(3, "b", "")}},
		"invalid state":  {9, []*RouteDescriptor{{ID: 1, State: 9}}},
		"no routes":      {9, nil},
		"zero id":        {9, []*RouteDescriptor{mk(0, "", "")}},
		"first marked":   {9, []*RouteDescriptor{{ID: 1, State: StateActive, OperatorStart: true}}},
	}
	for name, tc := range cases {
		if _, err := build(1, tc.next, tc.routes); !errors.Is(err, ErrInvariant) {
			t.Errorf("%s: err = %v, want ErrInvariant", name, err)
		}
	}
}

func TestHistory(t *testing.T) {
	h := NewHistory(3, 10)
	if d, ok := h.Since(10); !ok || len(d) != 0 {
		t.Fatalf("empty history at base: %v %v", d, ok)
	}
	if _, ok := h.Since(9); ok {
		t.Fatalf("history below base must ask for a snapshot")
	}
	for v := uint64(11); v <= 15; v++ {
		h = h.Append(Delta{Version: v})
	}
	if h.Len() != 3 || h.Base() != 12 {
		t.Fatalf("len %d base %d, want 3 and 12", h.Len(), h.Base())
	}
	if _, ok := h.Since(11); ok {
		t.Fatalf("version 11 was trimmed")
	}
	d, ok := h.Since(12)
	if !ok || len(d) != 3 || d[0].Version != 13 || d[2].Version != 15 {
		t.Fatalf("Since(12) = %v %v", d, ok)
	}
	if d, ok := h.Since(20); !ok || len(d) != 0 {
		t.Fatalf("Since(future) = %v %v", d, ok)
	}
}

// TestManySplitsProperty drives the persistent indexes through several
// levels (thousands of routes) and compares them with the model, including
// old versions, which must stay intact.
func TestManySplitsProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c, _ := New(nil, 1)
		m := &model{routes: routesOf(c)}
		versions := []*Catalog{c}
		snapshots := [][]*RouteDescriptor{routesOf(c)}
		n := rapid.IntRange(100, 3000).Draw(t, "splits")
		seed := rapid.Uint64().Draw(t, "seed")
		rng := rand.New(rand.NewPCG(seed, 1))
		for i := range n {
			var key []byte
			if rng.IntN(3) == 0 {
				// Shared 8-byte prefixes force the tie path.
				key = append([]byte("sameprefix"), byte(rng.Uint32()), byte(rng.Uint32()))
			} else {
				key = make([]byte, 1+rng.IntN(12))
				for j := range key {
					key[j] = byte(rng.Uint32())
				}
			}
			r := c.Lookup(key)
			if want := m.lookup(key); r != want {
				t.Fatalf("Lookup(%q) = %v, model %v", key, r, want)
			}
			next, ch, err := c.Split(r.ID, key, uint64(i+1))
			if err != nil {
				continue // key at a boundary
			}
			var nr []*RouteDescriptor
			for _, x := range m.routes {
				if x.ID == r.ID {
					nr = append(nr, ch[0], ch[1])
				} else {
					nr = append(nr, x)
				}
			}
			m.routes, c = nr, next
			if i%500 == 0 {
				versions = append(versions, c)
				snapshots = append(snapshots, nr)
			}
		}
		if err := c.CheckInvariants(); err != nil {
			t.Fatal(err)
		}
		for i, v := range versions {
			got := routesOf(v)
			if len(got) != len(snapshots[i]) {
				t.Fatalf("old version %d changed size", i)
			}
			for j := range got {
				if got[j] != snapshots[i][j] {
					t.Fatalf("old version %d changed at %d", i, j)
				}
			}
		}
		// Every route is found by its id and by its start; pagination from
		// any start resumes at that route.
		for i, r := range m.routes {
			if got, ok := c.Route(r.ID); !ok || got != r {
				t.Fatalf("Route(%d) = %v", r.ID, got)
			}
			if c.Lookup(r.Start) != r {
				t.Fatalf("Lookup(start of %v) = %v", r, c.Lookup(r.Start))
			}
			if i%97 == 0 {
				var first *RouteDescriptor
				c.AscendFrom(r.Start, func(x *RouteDescriptor) bool { first = x; return false })
				if first != r {
					t.Fatalf("AscendFrom(%q) starts at %v", r.Start, first)
				}
			}
		}
		again, err := Decode(c.Encode())
		if err != nil || !Equal(c, again) {
			t.Fatalf("round trip: %v", err)
		}
	})
}

func TestEscapeKeyRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		k := rapid.SliceOfN(rapid.Byte(), 0, 40).Draw(t, "key")
		e := EscapeKey(k)
		for _, r := range e {
			if r < 0x20 || r >= 0x7f {
				t.Fatalf("escaped %q holds %q", k, r)
			}
		}
		back, err := strconv.Unquote(`"` + e + `"`)
		if err != nil || back != string(k) {
			t.Fatalf("unquote(%s) = %q, %v; want %q", e, back, err, k)
		}
	})
	if got := FormatKey([]byte("user:1\x00\xc4\xb0")); got != `"user:1\x00\xc4\xb0"` {
		t.Fatalf("FormatKey = %s", got)
	}
}

// TestBucketCountNarrowRoutes: BucketCount agrees with NewLayout on the
// routes its shortcut must not take — those whose first differing bytes
// are adjacent, or whose unbounded start begins with 0xff, and whose span
// may then be under k window values.
func TestBucketCountNarrowRoutes(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		prefix := keyGen(3).Draw(t, "prefix")
		// Runs of 0xff leave the route a few window values wide.
		fill := bytes.Repeat([]byte{0xff}, rapid.IntRange(0, 9).Draw(t, "fill"))
		tail := keyGen(3).Draw(t, "tail")
		k := rapid.IntRange(1, MaxBuckets).Draw(t, "k")
		var start, end []byte
		if rapid.Bool().Draw(t, "bounded") {
			c := rapid.ByteRange(0, 0xfd).Draw(t, "c")
			d := rapid.ByteRange(1, 2).Draw(t, "d")
			start = append(append(append(bytes.Clone(prefix), c), fill...), tail...)
			end = append(append(bytes.Clone(prefix), c+d), tail...)
		} else {
			start = append(append([]byte{0xff}, fill...), tail...)
		}
		if n, want := BucketCount(start, end, k), NewLayout(start, end, k).K(); n != want {
			t.Fatalf("BucketCount(%x, %x, %d) = %d, NewLayout's K() = %d", start, end, k, n, want)
		}
	})
}
