// Package fleet holds discovery, REST mappings and OpenAPI v3 for many
// clusters in one process: GitOps engines, multi-cluster managers, cluster
// proxies, kubeconfig-wide CLIs.
//
// Most clusters of a fleet serve byte-identical API surfaces (the same
// Kubernetes version, the same add-ons). kube-apiserver names each
// discovery document by an ETag that is the SHA-512 of its content, and
// each OpenAPI v3 document by a ?hash= that is the SHA-512 of its JSON, so
// a Fleet keeps what clusters share once:
//
//   - one decoded discovery snapshot per surface (a discovery.Surfaces
//     table every cluster's client is given), and
//     one REST mapper index (restmapper.Indexes): memory grows with the
//     number of distinct surfaces, plus a small constant per cluster;
//   - one copy of each OpenAPI v3 document (openapi3.Documents), fetched
//     from one cluster and verified against its hash;
//   - with WithCacheDir, one copy on disk of each document (discovery's,
//     under its ETag, and OpenAPI's, under its hash), whichever cluster
//     served it; each cluster's own entry says which surface it served.
//
// A cluster that starts cold while the fleet holds its surface costs two
// 304s and no body: its requests are conditional on a held surface. A
// kube-apiserver compares If-None-Match with one ETag exactly, so one
// surface is offered: that of the cluster named by WithLike; else, in a
// Refresh round, the one its server's
// fingerprint names (the size of its OpenAPI v3 root, one request
// answered with one byte, before the two 304s); else the one the most
// clusters serve. The guess is worked out on the round's goroutine before
// the cluster's refresh (which does no work for other clusters), and only
// when the disk cache (WithCacheDir) has no snapshot of the cluster. A wrong
// guess costs what no guess costs (see surfaces.go and probe.go).
//
// Refresh rounds read clusters a bounded number at a time; a cluster that
// fails keeps its last snapshot, backs off, and is reported with a
// *ClusterError; it never delays the others beyond the worker it holds.
// Clusters behind a fleet proxy (https://proxy/k8s/clusters/<id>) keep the
// path prefix in every request, OpenAPI document URLs included.
//
//	f, _ := fleet.New(fleet.WithCacheDir(dir))
//	_, _ = f.AddKubeconfig(kubeconfig, "*")
//	_ = f.Refresh(ctx)
//	if c, ok := f.Cluster("prod-eu"); ok {
//		m := c.Mapper()
//		...
//	}
//
// # Files
//
// fleet.go: [Fleet], its options, Refresh rounds and backoff, Subscribe,
// Stats. cluster.go: [Cluster] and the disk store that keeps discovery and
// OpenAPI documents by content. surfaces.go: the cold-start guess the
// fleet offers through the discovery.Surfaces table its clusters share. probe.go: the fingerprint a cold start takes
// of its server (the size of its OpenAPI v3 root). kubeconfig.go:
// [Fleet.AddKubeconfig].
package fleet
