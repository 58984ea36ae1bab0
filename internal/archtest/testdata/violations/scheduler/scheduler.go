// Package scheduler imports a leaf, which every package may.
package scheduler

import "github.com/hotsplit/hotsplit/hlc"

// Now is a stand-in.
func Now() int64 { return hlc.Now() }
