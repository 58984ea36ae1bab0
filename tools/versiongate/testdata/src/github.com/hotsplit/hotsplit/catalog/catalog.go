// Package catalog has versions of its own: a named constant other than
// clusterversion's is another counter, not a cluster version.
package catalog

// InitialVersion is the catalog's first version.
const InitialVersion = 1

// Catalog is a stand-in.
type Catalog struct{ version uint64 }

const formatVersion = 2

func (c *Catalog) check(expectedVersion uint64, v int) bool {
	return c.version >= InitialVersion && expectedVersion == c.version && v == formatVersion
}
