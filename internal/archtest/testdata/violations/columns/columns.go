// Package columns has a row before the real package exists: it is held to
// it as soon as it does.
package columns

import (
	"github.com/hotsplit/hotsplit/fsm"
)

// Column is a stand-in.
type Column struct{ state *fsm.State }
