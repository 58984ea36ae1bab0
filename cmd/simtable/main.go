// Command simtable runs the simlab comparison suite — every sim workload,
// and the few-keys workloads, under the split rules of cluster versions 2
// and 3 (1 on request), over fixed seeds — and prints one table
// (docs/benchmarks.md has the latest). It is part of the long suite
// (`.ci/run long`); it needs no cluster and no network.
//
//	go run ./cmd/simtable                  # every workload, versions 2 and 3
//	go run ./cmd/simtable -workloads narrow,pair -versions 1,2,3
//	go run ./cmd/simtable -workloads fewkeys-5,fewkeys-5@1,narrow-sparse
//	go run ./cmd/simtable -holdband        # the hold-band comparison
//	go run ./cmd/simtable -merges          # the merge comparison (shift, 6 h)
package main

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hotsplit/hotsplit/simlab"
)

func main() {
	workloads := flag.String("workloads", "", "comma-separated workloads (default: all)")
	versions := flag.String("versions", "2,3", "comma-separated cluster versions whose rules to run")
	minSeeds := flag.Int("min-seeds", 2, "seeds per workload at least")
	holdBand := flag.Bool("holdband", false, "print the hold-band comparison instead")
	merges := flag.Bool("merges", false, "print the merge comparison instead (shift at production settings, every candidate setting, seeds 1..min-seeds)")
	flag.Parse()
	if *merges {
		if err := runMerges(*minSeeds); err != nil {
			fmt.Fprintln(os.Stderr, "simtable:", err)
			os.Exit(1)
		}
		return
	}
	if *holdBand {
		if err := simlab.WriteHoldTable(os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "simtable:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(*workloads, *versions, *minSeeds); err != nil {
		fmt.Fprintln(os.Stderr, "simtable:", err)
		os.Exit(1)
	}
}

func run(workloads, versions string, minSeeds int) error {
	var vs []uint32
	for _, s := range strings.Split(versions, ",") {
		v, err := strconv.ParseUint(strings.TrimSpace(s), 10, 32)
		if err != nil || !slices.Contains(simlab.Versions, uint32(v)) {
			return fmt.Errorf("-versions: %q is not one of %v", s, simlab.Versions)
		}
		vs = append(vs, uint32(v))
	}
	var want []string
	if workloads != "" {
		want = strings.Split(workloads, ",")
	}
	t0 := time.Now()
	var rows []simlab.Row
	cases := append(append(simlab.Suite(), simlab.FewKeysSuite()...), simlab.SparseSuite()...)
	for _, c := range cases {
		if len(want) > 0 && !slices.Contains(want, c.Name) {
			continue
		}
		for _, v := range vs {
			row, err := simlab.RunCase(c, v, minSeeds)
			if err != nil {
				return err
			}
			rows = append(rows, row)
		}
	}
	if len(rows) == 0 {
		return fmt.Errorf("-workloads: none of %q is in the suite", workloads)
	}
	if err := simlab.WriteTable(os.Stdout, rows); err != nil {
		return err
	}
	fmt.Printf("\n%d rows in %v (step %d ms, cooldown %d ms, 3 reporters, 1-in-16 sampling unless @rate)\n",
		len(rows), time.Since(t0).Round(time.Second), simlab.SuiteStepMs, simlab.SuiteCooldownMs)
	return nil
}

// runMerges prints the merge comparison for seeds 1..seeds, one table each.
func runMerges(seeds int) error {
	t0 := time.Now()
	for seed := uint64(1); seed <= uint64(max(seeds, 1)); seed++ {
		var rows []simlab.ShiftRow
		for _, s := range simlab.MergeSettings() {
			r, err := simlab.RunShift(s, simlab.FullShift, seed)
			if err != nil {
				return fmt.Errorf("%s seed %d: %w", s.Name, seed, err)
			}
			rows = append(rows, simlab.ShiftRow{Setting: s, Result: r})
		}
		fmt.Printf("seed %d: ", seed)
		if err := simlab.WriteShiftTable(os.Stdout, rows, simlab.FullShift); err != nil {
			return err
		}
		fmt.Println()
	}
	fmt.Printf("%d seeds in %v\n", max(seeds, 1), time.Since(t0).Round(time.Second))
	return nil
}
