// Package keyviz imports only what its row allows, yet reaches raft and
// fsm through catalog.
package keyviz

import "github.com/hotsplit/hotsplit/catalog"

// Sampler is a stand-in.
type Sampler struct{ cat *catalog.Catalog }
