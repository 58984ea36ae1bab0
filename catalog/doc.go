// Package catalog is the route catalog of hotsplit: the set of live routes
// (half-open key ranges, each served by one shard group), its invariants, key
// lookup, the split and merge transitions, the bounded delta history that
// serves watchers, the protobuf snapshot form, and the sub-bucket layout shared
// by the detector and every reporter (docs/design.md#the-catalog and
// docs/design.md#merges).
//
// Everything here is pure: no I/O, no goroutines, no clock, no randomness.
// A *Catalog is an immutable value on a persistent (copy-on-write) B-tree:
// Split and Merge return a new Catalog sharing almost all structure with the
// old one, so taking a snapshot of the catalog is O(1) and readers never
// lock.
// RouteDescriptors handed out are shared and must never be modified.
package catalog
