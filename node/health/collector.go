package health

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
)

// Collector exports quorum and the cluster health as this node sees it
// (hotsplit_cluster_*), computed at scrape time.
func (h *Monitor) Collector() prometheus.Collector { return &clusterCollector{h: h} }

// clusterCollector exports quorum as this node sees it.
type clusterCollector struct{ h *Monitor }

var (
	votersDesc    = prometheus.NewDesc("hotsplit_cluster_voters", "Voters in this node's raft configuration.", nil, nil)
	reachableDesc = prometheus.NewDesc("hotsplit_cluster_voters_reachable", "Voters this node reached within the last probe interval (itself included).", nil, nil)
	quorumDesc    = prometheus.NewDesc("hotsplit_cluster_quorum", "Voters a quorum needs.", nil, nil)
	healthDesc    = prometheus.NewDesc("hotsplit_cluster_health", "1 for the cluster health this node reports (healthy, degraded, no_quorum), 0 for the others.", []string{"status"}, nil)
)

var healthStatuses = []api.HealthStatus{api.HealthStatus_HEALTH_STATUS_HEALTHY, api.HealthStatus_HEALTH_STATUS_DEGRADED, api.HealthStatus_HEALTH_STATUS_NO_QUORUM}

func (c *clusterCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- votersDesc
	ch <- reachableDesc
	ch <- quorumDesc
	ch <- healthDesc
}

func (c *clusterCollector) Collect(ch chan<- prometheus.Metric) {
	r := c.h.Report()
	ch <- prometheus.MustNewConstMetric(votersDesc, prometheus.GaugeValue, float64(r.GetVoters()))
	ch <- prometheus.MustNewConstMetric(reachableDesc, prometheus.GaugeValue, float64(r.GetVotersReachable()))
	ch <- prometheus.MustNewConstMetric(quorumDesc, prometheus.GaugeValue, float64(r.GetQuorum()))
	for _, s := range healthStatuses {
		v := 0.0
		if s == r.GetStatus() {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(healthDesc, prometheus.GaugeValue, v, strings.ToLower(strings.TrimPrefix(s.String(), "HEALTH_STATUS_")))
	}
}
