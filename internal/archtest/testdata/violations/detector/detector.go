// Package detector is clean in the default build.
package detector

// Score is a stand-in.
type Score int
