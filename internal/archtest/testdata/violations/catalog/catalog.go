// Package catalog breaks the import rule (it may import only the API) and,
// through it, makes every embeddable package that imports it reach raft
// and fsm.
package catalog

import (
	api "github.com/hotsplit/hotsplit/api/hotsplitv1"

	"github.com/hashicorp/raft"

	"github.com/hotsplit/hotsplit/fsm"
)

// Catalog is a stand-in.
type Catalog struct {
	routes []api.Route
	raft   *raft.Raft
	state  *fsm.State
}
