// Package simlab imports scheduler, as the real simlab does until the
// columns move.
package simlab

import (
	"github.com/hotsplit/hotsplit/scheduler"
)

// Now is a stand-in.
func Now() int64 { return scheduler.Now() }
