package discoverytest

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/watch"
)

// The CustomResourceDefinition and APIService objects the server lists and
// watches. They are cluster-wide, as in etcd: one store per Server, derived
// from the first backend's content after every change to it, so that what
// the objects say and what discovery serves agree (see watch.go for HTTP).

// resourceType is one of the two resources the store holds.
type resourceType struct {
	group, version, resource, kind string
}

var (
	crdType        = &resourceType{group: "apiextensions.k8s.io", version: "v1", resource: "customresourcedefinitions", kind: "CustomResourceDefinition"}
	apiServiceType = &resourceType{group: "apiregistration.k8s.io", version: "v1", resource: "apiservices", kind: "APIService"}
	objectTypes    = []*resourceType{crdType, apiServiceType}
)

func (t *resourceType) path() string       { return "/apis/" + t.group + "/" + t.version + "/" + t.resource }
func (t *resourceType) apiVersion() string { return t.group + "/" + t.version }

// historySize bounds the events a watch can resume from, as the watch
// cache of a real server is bounded.
const historySize = 1000

// object is one object at one resourceVersion. Once stored it is never
// changed: an update stores a new one.
type object struct {
	typ    *resourceType
	rv     uint64
	meta   metav1.ObjectMeta
	spec   any // crdSpec or apiServiceSpec
	status any // crdStatus or apiServiceStatus
}

// fullObject is an object as JSON, as the API server serves it.
type fullObject struct {
	metav1.TypeMeta `json:",inline"`
	Metadata        metav1.ObjectMeta `json:"metadata"`
	Spec            any               `json:"spec,omitempty"`
	Status          any               `json:"status,omitempty"`
}

func (o *object) full() fullObject {
	return fullObject{
		TypeMeta: metav1.TypeMeta{Kind: o.typ.kind, APIVersion: o.typ.apiVersion()},
		Metadata: o.meta, Spec: o.spec, Status: o.status,
	}
}

func (o *object) partial() metav1.PartialObjectMetadata {
	return metav1.PartialObjectMetadata{TypeMeta: partialType, ObjectMeta: o.meta}
}

var (
	partialType     = metav1.TypeMeta{Kind: "PartialObjectMetadata", APIVersion: "meta.k8s.io/v1"}
	partialListType = metav1.TypeMeta{Kind: "PartialObjectMetadataList", APIVersion: "meta.k8s.io/v1"}
)

// The parts of apiextensions.k8s.io/v1 and apiregistration.k8s.io/v1 the
// fake serves, as JSON. The real types live in modules this one does not
// depend on.
type (
	crdSpec struct {
		Group    string       `json:"group"`
		Names    crdNames     `json:"names"`
		Scope    string       `json:"scope"`
		Versions []crdVersion `json:"versions"`
	}
	crdNames struct {
		Plural     string   `json:"plural"`
		Singular   string   `json:"singular,omitempty"`
		ShortNames []string `json:"shortNames,omitempty"`
		Kind       string   `json:"kind"`
		ListKind   string   `json:"listKind,omitempty"`
		Categories []string `json:"categories,omitempty"`
	}
	crdVersion struct {
		Name         string           `json:"name"`
		Served       bool             `json:"served"`
		Storage      bool             `json:"storage"`
		Schema       *crdValidation   `json:"schema,omitempty"`
		Subresources *crdSubresources `json:"subresources,omitempty"`
	}
	crdValidation struct {
		OpenAPIV3Schema map[string]any `json:"openAPIV3Schema"`
	}
	crdSubresources struct {
		Status *struct{} `json:"status,omitempty"`
		Scale  *crdScale `json:"scale,omitempty"`
	}
	crdScale struct {
		SpecReplicasPath   string `json:"specReplicasPath"`
		StatusReplicasPath string `json:"statusReplicasPath"`
	}
	crdStatus struct {
		Conditions     []condition `json:"conditions"`
		AcceptedNames  crdNames    `json:"acceptedNames"`
		StoredVersions []string    `json:"storedVersions"`
	}
	condition struct {
		Type               string      `json:"type"`
		Status             string      `json:"status"`
		LastTransitionTime metav1.Time `json:"lastTransitionTime"`
		Reason             string      `json:"reason,omitempty"`
		Message            string      `json:"message,omitempty"`
	}
	apiServiceSpec struct {
		Service              *serviceReference `json:"service,omitempty"`
		Group                string            `json:"group,omitempty"`
		Version              string            `json:"version,omitempty"`
		GroupPriorityMinimum int32             `json:"groupPriorityMinimum"`
		VersionPriority      int32             `json:"versionPriority"`
	}
	serviceReference struct {
		Namespace string `json:"namespace"`
		Name      string `json:"name"`
		Port      int32  `json:"port"`
	}
	apiServiceStatus struct {
		Conditions []condition `json:"conditions"`
	}
)

// event is one change, as a watch sends it.
type event struct {
	typ watch.EventType
	obj *object
}

// crdExtras is what a CRD object holds beyond its definition: the fields
// tests change with LabelCRD and TouchCRDStatus.
type crdExtras struct {
	crd       CRD
	labels    map[string]string
	touchedAt metav1.Time // the conditions' lastTransitionTime
}

// pendingChange is an AddCRD or RemoveCRD whose objects changed at once and
// whose discovery change waits for the discovery delay.
type pendingChange struct {
	apply   func(c *content) error // on the objects' view of the content
	backend func(b *Backend) error // on each backend, when due
}

// objectStore holds the objects, their watch history and open watches.
type objectStore struct {
	bookmarkInterval time.Duration

	mu        sync.Mutex
	rv        uint64 // the last resourceVersion handed out
	objects   map[*resourceType]map[string]*object
	extras    map[string]*crdExtras // by CRD name
	pending   []*pendingChange
	history   []event
	compacted uint64 // every event after this resourceVersion is in history
	watchers  map[*watcher]struct{}
	forbidden bool
	stopped   bool // new watches end at once (see StopWatches)
}

func newObjectStore(bookmarkInterval time.Duration, forbidden bool) *objectStore {
	st := &objectStore{
		bookmarkInterval: bookmarkInterval,
		objects:          map[*resourceType]map[string]*object{},
		extras:           map[string]*crdExtras{},
		watchers:         map[*watcher]struct{}{},
		forbidden:        forbidden,
	}
	for _, t := range objectTypes {
		st.objects[t] = map[string]*object{}
	}
	return st
}

// viewLocked is the content as the objects show it: c with the pending
// changes applied. It returns c itself when nothing is pending.
func (st *objectStore) viewLocked(c *content) *content {
	if len(st.pending) == 0 {
		return c
	}
	c = c.clone()
	for _, p := range st.pending {
		_ = p.apply(c) // validated when queued; a later change may have made it moot
	}
	return c
}

// syncLocked makes the objects agree with c, emitting an event per object
// that changed: CRDs first, then APIServices, each in name order.
func (st *objectStore) syncLocked(c *content) {
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	crds := st.objects[crdType]
	for _, name := range slices.Sorted(maps.Keys(c.crds)) {
		crd := c.crds[name]
		old := crds[name]
		ex := st.extras[name]
		if old == nil || ex == nil {
			ex = &crdExtras{touchedAt: now}
			st.extras[name] = ex
		}
		ex.crd = crd
		st.putLocked(crdType, name, old, crdSpecOf(crd), crdStatusOf(ex), ex.labels, false)
	}
	for _, name := range slices.Sorted(maps.Keys(crds)) {
		if _, ok := c.crds[name]; !ok {
			st.deleteLocked(crdType, name)
			delete(st.extras, name)
		}
	}

	services := st.objects[apiServiceType]
	live := map[string]bool{}
	put := func(group string, v apidiscoveryv2.APIVersionDiscovery, groupPriority, versionPriority int32) {
		name := v.Version + "." + group
		live[name] = true
		old := services[name]
		spec := apiServiceSpec{Group: group, Version: v.Version, GroupPriorityMinimum: groupPriority, VersionPriority: versionPriority}
		if old != nil {
			// Priorities are set when an APIService is created; later
			// changes to the order of discovery leave them alone.
			prev := old.spec.(apiServiceSpec)
			spec.GroupPriorityMinimum, spec.VersionPriority = prev.GroupPriorityMinimum, prev.VersionPriority
		}
		stale := v.Freshness == apidiscoveryv2.DiscoveryFreshnessStale
		// A group-version seen stale is served by an aggregated API server
		// (that is what can go stale) and keeps its service when it recovers.
		if stale || (old != nil && old.spec.(apiServiceSpec).Service != nil) {
			spec.Service = &serviceReference{Namespace: "kube-system", Name: serviceName(group), Port: 443}
		}
		cond := condition{Type: "Available", Status: "True", Reason: "Local", Message: "Local APIServices are always available"}
		switch {
		case stale:
			cond = condition{Type: "Available", Status: "False", Reason: "FailedDiscoveryCheck",
				Message: fmt.Sprintf("failing or missing response from https://%s.kube-system.svc:443/apis/%s/%s: bad status from https://%s.kube-system.svc:443/apis/%s/%s: 503",
					spec.Service.Name, group, v.Version, spec.Service.Name, group, v.Version)}
		case spec.Service != nil:
			cond = condition{Type: "Available", Status: "True", Reason: "Passed", Message: "all checks passed"}
		}
		cond.LastTransitionTime = now
		if old != nil {
			if prev := old.status.(apiServiceStatus).Conditions; len(prev) == 1 && prev[0].Status == cond.Status {
				cond.LastTransitionTime = prev[0].LastTransitionTime
			}
		}
		st.putLocked(apiServiceType, name, old, spec, apiServiceStatus{Conditions: []condition{cond}}, nil, false)
	}
	for j, v := range c.core.Versions {
		put("", v, 18000, int32(len(c.core.Versions)-j))
	}
	crdGroups := map[string]bool{}
	for _, crd := range c.crds {
		crdGroups[crd.Group] = true
	}
	for i, g := range c.groups {
		for j, v := range g.Versions {
			if crdGroups[g.Name] {
				// What kube-apiserver's CRD registration controller sets.
				put(g.Name, v, 1000, 100)
				continue
			}
			put(g.Name, v, int32(1000+100*(len(c.groups)-i)), int32(len(g.Versions)-j))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(services)) {
		if !live[name] {
			st.deleteLocked(apiServiceType, name)
		}
	}
}

// serviceName is the Service an aggregated group's APIService points to.
func serviceName(group string) string {
	return strings.ToLower(strings.ReplaceAll(group, ".", "-"))
}

func crdSpecOf(crd CRD) crdSpec {
	spec := crdSpec{Group: crd.Group, Names: crdNamesOf(crd), Scope: "Cluster"}
	if crd.Namespaced {
		spec.Scope = "Namespaced"
	}
	for i, v := range crd.Versions {
		cv := crdVersion{Name: v, Served: true, Storage: i == 0}
		if crd.schemaRevision > 0 { // ChangeSchema's
			cv.Schema = &crdValidation{OpenAPIV3Schema: map[string]any{"type": "object", "description": fmt.Sprintf("revision %d", crd.schemaRevision)}}
		}
		if crd.Status || crd.Scale {
			cv.Subresources = &crdSubresources{}
			if crd.Status {
				cv.Subresources.Status = &struct{}{}
			}
			if crd.Scale {
				cv.Subresources.Scale = &crdScale{SpecReplicasPath: ".spec.replicas", StatusReplicasPath: ".status.replicas"}
			}
		}
		spec.Versions = append(spec.Versions, cv)
	}
	return spec
}

func crdNamesOf(crd CRD) crdNames {
	return crdNames{
		Plural: crd.Plural, Singular: crd.Singular, Kind: crd.Kind, ListKind: crd.Kind + "List",
		ShortNames: slices.Clone(crd.ShortNames), Categories: slices.Clone(crd.Categories),
	}
}

func crdStatusOf(ex *crdExtras) crdStatus {
	return crdStatus{
		Conditions: []condition{
			{Type: "NamesAccepted", Status: "True", LastTransitionTime: ex.touchedAt, Reason: "NoConflicts", Message: "no conflicts found"},
			{Type: "Established", Status: "True", LastTransitionTime: ex.touchedAt, Reason: "InitialNamesAccepted", Message: "the initial names have been accepted"},
		},
		AcceptedNames:  crdNamesOf(ex.crd),
		StoredVersions: slices.Clone(ex.crd.Versions[:1]),
	}
}

// putLocked stores a new version of an object if anything in it changed, or
// always when forced (a status update that rewrites the same values). The
// generation counts changes to the spec only.
func (st *objectStore) putLocked(t *resourceType, name string, old *object, spec, status any, labels map[string]string, forced bool) {
	specChanged := old == nil || !reflect.DeepEqual(old.spec, spec)
	if !forced && !specChanged && reflect.DeepEqual(old.status, status) && maps.Equal(old.meta.Labels, labels) {
		return
	}
	st.rv++
	o := &object{typ: t, rv: st.rv, spec: spec, status: status, meta: metav1.ObjectMeta{
		Name:            name,
		ResourceVersion: strconv.FormatUint(st.rv, 10),
		Labels:          maps.Clone(labels),
	}}
	typ := watch.Modified
	if old == nil {
		typ = watch.Added
		o.meta.UID = uuid.NewUUID()
		o.meta.Generation = 1
		o.meta.CreationTimestamp = metav1.NewTime(time.Now().Truncate(time.Second))
	} else {
		o.meta.UID, o.meta.Generation, o.meta.CreationTimestamp = old.meta.UID, old.meta.Generation, old.meta.CreationTimestamp
		if specChanged {
			o.meta.Generation++
		}
	}
	st.objects[t][name] = o
	st.emitLocked(event{typ: typ, obj: o})
}

// deleteLocked deletes an object; its DELETED event carries the object at
// the resourceVersion of the deletion, as a real server's does.
func (st *objectStore) deleteLocked(t *resourceType, name string) {
	old := st.objects[t][name]
	delete(st.objects[t], name)
	st.rv++
	o := *old
	o.rv = st.rv
	o.meta.ResourceVersion = strconv.FormatUint(st.rv, 10)
	st.emitLocked(event{typ: watch.Deleted, obj: &o})
}

func (st *objectStore) emitLocked(e event) {
	st.history = append(st.history, e)
	if n := len(st.history) - historySize; n > 0 {
		st.compacted = st.history[n-1].obj.rv
		st.history = slices.Delete(st.history, 0, n)
	}
	for w := range st.watchers {
		if w.typ == e.obj.typ {
			w.queue = append(w.queue, e)
			w.wake()
		}
	}
}

// write hands out the resourceVersion of a write to something other than
// the objects here (an identity lease): the counter is etcd's, shared by
// every resource. It emits no event, since no watch here is of that
// resource.
func (st *objectStore) write() uint64 {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.rv++
	return st.rv
}

// current is the resourceVersion of the last write.
func (st *objectStore) current() uint64 {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.rv
}

// compactLocked forgets the history: a watch can resume only from now on.
func (st *objectStore) compactLocked() {
	st.history = nil
	st.compacted = st.rv
}

func (st *objectStore) dropWatchesLocked() {
	for w := range st.watchers {
		close(w.stop)
		delete(st.watchers, w)
	}
}

// syncObjects makes the objects agree with the first backend's content.
// The backend's lock is held throughout, so that concurrent changes reach
// the store in the order they were made.
func (s *Server) syncObjects() {
	b := s.backends[0]
	b.mu.Lock()
	defer b.mu.Unlock()
	s.objects.mu.Lock()
	defer s.objects.mu.Unlock()
	s.objects.syncLocked(s.objects.viewLocked(b.content))
}

// later changes the objects now and discovery after the discovery delay.
// The change is checked against what the objects show, so a bad one errors
// at once; due changes apply in the order they were made.
func (s *Server) later(apply func(c *content) error, backend func(b *Backend) error) error {
	b := s.backends[0]
	b.mu.Lock()
	defer b.mu.Unlock()
	st := s.objects
	st.mu.Lock()
	defer st.mu.Unlock()
	view := st.viewLocked(b.content)
	if view == b.content {
		view = view.clone()
	}
	if err := apply(view); err != nil {
		return err
	}
	p := &pendingChange{apply: apply, backend: backend}
	st.pending = append(st.pending, p)
	st.syncLocked(view)
	time.AfterFunc(s.discoveryDelay, func() { s.applyDue(p) })
	return nil
}

// applyDue applies pending changes to the backends, oldest first, up to
// and including p (unless an earlier call already has).
func (s *Server) applyDue(p *pendingChange) {
	s.applying.Lock()
	defer s.applying.Unlock()
	st := s.objects
	for {
		st.mu.Lock()
		if !slices.Contains(st.pending, p) {
			st.mu.Unlock()
			return
		}
		front := st.pending[0]
		st.mu.Unlock()
		// Errors were reported when the change was made; one that fails
		// now (a CRD removed twice) changes nothing.
		_ = s.each(front.backend)
		st.mu.Lock()
		st.pending = st.pending[1:]
		st.mu.Unlock()
		s.syncObjects()
		if front == p {
			return
		}
	}
}

// updateCRD runs a test's update of a CRD's object under the store's lock.
func (st *objectStore) updateCRD(group, plural string, update func(old *object, ex *crdExtras)) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	name := plural + "." + group
	old, ex := st.objects[crdType][name], st.extras[name]
	if old == nil || ex == nil {
		return fmt.Errorf("discoverytest: no CustomResourceDefinition %q", name)
	}
	update(old, ex)
	return nil
}

// TouchCRDStatus updates a CustomResourceDefinition's status only, as the
// API server's own controllers do: its conditions get a new
// lastTransitionTime, the object a new resourceVersion and a MODIFIED watch
// event, and its generation stays. Discovery does not change.
func (s *Server) TouchCRDStatus(group, plural string) error {
	return s.objects.updateCRD(group, plural, func(old *object, ex *crdExtras) {
		ex.touchedAt = metav1.NewTime(time.Now().Truncate(time.Second))
		s.objects.putLocked(crdType, old.meta.Name, old, old.spec, crdStatusOf(ex), ex.labels, true)
	})
}

// LabelCRD sets (or, with an empty value, removes) a label on a
// CustomResourceDefinition: a metadata-only update with a new
// resourceVersion, a MODIFIED watch event and the same generation.
// Every call is a write, even one that sets a label to the value it has
// (as a client that updates the object would make), so a test can count
// one event per call.
func (s *Server) LabelCRD(group, plural, key, value string) error {
	return s.objects.updateCRD(group, plural, func(old *object, ex *crdExtras) {
		labels := maps.Clone(ex.labels)
		if value == "" {
			delete(labels, key)
		} else {
			if labels == nil {
				labels = map[string]string{}
			}
			labels[key] = value
		}
		ex.labels = labels
		s.objects.putLocked(crdType, old.meta.Name, old, old.spec, old.status, labels, true)
	})
}

// DropWatches ends every open watch of CustomResourceDefinitions and
// APIServices cleanly, as an API server restarting behind a load balancer
// does. A client resumes from the last resourceVersion it saw, without
// listing again, unless the history has been compacted since.
func (s *Server) DropWatches() {
	s.objects.mu.Lock()
	defer s.objects.mu.Unlock()
	s.objects.dropWatchesLocked()
}

// StopWatches ends every open watch and makes each new one end as soon as
// it has started, so that an httptest.Server serving s can be closed: its
// Close waits for every open request, and a client such as a reflector
// opens a new watch as soon as one ends. Start calls it before closing its
// server. Everything else is served as before.
func (s *Server) StopWatches() {
	s.objects.mu.Lock()
	defer s.objects.mu.Unlock()
	s.objects.stopped = true
	s.objects.dropWatchesLocked()
}

// CompactWatchHistory forgets the watch history, as etcd compaction does:
// a watch that resumes from any resourceVersion before now gets a 410
// Expired ERROR event, and the client lists again. Open watches go on.
func (s *Server) CompactWatchHistory() {
	s.objects.mu.Lock()
	defer s.objects.mu.Unlock()
	// The store moves on to a resourceVersion no client has seen, as the
	// writes to other resources that preceded a real compaction would, so
	// that every resume expires while a new list gets a resumable one.
	// Bookmarks carry what a watch has seen, never this one.
	s.objects.rv++
	s.objects.compactLocked()
}

// SetWatchForbidden makes the server refuse (true) or allow (false) LIST
// and WATCH of CustomResourceDefinitions and APIServices with a 403, as
// RBAC refuses a user without those verbs. Refusing ends open watches.
// Default: allowed, unless the server was built WithWatchForbidden.
func (s *Server) SetWatchForbidden(forbidden bool) {
	s.objects.mu.Lock()
	defer s.objects.mu.Unlock()
	s.objects.forbidden = forbidden
	if forbidden {
		s.objects.dropWatchesLocked()
	}
}
