// Package buckets holds the classic histogram buckets that the probe
// histograms (probes) and the block-layer latency histograms
// (collector/blocklatency) share, so the two are comparable bucket by bucket.
// It is a leaf: it imports nothing of the project.
package buckets

// Latency are the classic buckets of every latency histogram, in seconds.
// Every alert threshold (10 ms etcd guidance, 0.5 s / 1 s etcd-mixin) is an
// edge, so histogram_quantile never interpolates across a threshold
// (tools/rulegen TestQuantileThresholdsAreBucketEdges checks).
var Latency = []float64{
	50e-6, 100e-6, 250e-6, 500e-6,
	1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 50e-3,
	0.1, 0.25, 0.5, 1, 2.5, 5, 10,
}
