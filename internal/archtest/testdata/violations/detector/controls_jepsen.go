//go:build jepsen

// The jepsen build of detector imports scheduler, outside its row.
package detector

import (
	_ "github.com/hotsplit/hotsplit/hlc"
	_ "github.com/hotsplit/hotsplit/scheduler"
)
