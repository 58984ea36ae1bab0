// Package fsm stands in for the replicated state machine: server code.
package fsm

// State is a stand-in.
type State struct{}
