// The lint tools of .ci/run: the versiongate analyzer and staticcheck.
// They need golang.org/x/tools and honnef.co/go/tools, which the product
// does not, so they live in this module of their own: the main module's
// build graph, and go list ./... at the root, never reach them.
module github.com/hotsplit/hotsplit/tools

go 1.26.0

require golang.org/x/tools v0.52.0

require (
	github.com/BurntSushi/toml v1.4.1-0.20240526193622-a339e1f7089c // indirect
	golang.org/x/exp/typeparams v0.0.0-20231108232855-2478ac86f678 // indirect
	golang.org/x/mod v0.42.0 // indirect
	golang.org/x/sync v0.24.0 // indirect
	honnef.co/go/tools v0.8.2 // indirect
)

tool honnef.co/go/tools/cmd/staticcheck
