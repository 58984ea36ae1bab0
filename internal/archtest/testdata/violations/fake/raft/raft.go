// Package raft stands in for github.com/hashicorp/raft.
package raft

// Raft is a stand-in.
type Raft struct{}
