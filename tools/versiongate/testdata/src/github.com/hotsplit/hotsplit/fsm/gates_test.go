package fsm

import "github.com/hotsplit/hotsplit/clusterversion"

// Tests may compare: they pin what the table says.
var _ = []bool{
	clusterversion.HoldBand.Version() == clusterversion.Version2,
	clusterversion.Supported >= 3,
}
