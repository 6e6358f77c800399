package consistency

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubeatlas/kubeatlas/internal/httpx"
)

// What the cluster tells about its API servers, read through the client's
// URL. The API types are written out here, not imported
// (k8s.io/api/coordination/v1 and friends would do), because a few fields
// are all that is read.

// identityLeases lists the API servers' identity leases, as what each
// says of its server, sorted by hostname and identity.
func (k *checker) identityLeases(ctx context.Context) ([]Server, error) {
	resp, err := k.url.Get(ctx, httpx.Request{Ref: "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases?labelSelector=" + url.QueryEscape("apiserver.kubernetes.io/identity=kube-apiserver"), Accept: "application/json"})
	if err != nil {
		return nil, fmt.Errorf("consistency: identity leases: %w", err)
	}
	var list struct {
		Items []struct {
			Metadata struct {
				Name        string            `json:"name"`
				Labels      map[string]string `json:"labels"`
				Annotations map[string]string `json:"annotations"`
			} `json:"metadata"`
			Spec struct {
				RenewTime            *time.Time `json:"renewTime"`
				LeaseDurationSeconds *int32     `json:"leaseDurationSeconds"`
			} `json:"spec"`
		} `json:"items"`
	}
	if err := json.Unmarshal(resp.Body, &list); err != nil {
		return nil, fmt.Errorf("consistency: identity leases: %w", err)
	}
	now := k.o.clock.Now()
	var out []Server
	for _, it := range list.Items {
		s := Server{Identity: it.Metadata.Name, Hostname: it.Metadata.Labels["kubernetes.io/hostname"], Address: it.Metadata.Annotations["kubernetes.io/peer-advertise-address"]}
		if r, d := it.Spec.RenewTime, it.Spec.LeaseDurationSeconds; r != nil && d != nil {
			s.Alive = now.Before(r.Add(time.Duration(*d) * time.Second))
		}
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b Server) int { return strings.Compare(a.Hostname+a.Identity, b.Hostname+b.Identity) })
	return out, nil
}

// apiServerAddresses reads the kubernetes Service's EndpointSlices in
// default: the addresses (host:port, the https port) that the API servers
// themselves publish, the only ones the check sends the client's
// credentials to. Nil when they cannot be read (403: not the user's to
// read).
func (k *checker) apiServerAddresses(ctx context.Context) []string {
	resp, err := k.url.Get(ctx, httpx.Request{Ref: "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices?labelSelector=" + url.QueryEscape("kubernetes.io/service-name=kubernetes"), Accept: "application/json"})
	if err != nil {
		return nil
	}
	var list struct {
		Items []struct {
			Endpoints []struct {
				Addresses []string `json:"addresses"`
			} `json:"endpoints"`
			Ports []struct {
				Name string `json:"name"`
				Port int    `json:"port"`
			} `json:"ports"`
		} `json:"items"`
	}
	if json.Unmarshal(resp.Body, &list) != nil {
		return nil
	}
	var out []string
	for _, it := range list.Items {
		for _, p := range it.Ports {
			if p.Name != "https" {
				continue
			}
			for _, e := range it.Endpoints {
				for _, a := range e.Addresses {
					out = append(out, normalAddress(net.JoinHostPort(a, fmt.Sprint(p.Port))))
				}
			}
		}
	}
	return out
}

// addEndpointSliceAddresses gives servers without an address one of the
// kubernetes Service's EndpointSlice (apiServers), when exactly one server
// lacks one and exactly one address is not some lease's (an EndpointSlice
// does not say which server an address is).
func addEndpointSliceAddresses(out *Report, apiServers []string) {
	var without []int
	known := map[string]bool{}
	for i, s := range out.Servers {
		if s.Address == "" {
			without = append(without, i)
		} else {
			known[normalAddress(s.Address)] = true
		}
	}
	if len(without) != 1 {
		return
	}
	var unknown []string
	for _, addr := range apiServers {
		if !known[addr] {
			unknown = append(unknown, addr)
		}
	}
	if len(unknown) == 1 {
		out.Servers[without[0]].Address = unknown[0]
	}
}

// storageVersions reads the StorageVersion API, where it is served, and
// lists the resources whose servers encode them in different versions.
func (k *checker) storageVersions(ctx context.Context, out *Report) {
	resp, err := k.url.Get(ctx, httpx.Request{Ref: "/apis/internal.apiserver.k8s.io/v1alpha1/storageversions", Accept: "application/json"})
	if err != nil {
		return // 404: not served (a feature gate); 403: not ours to read
	}
	var list struct {
		Items []struct {
			Metadata struct {
				Name string `json:"name"` // group.resource ("apps.deployments", "pods" for core)
			} `json:"metadata"`
			Status struct {
				StorageVersions []struct {
					APIServerID     string `json:"apiServerID"`
					EncodingVersion string `json:"encodingVersion"`
				} `json:"storageVersions"`
			} `json:"status"`
		} `json:"items"`
	}
	if json.Unmarshal(resp.Body, &list) != nil {
		return
	}
	out.StorageVersionAPI = true
	names := map[string]string{}
	for _, s := range out.Servers {
		if s.Identity != "" {
			names[s.Identity] = s.Name()
		}
	}
	for _, it := range list.Items {
		enc := map[string]string{}
		distinct := map[string]bool{}
		for _, sv := range it.Status.StorageVersions {
			name := names[sv.APIServerID]
			if name == "" {
				name = sv.APIServerID
			}
			enc[name] = sv.EncodingVersion
			distinct[sv.EncodingVersion] = true
		}
		if len(distinct) > 1 {
			out.StorageVersions = append(out.StorageVersions, StorageVersionDisagreement{Resource: storageVersionResource(it.Metadata.Name), Encodings: enc})
		}
	}
}

// storageVersionResource reads a StorageVersion's name, the group and
// the resource joined by a dot, the core group written "core"
// ("apps.deployments", "core.pods").
func storageVersionResource(name string) schema.GroupResource {
	i := strings.LastIndexByte(name, '.')
	if i < 0 {
		return schema.GroupResource{Resource: name}
	}
	group := name[:i]
	if group == "core" {
		group = ""
	}
	return schema.GroupResource{Group: group, Resource: name[i+1:]}
}
