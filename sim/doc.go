// Package sim is a simulated data plane for hotsplit: N data nodes in one
// process, each a keyviz.Sampler with its keyviz.Reporter, serving a
// generated workload routed by the live catalog. It is what `hotsplitctl sim`,
// `hotsplitd --dev` and the end-to-end tests put load on a cluster with.
//
// Workloads (uniform, zipf, hotrange, hotkey, shift, and the real key
// shapes: narrow, pair, incidental, oscillate) are exact and
// reproducible: the sequence of operations — each one's key and kind — is a
// pure function of the workload's options and the seed, whatever the number of
// nodes, the machine's speed or the catalog's splits. Only which column an
// operation is counted in depends on the wall clock.
//
// sim plays data nodes and nothing else: it imports keyviz, client, catalog,
// the API messages and the standard library, never raft or any server
// package, and it never decides anything a cluster decides (it does not
// split, and it routes only by the catalog the cluster publishes).
package sim
