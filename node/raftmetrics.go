package node

import (
	"sync"
	"time"

	gometrics "github.com/hashicorp/go-metrics/compat"
	gmprom "github.com/hashicorp/go-metrics/compat/prometheus"
	"github.com/prometheus/client_golang/prometheus"
)

// raft reports its metrics through the process-global go-metrics sink, so
// they are bridged once per process into a registry of their own that every
// node's /metrics gathers (in --dev, three nodes share one process and so
// one set of raft metrics, labelled by raft where it labels at all).
var (
	raftMetricsOnce sync.Once
	raftRegistry    = prometheus.NewRegistry()
)

func installRaftMetrics() {
	raftMetricsOnce.Do(func() {
		sink, err := gmprom.NewPrometheusSinkFrom(gmprom.PrometheusOpts{Registerer: raftRegistry, Expiration: time.Minute})
		if err != nil {
			return // metrics are an aid; a node without raft metrics still serves
		}
		conf := gometrics.DefaultConfig("hotsplit")
		conf.EnableHostname = false
		conf.EnableRuntimeMetrics = false // the Go collector already exports these
		gometrics.NewGlobal(conf, sink)
	})
}
