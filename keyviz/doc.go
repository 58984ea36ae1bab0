// Package keyviz is the load sampler and reporter that data nodes embed
// (docs/design.md#the-load-pipeline). A Sampler counts every client request a node serves — reads,
// writes and bytes per route, weighted counts per sub-bucket of the route's
// catalog.Layout, and a sampled Space-Saving sketch of the heaviest keys —
// into columns cut at step boundaries. A Reporter closes a column at each
// boundary, sends the closed columns to the hotsplit cluster until they are
// acknowledged, adopts the cluster's load config at the next boundary, and
// keeps the sampler's route table current by watching the catalog.
//
// keyviz must stay cheap to embed: it imports catalog, the API messages and
// the standard library (plus Prometheus for optional metrics), and never raft,
// bbolt or any server package. It does not dial anything itself: the caller
// supplies a ReportSender and a RouteSource (a *client.Client satisfies both).
// Observe is on the request path of the data node: its unsampled path takes
// no lock, reads no clock and does not allocate, and a route that several
// cores observe at once gets striped counters, so that they do not take
// turns on it (stripes.go).
package keyviz
