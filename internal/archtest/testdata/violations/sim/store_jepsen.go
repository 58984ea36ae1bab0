//go:build jepsen

// The jepsen build of sim reaches bolt.
package sim

import "go.etcd.io/bbolt"

// DB is a stand-in.
var DB *bbolt.DB
