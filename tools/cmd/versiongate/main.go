// Command versiongate runs the versiongate analyzer (package
// tools/versiongate) over Go packages, as .ci/run's lint stage does from
// the repository's root:
//
//	versiongate -test=false ./...
//	GOFLAGS=-tags=jepsen versiongate -test=false ./...
//
// It exits non-zero when it reports a comparison. It only wraps the
// analyzer (singlechecker): the rule and its exemptions live there.
package main

import (
	"golang.org/x/tools/go/analysis/singlechecker"

	"github.com/hotsplit/hotsplit/tools/versiongate"
)

func main() { singlechecker.Main(versiongate.Analyzer) }
