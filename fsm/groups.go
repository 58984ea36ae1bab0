package fsm

import (
	"fmt"
	"sort"
	"strings"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/catalog"
	"github.com/hotsplit/hotsplit/clusterversion"
)

// Shard group limits (docs/design.md#shard-groups). Groups are created by
// operators and capped, so a per-group metric label stays bounded.
const (
	// MaxGroups is the most shard groups a cluster has.
	MaxGroups = 64
	// MaxGroupNameLen is the longest group name.
	MaxGroupNameLen = 64
	// MaxGroupIdentities is the most data-node identities one group has.
	MaxGroupIdentities = 32
	// MaxIdentityLen is the longest identity: a certificate common name.
	MaxIdentityLen = 64
	// DefaultGroupCapacity is a group's capacity when none is given, in
	// weighted ops/min: twenty routes at the default split threshold.
	DefaultGroupCapacity = 1_000_000
	// MaxGroupCapacity bounds a capacity so that sums over every group
	// stay far from overflow.
	MaxGroupCapacity = 1 << 48
)

// Groups are the shard groups by id (cluster version 4, shard_groups;
// empty below it).
func (s *State) Groups() []*api.ShardGroup { return s.groups }

// Group returns the shard group with the given id.
func (s *State) Group(id uint64) (*api.ShardGroup, bool) {
	i, ok := findGroup(s.groups, id)
	if !ok {
		return nil, false
	}
	return s.groups[i], true
}

// NextGroupID is the id the next AddGroup gets.
func (s *State) NextGroupID() uint64 { return s.nextGroupID }

// GroupRouteCounts counts the catalog's routes by group id. It walks the
// whole catalog: for listings and the removal check, not for hot paths.
func (s *State) GroupRouteCounts() map[uint64]uint64 {
	counts := map[uint64]uint64{}
	if s.cat == nil {
		return counts
	}
	s.cat.Ascend(func(r *catalog.RouteDescriptor) bool {
		counts[r.GroupID]++
		return true
	})
	return counts
}

func findGroup(gs []*api.ShardGroup, id uint64) (int, bool) {
	i := sort.Search(len(gs), func(i int) bool { return gs[i].GetGroupId() >= id })
	return i, i < len(gs) && gs[i].GetGroupId() == id
}

// withGroup returns gs with g in its place by id (replacing one of that
// id), leaving gs itself as it was.
func withGroup(gs []*api.ShardGroup, g *api.ShardGroup) []*api.ShardGroup {
	i, found := findGroup(gs, g.GetGroupId())
	out := make([]*api.ShardGroup, 0, len(gs)+1)
	out = append(out, gs[:i]...)
	out = append(out, g)
	if found {
		i++
	}
	return append(out, gs[i:]...)
}

// groupName is the name of a group the system creates (bootstrap, the
// raise to version 4).
func groupName(id uint64) string { return fmt.Sprintf("group-%d", id) }

// validateGroupName: 1..MaxGroupNameLen bytes of [a-z0-9-], starting with
// a letter, so that a name reads the same in a flag, a log and a URL; not
// g and digits, which hotsplitctl reads as a group id.
func validateGroupName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("must be set")
	case len(name) > MaxGroupNameLen:
		return fmt.Errorf("%d bytes exceeds the limit of %d", len(name), MaxGroupNameLen)
	case name[0] < 'a' || name[0] > 'z':
		return fmt.Errorf("%q must start with a lower-case letter", name)
	case name[0] == 'g' && len(name) > 1 && strings.Trim(name[1:], "0123456789") == "":
		return fmt.Errorf("%q reads as a group id (g and digits)", name)
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-') {
			return fmt.Errorf("%q: byte %d (%q) is not one of a-z 0-9 -", name, i, c)
		}
	}
	return nil
}

// validateIdentity: a certificate common name a data node reports as,
// 1..MaxIdentityLen bytes of printable ASCII without space or '/' (a
// reporter id is the identity, or the identity, '/' and a suffix).
func validateIdentity(id string) error {
	switch {
	case id == "":
		return fmt.Errorf("must be set")
	case len(id) > MaxIdentityLen:
		return fmt.Errorf("%d bytes exceeds the limit of %d", len(id), MaxIdentityLen)
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; c <= ' ' || c > '~' || c == '/' {
			return fmt.Errorf("%q: byte %d (%q) is not printable ASCII other than space and /", id, i, c)
		}
	}
	return nil
}

// validateCapacity checks a capacity given by an operator (0 takes the
// default before this is asked).
func validateCapacity(c uint64) error {
	if c == 0 || c > MaxGroupCapacity {
		return fmt.Errorf("%d not in [1, %d] weighted ops/min", c, uint64(MaxGroupCapacity))
	}
	return nil
}

// spreadGroups lists the group of each of n initial routes over count
// groups from first: contiguous runs in key order, their sizes differing
// by at most one.
func spreadGroups(n int, first uint64, count int) []uint64 {
	out := make([]uint64, n)
	for i := range out {
		out[i] = first + uint64(i*count/n)
	}
	return out
}

// checkGroups checks a restored group table: none below ShardGroups; at
// it, at most MaxGroups groups by increasing id below next_group_id, each
// valid as the commands leave it, names and identities unique across
// groups, and a group for every group id the catalog uses.
func checkGroups(p *api.StateSnapshot, cat *catalog.Catalog) error {
	gs := p.GetGroups()
	if !clusterversion.ShardGroups.EnabledAt(p.GetClusterVersion()) {
		if len(gs) != 0 || p.GetNextGroupId() != 0 {
			return fmt.Errorf("groups: %d groups and next_group_id %d at cluster version %d", len(gs), p.GetNextGroupId(), p.GetClusterVersion())
		}
		return nil
	}
	if cat == nil {
		return nil // checkEmpty refused any group already
	}
	if len(gs) > MaxGroups {
		return fmt.Errorf("groups: %d groups, at most %d", len(gs), MaxGroups)
	}
	names := map[string]bool{}
	identities := map[string]bool{}
	for i, g := range gs {
		switch {
		case i > 0 && g.GetGroupId() <= gs[i-1].GetGroupId():
			return fmt.Errorf("groups[%d]: id %d not above %d", i, g.GetGroupId(), gs[i-1].GetGroupId())
		case g.GetGroupId() >= p.GetNextGroupId():
			return fmt.Errorf("groups[%d]: id %d not below next_group_id %d", i, g.GetGroupId(), p.GetNextGroupId())
		case g.GetState() != api.GroupState_GROUP_STATE_ACTIVE && g.GetState() != api.GroupState_GROUP_STATE_DRAINING:
			return fmt.Errorf("groups[%d]: state %v", i, g.GetState())
		case names[g.GetName()]:
			return fmt.Errorf("groups[%d]: name %q repeated", i, g.GetName())
		case len(g.GetIdentities()) > MaxGroupIdentities:
			return fmt.Errorf("groups[%d]: %d identities, at most %d", i, len(g.GetIdentities()), MaxGroupIdentities)
		}
		if err := validateGroupName(g.GetName()); err != nil {
			return fmt.Errorf("groups[%d]: name: %w", i, err)
		}
		if err := validateCapacity(g.GetCapacity()); err != nil {
			return fmt.Errorf("groups[%d]: capacity: %w", i, err)
		}
		names[g.GetName()] = true
		for j, id := range g.GetIdentities() {
			if err := validateIdentity(id); err != nil {
				return fmt.Errorf("groups[%d]: identities[%d]: %w", i, j, err)
			}
			if j > 0 && id <= g.GetIdentities()[j-1] || identities[id] {
				return fmt.Errorf("groups[%d]: identity %q unsorted or repeated", i, id)
			}
			identities[id] = true
		}
	}
	var missing error
	cat.Ascend(func(r *catalog.RouteDescriptor) bool {
		if _, ok := findGroup(gs, r.GroupID); !ok {
			missing = fmt.Errorf("groups: route %d is in group %d, which the table does not have", r.ID, r.GroupID)
			return false
		}
		return true
	})
	return missing
}
