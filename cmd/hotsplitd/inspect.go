package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/hotsplit/hotsplit/node"
)

// inspect prints what a stopped node's data dir holds, to pick the
// survivor with the most of the log for --forceNewCluster.
func inspect(w io.Writer, dataDir string) error {
	in, err := node.Inspect(dataDir)
	if err != nil {
		return err
	}
	var servers []string
	for _, s := range in.Configuration {
		servers = append(servers, fmt.Sprintf("%s=%s(%s)", s.ID, s.Address, strings.ToLower(s.Suffrage.String())))
	}
	fmt.Fprintf(w, "data dir          %s\n", in.DataDir)
	fmt.Fprintf(w, "cluster id        %s\n", orDash(in.ClusterID))
	fmt.Fprintf(w, "last index        %d (term %d)\n", in.LastIndex, in.LastTerm)
	fmt.Fprintf(w, "current term      %d\n", in.CurrentTerm)
	fmt.Fprintf(w, "snapshot          index %d (term %d)\n", in.SnapshotIndex, in.SnapshotTerm)
	fmt.Fprintf(w, "cluster version   %d\n", in.ClusterVersion)
	fmt.Fprintf(w, "configuration     %s\n", orDash(strings.Join(servers, " ")))
	if in.Recovered != "" {
		fmt.Fprintf(w, "recovered         %s\n", in.Recovered)
	}
	if in.Removed != "" {
		fmt.Fprintf(w, "removed           %s\n", in.Removed)
	}
	return nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
