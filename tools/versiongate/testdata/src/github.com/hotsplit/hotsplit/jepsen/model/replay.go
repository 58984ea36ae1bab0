package model

// The model's other files ask versions.go.
func (p *replayer) splits() bool {
	return p.clusterVersion > 1 // want `clusterVersion is a cluster version`
}
