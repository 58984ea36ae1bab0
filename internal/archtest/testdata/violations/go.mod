// The negative control of every graph rule: a module with the main
// module's path, so the rules' tables apply unchanged, whose packages break
// them. Raft and bolt are stand-ins (fake/), so that go list needs no
// download.
module github.com/hotsplit/hotsplit

go 1.26

require (
	github.com/hashicorp/raft v1.7.2
	go.etcd.io/bbolt v1.5.0
)

replace (
	github.com/hashicorp/raft => ./fake/raft
	go.etcd.io/bbolt => ./fake/bbolt
)
