// Package clusterversion is a stand-in for the feature table: this file
// may compare versions.
package clusterversion

const (
	Version1 = 1
	Version2 = 2
	Version3 = 3
)

// Supported is the highest version this build applies.
const Supported = Version3

// Feature is one gated behaviour.
type Feature int

// The features.
const (
	HoldBand Feature = iota
	AutoMerge
)

var versions = [...]uint32{HoldBand: Version2, AutoMerge: Version3}

// Version is the version that turns f on.
func (f Feature) Version() uint32 { return versions[f] }

// EnabledAt reports whether f is on at version.
func (f Feature) EnabledAt(version uint32) bool { return version >= f.Version() }

// IsVersion reports whether v names a version.
func IsVersion(v uint32) bool { return v >= Version1 }

// Reaches reports whether v runs what needs need.
func Reaches(v, need uint32) bool { return v >= need }

// IsSupported reports whether this build applies v.
func IsSupported(v uint32) bool { return v <= Supported }
