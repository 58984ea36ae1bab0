// Package sim is clean in the default build.
package sim

// Plane is a stand-in.
type Plane struct{}
