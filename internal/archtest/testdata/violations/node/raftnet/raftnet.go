// Package raftnet is clean in the default build.
package raftnet
