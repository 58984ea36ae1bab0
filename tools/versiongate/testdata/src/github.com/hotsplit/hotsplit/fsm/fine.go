package fsm

import (
	"crypto/tls"
	"sort"

	"github.com/hotsplit/hotsplit/clusterversion"
)

// asks shows what code does instead of comparing, and comparisons near a
// version that are not version comparisons, some of which a text search
// would flag (the booleans, crypto/tls's MinVersion): none is reported.
func asks(s *State, f clusterversion.Feature, v, version, other uint32, clusterVersions []uint32, cfg *tls.Config) []bool {
	return []bool{
		f.EnabledAt(s.clusterVersion),
		clusterversion.Reaches(v, f.Version()),
		clusterversion.IsVersion(v) && clusterversion.IsSupported(v),
		f == clusterversion.HoldBand,                  // features, not versions
		len(clusterVersions) > 0,                      // a length
		f.EnabledAt(s.clusterVersion) == (other == 0), // booleans
		version == other,                              // no version named as such on either side
		cfg.MinVersion < tls.VersionTLS13,             // crypto/tls's MinVersion is a TLS version
		sort.Search(len(clusterVersions), func(i int) bool { return f.EnabledAt(clusterVersions[i]) }) < 2,
	}
}
