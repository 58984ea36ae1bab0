// Package fsm holds every shape of inline version gate the rule reports:
// each line with a want comment is one. byName are the gates a version's
// name gives away in the text; byType those only types reveal.
package fsm

import (
	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/clusterversion"
)

// State is a stand-in for the replicated state.
type State struct {
	clusterVersion uint32
	Version        uint32
}

// ClusterVersion is the state's cluster version.
func (s *State) ClusterVersion() uint32 { return s.clusterVersion }

// ClusterVersion as a type: its values are versions whatever their name.
type ClusterVersion uint32

// RulesV2 is a detector rule set named by its version.
const RulesV2 = 2

// Version3 is a version outside the table.
const Version3 = 3

const maxSupportedVersion = 3

func byName(s *State, cmd *api.Command, m *api.Member, st *api.State, v, version, rules uint32) []bool {
	return []bool{
		v >= clusterversion.Version2,                       // want `compared with >= outside the feature table \(clusterversion.Version2 is a version\)`
		clusterversion.Version3 <= v,                       // want `clusterversion.Version3 is a version`
		cmd.GetMinVersion() > v,                            // want `GetMinVersion is a cluster version`
		cmd.MinVersion != 0,                                // want `MinVersion is a cluster version`
		m.GetSupportedVersion() < clusterversion.Supported, // want `GetSupportedVersion is a cluster version`
		s.ClusterVersion() == 3,                            // want `ClusterVersion is a cluster version`
		st.GetClusterVersion() != v,                        // want `GetClusterVersion is a cluster version`
		s.clusterVersion >= v,                              // want `clusterVersion is a cluster version`
		version >= 2,                                       // want `version is a version compared with a literal`
		3 == version+1,                                     // want `version is a version compared with a literal`
		uint64(s.clusterVersion) > uint64(v),               // want `clusterVersion is a cluster version`
		(cmd.GetMinVersion()) > v,                          // want `GetMinVersion is a cluster version`
		rules == RulesV2,                                   // want `RulesV2 is a cluster version`
		v == Version3,                                      // want `Version3 is a cluster version`
		maxSupportedVersion < v,                            // want `maxSupportedVersion is a cluster version`
	}
}

func byType(s *State, f clusterversion.Feature, v, version uint32, cv ClusterVersion) []bool {
	return []bool{
		s.Version == 0,              // want `Version is a version compared with a literal`
		v < f.Version(),             // want `clusterversion's Version is a version`
		cv > 2,                      // want `cv is of type ClusterVersion`
		uint32(version) < uint32(2), // want `version is a version compared with a literal`
	}
}

func switches(cmd *api.Command) int {
	switch cmd.GetMinVersion() {
	case 2: // want `compared by a switch case outside the feature table \(GetMinVersion is a cluster version\)`
		return 2
	case clusterversion.Version3: // want `compared by a switch case`
		return 3
	}
	return 0
}
