// Package bbolt stands in for go.etcd.io/bbolt.
package bbolt

// DB is a stand-in.
type DB struct{}
