package discoverytest

import (
	"crypto/sha256"
	"encoding/base32"
	"encoding/binary"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
)

// API server identity leases: one coordination.k8s.io/v1 Lease per backend
// in kube-system, shaped as the identity lease controller of kube-apiserver
// keeps them (k8s.io/kubernetes pkg/controlplane/apiserver/server.go, with
// k8s.io/component-helpers' lease controller). They are in every
// backend's answer, as the backends of a real cluster share etcd.

const (
	leaseNamespace = metav1.NamespaceSystem
	// identityLabel is IdentityLeaseComponentLabelKey; its value names the
	// component.
	identityLabel = "apiserver.kubernetes.io/identity"
	identityValue = "kube-apiserver"
	// peerAddressAnnotation is what the peer proxy dials to reach a server.
	peerAddressAnnotation = "kubernetes.io/peer-advertise-address"
	// IdentityLeaseDurationSeconds and IdentityLeaseRenewIntervalPeriod of
	// kube-apiserver.
	leaseDurationSeconds = 3600
	leaseRenewInterval   = 10 * time.Second
)

var leaseResource = schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}

// identityLeaseName is the name of a kube-apiserver's identity lease, its
// API server ID, derived from its hostname as k8s.io/apiserver's
// server.NewConfig derives it: the lowercase, unpadded base32 of the first
// 16 bytes of the SHA-256 of the hostname and "kube-apiserver", each
// prefixed with its length as a big-endian uint16.
func identityLeaseName(hostname string) string {
	var data []byte
	for _, s := range []string{hostname, identityValue} {
		data = binary.BigEndian.AppendUint16(data, uint16(len(s)))
		data = append(data, s...)
	}
	sum := sha256.Sum256(data)
	return "apiserver-" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(sum[:16]))
}

// identityLease is one backend's lease as stored.
type identityLease struct {
	backend *Backend
	name    string
	holder  string // <name>_<uuid>, as the lease controller's holderIdentity
	uid     types.UID
	created time.Time
	rv      uint64
	renewed time.Time // spec.renewTime
	since   time.Time // renewals happen at since + k*leaseRenewInterval
	pinned  bool      // SetLeaseRenewTime: no renewals
	gone    bool      // RemoveLease
}

// leaseStore holds the identity leases of a Server's backends. Its
// resourceVersions come from the objects' counter, as etcd has one for
// every resource. Lock order: leaseStore.mu, then objectStore.mu.
type leaseStore struct {
	objects *objectStore
	changed func() // a lease came or went: peers' merged views change

	mu     sync.Mutex
	leases []*identityLease // in backend order
}

func newLeaseStore(objects *objectStore, changed func()) *leaseStore {
	return &leaseStore{objects: objects, changed: changed}
}

// add creates b's lease, as its server does on start.
func (ls *leaseStore) add(b *Backend) {
	now := time.Now()
	name := identityLeaseName(b.id)
	l := &identityLease{
		backend: b, name: name, holder: name + "_" + string(uuid.NewUUID()), uid: uuid.NewUUID(),
		created: now, rv: ls.objects.write(), renewed: now, since: now,
	}
	ls.mu.Lock()
	ls.leases = append(ls.leases, l)
	ls.mu.Unlock()
}

func (ls *leaseStore) of(b *Backend) *identityLease {
	for _, l := range ls.leases {
		if l.backend == b {
			return l
		}
	}
	panic("discoverytest: a backend without a lease")
}

// renewLocked brings every renewing lease up to its last renewal by now:
// a live server renews every leaseRenewInterval, and each renewal is a
// write with a new resourceVersion.
func (ls *leaseStore) renewLocked(now time.Time) {
	for _, l := range ls.leases {
		if l.gone || l.pinned {
			continue
		}
		due := l.since.Add(now.Sub(l.since).Truncate(leaseRenewInterval))
		if due.After(l.renewed) {
			l.renewed = due
			l.rv = ls.objects.write()
		}
	}
}

// exists reports whether b's lease exists: a server whose lease is gone is
// no peer (the peer proxy builds its peers from the leases it lists).
func (ls *leaseStore) exists(b *Backend) bool {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return !ls.of(b).gone
}

func (ls *leaseStore) setRenewTime(b *Backend, t time.Time) {
	ls.mu.Lock()
	l := ls.of(b)
	came := l.gone
	if came {
		// A new object, as the lease controller creates one; its
		// holderIdentity is the server's, as before.
		l.gone, l.uid, l.created = false, uuid.NewUUID(), time.Now()
	}
	if t.IsZero() {
		now := time.Now()
		l.pinned, l.renewed, l.since = false, now, now
	} else {
		l.pinned, l.renewed = true, t
	}
	l.rv = ls.objects.write()
	ls.mu.Unlock()
	if came {
		ls.changed()
	}
}

func (ls *leaseStore) remove(b *Backend) {
	ls.mu.Lock()
	l := ls.of(b)
	went := !l.gone
	if went {
		l.gone = true
		ls.objects.write() // a deletion is a write too
	}
	ls.mu.Unlock()
	if went {
		ls.changed()
	}
}

// object renders a stored lease as the API serves it.
func (l *identityLease) object() coordinationv1.Lease {
	duration := int32(leaseDurationSeconds)
	lease := coordinationv1.Lease{
		TypeMeta: metav1.TypeMeta{Kind: "Lease", APIVersion: "coordination.k8s.io/v1"},
		ObjectMeta: metav1.ObjectMeta{
			Name:              l.name,
			Namespace:         leaseNamespace,
			UID:               l.uid,
			ResourceVersion:   strconv.FormatUint(l.rv, 10),
			CreationTimestamp: metav1.NewTime(l.created.Truncate(time.Second)),
			Labels: map[string]string{
				identityLabel:            identityValue,
				"kubernetes.io/hostname": l.backend.id,
			},
		},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       &l.holder,
			LeaseDurationSeconds: &duration,
			RenewTime:            &metav1.MicroTime{Time: l.renewed.Truncate(time.Microsecond)},
		},
	}
	if u := l.backend.URL(); u != "" {
		if parsed, err := url.Parse(u); err == nil {
			lease.Annotations = map[string]string{peerAddressAnnotation: parsed.Host}
		}
	}
	return lease
}

// leaseRoute tells whether path is one of the lease paths served, and
// which: a list in one namespace, in every namespace (namespace ""), or
// one lease.
func leaseRoute(path string) (namespace, name string, ok bool) {
	const prefix = "/apis/coordination.k8s.io/v1/"
	rest, found := strings.CutPrefix(path, prefix)
	if !found {
		return "", "", false
	}
	if rest == "leases" {
		return "", "", true
	}
	parts := strings.Split(rest, "/")
	switch {
	case len(parts) == 3 && parts[0] == "namespaces" && parts[1] != "" && parts[2] == "leases":
		return parts[1], "", true
	case len(parts) == 4 && parts[0] == "namespaces" && parts[1] != "" && parts[2] == "leases" && parts[3] != "":
		return parts[1], parts[3], true
	}
	return "", "", false
}

// ServeHTTP answers GET of the identity leases (a list, with label and
// field selectors, or one by name) in JSON, or as metadata only when the
// Accept header asks for it. Other verbs, watch included, get a 405.
func (ls *leaseStore) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	namespace, name, _ := leaseRoute(r.URL.Path)
	switch {
	case r.Method != http.MethodGet:
		writeStatus(w, apierrors.NewMethodNotSupported(leaseResource, strings.ToLower(r.Method)))
		return
	case isWatch(r):
		writeStatus(w, apierrors.NewMethodNotSupported(leaseResource, "watch"))
		return
	}
	ls.mu.Lock()
	ls.renewLocked(time.Now())
	var leases []coordinationv1.Lease
	for _, l := range ls.leases {
		if !l.gone && (namespace == "" || namespace == leaseNamespace) && (name == "" || name == l.name) {
			leases = append(leases, l.object())
		}
	}
	rv := ls.objects.current()
	ls.mu.Unlock()

	if name != "" {
		if len(leases) == 0 {
			writeStatus(w, apierrors.NewNotFound(leaseResource, name))
			return
		}
		if wantsPartial(r.Header.Get("Accept"), "PartialObjectMetadata") {
			writeJSON(w, partialContentType("PartialObjectMetadata"), metav1.PartialObjectMetadata{TypeMeta: partialType, ObjectMeta: leases[0].ObjectMeta})
			return
		}
		writeJSON(w, "application/json", leases[0])
		return
	}

	q := r.URL.Query()
	labelSel, err := labels.Parse(q.Get("labelSelector"))
	if err != nil {
		writeStatus(w, apierrors.NewBadRequest(err.Error()))
		return
	}
	fieldSel, err := fields.ParseSelector(q.Get("fieldSelector"))
	if err != nil {
		writeStatus(w, apierrors.NewBadRequest(err.Error()))
		return
	}
	for _, req := range fieldSel.Requirements() {
		if req.Field != "metadata.name" && req.Field != "metadata.namespace" {
			writeStatus(w, apierrors.NewBadRequest(fmt.Sprintf("field label not supported: %s", req.Field)))
			return
		}
	}
	items := leases[:0]
	for _, l := range leases {
		if labelSel.Matches(labels.Set(l.Labels)) && fieldSel.Matches(fields.Set{"metadata.name": l.Name, "metadata.namespace": l.Namespace}) {
			l.TypeMeta = metav1.TypeMeta{} // a list's items carry no kind, as a real server's
			items = append(items, l)
		}
	}
	meta := metav1.ListMeta{ResourceVersion: strconv.FormatUint(rv, 10)}
	if wantsPartial(r.Header.Get("Accept"), "PartialObjectMetadataList") {
		list := metav1.PartialObjectMetadataList{TypeMeta: partialListType, ListMeta: meta, Items: []metav1.PartialObjectMetadata{}}
		for _, l := range items {
			list.Items = append(list.Items, metav1.PartialObjectMetadata{TypeMeta: partialType, ObjectMeta: l.ObjectMeta})
		}
		writeJSON(w, partialContentType("PartialObjectMetadataList"), list)
		return
	}
	writeJSON(w, "application/json", coordinationv1.LeaseList{
		TypeMeta: metav1.TypeMeta{Kind: "LeaseList", APIVersion: "coordination.k8s.io/v1"},
		ListMeta: meta,
		Items:    append([]coordinationv1.Lease{}, items...),
	})
}

// LeaseName returns the name of the backend's identity lease in
// kube-system, which is also its API server ID (the key of its resources
// in its peers' merged discovery). It is derived from the backend's ID, its
// hostname, as a kube-apiserver derives it: for ID kas-0 it is
// apiserver-e2urur7kithhwevxgqmtxzakr4.
func (b *Backend) LeaseName() string { return identityLeaseName(b.id) }

// SetLeaseRenewTime sets spec.renewTime of the backend's identity lease to
// t and stops its renewals, as if its server had stopped at t: a lease
// counts as alive while renewTime plus leaseDurationSeconds (3600) is in
// the future, so a t more than an hour ago makes the backend look dead.
// The zero time makes the lease renewed now and every 10 s after, as by a
// live server (the default). Either brings back a lease taken away by
// RemoveLease, as the lease controller of a server still running would: a
// new object (another uid) with the same holderIdentity. The backend goes
// on serving either way, and with WithPeerAggregation its peers go on
// merging its discovery: a real peer proxy forgets a peer when its lease
// is deleted, not when it expires.
func (b *Backend) SetLeaseRenewTime(t time.Time) { b.leases.setRenewTime(b, t) }

// RemoveLease deletes the backend's identity lease, as the lease garbage
// collector of kube-apiserver deletes an expired one (not renewed for an
// hour; it looks every hour). With WithPeerAggregation the backend then drops out of its peers'
// merged discovery, as a real peer proxy forgets a server whose lease is
// deleted; the backend itself goes on serving. SetLeaseRenewTime brings
// the lease back.
func (b *Backend) RemoveLease() { b.leases.remove(b) }
