// Package archtest holds the architecture rules of docs/design.md
// ("Packages and imports") as tests over the module's own build graph:
// which of our packages each package may import, that the packages data
// nodes embed reach no raft, bolt or server code at any depth, and that
// the node package stays a wiring package (its size, the length of every
// function under node/). The lint stage of .ci/run runs it.
//
// It is a test-only package: this file is its only non-test file, nothing
// imports it, and it must never gain code that a build links. It reads the
// tree through `go list` and go/parser only (the standard library, so the
// main module's dependencies stay what the product needs); it must not
// load or run the code it checks. Every rule has a negative control: a
// module under testdata/ that breaks it, which the tests require the
// checker to report, so a checker that passes everything fails its tests.
package archtest
