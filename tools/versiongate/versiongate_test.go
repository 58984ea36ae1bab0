package versiongate_test

import (
	"testing"

	"golang.org/x/tools/go/analysis/analysistest"

	"github.com/hotsplit/hotsplit/tools/versiongate"
)

// TestAnalyzer runs the analyzer over testdata/src: every comparison a
// `want` comment names is reported and nothing else is, in the files that
// may compare (the table, the jepsen model's versions.go), the exempt ones
// (tests, .pb.go) and the rest.
func TestAnalyzer(t *testing.T) {
	analysistest.Run(t, analysistest.TestData(), versiongate.Analyzer,
		"github.com/hotsplit/hotsplit/clusterversion",
		"github.com/hotsplit/hotsplit/jepsen/model",
		"github.com/hotsplit/hotsplit/api/hotsplitv1",
		"github.com/hotsplit/hotsplit/fsm",
		"github.com/hotsplit/hotsplit/catalog",
	)
}
