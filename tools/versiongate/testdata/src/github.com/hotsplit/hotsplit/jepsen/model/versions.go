// Package model is a stand-in for the jepsen model: versions.go restates
// the rows it needs and may compare.
package model

func reaches(v, need uint32) bool { return v >= need }

type replayer struct{ clusterVersion uint32 }

func (p *replayer) merges() bool { return p.clusterVersion >= 3 }
