package discoverytest

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	fieldpath "k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/watch"
)

// LIST, GET and WATCH of the objects in objects.go, as a kube-apiserver
// answers them in JSON: full objects, or metadata only when the Accept
// header asks for PartialObjectMetadata (what client-go's metadata client
// and metadata informers ask for). Protobuf is not served; clients fall
// back to the JSON they also accept.

// initialEventsEnd marks the bookmark that ends a WatchList's initial events.
const initialEventsEnd = "k8s.io/initial-events-end"

// watcher is one open watch.
type watcher struct {
	typ    *resourceType
	queue  []event       // guarded by the store's mutex
	notify chan struct{} // has a value when queue may be non-empty
	stop   chan struct{} // closed to end the watch cleanly
}

// take empties the watcher's queue.
func (w *watcher) take(st *objectStore) []event {
	st.mu.Lock()
	defer st.mu.Unlock()
	q := w.queue
	w.queue = nil
	return q
}

func (w *watcher) wake() {
	select {
	case w.notify <- struct{}{}:
	default:
	}
}

// objectRoute tells whether path is one the store serves, and which.
func objectRoute(path string) (t *resourceType, name string, ok bool) {
	for _, t := range objectTypes {
		if path == t.path() {
			return t, "", true
		}
		if name, ok := strings.CutPrefix(path, t.path()+"/"); ok && name != "" && !strings.Contains(name, "/") {
			return t, name, true
		}
	}
	return nil, "", false
}

// isWatch reads the watch parameter as the API server does: present and
// neither "0" nor "false".
func isWatch(r *http.Request) bool {
	v, ok := r.URL.Query()["watch"]
	return ok && len(v) > 0 && v[0] != "0" && !strings.EqualFold(v[0], "false")
}

// wantsPartial reports whether the Accept header asks for metadata only
// (as=PartialObjectMetadata or PartialObjectMetadataList, as given), taking
// the first media range the server can answer in JSON.
func wantsPartial(accept, as string) bool {
	for _, clause := range strings.Split(accept, ",") {
		mediaType, params, err := mime.ParseMediaType(strings.TrimSpace(clause))
		if err != nil {
			continue
		}
		switch mediaType {
		case "application/json", "*/*", "application/*":
		default:
			continue // protobuf, YAML, CBOR: not served here
		}
		switch params["as"] {
		case "":
			return false
		case as:
			if params["g"] == "meta.k8s.io" && params["v"] == "v1" {
				return true
			}
		}
	}
	return false
}

func partialContentType(as string) string {
	return "application/json;as=" + as + ";g=meta.k8s.io;v=v1"
}

func writeStatus(w http.ResponseWriter, err *apierrors.StatusError) {
	status := err.ErrStatus
	status.TypeMeta = metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}
	body, _ := json.Marshal(status)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(int(status.Code))
	_, _ = w.Write(body)
}

func writeJSON(w http.ResponseWriter, contentType string, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		writeStatus(w, apierrors.NewInternalError(err))
		return
	}
	w.Header().Set("Content-Type", contentType)
	_, _ = w.Write(body)
}

func (st *objectStore) forbiddenError(t *resourceType, verb string) *apierrors.StatusError {
	return apierrors.NewForbidden(schema.GroupResource{Group: t.group, Resource: t.resource}, "",
		//lint:ignore ST1005 the real kube-apiserver's wording, capital included
		fmt.Errorf("User %q cannot %s resource %q in API group %q at the cluster scope", "test", verb, t.resource, t.group))
}

func (st *objectStore) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	t, name, _ := objectRoute(r.URL.Path)
	gr := schema.GroupResource{Group: t.group, Resource: t.resource}
	if r.Method != http.MethodGet {
		writeStatus(w, apierrors.NewMethodNotSupported(gr, strings.ToLower(r.Method)))
		return
	}
	opts, err := listOptions(r.URL.Query())
	if err != nil {
		writeStatus(w, apierrors.NewBadRequest(err.Error()))
		return
	}
	switch {
	case name != "":
		st.serveGet(w, r, t, name)
	case isWatch(r):
		st.serveWatch(w, r, t, opts)
	default:
		st.serveList(w, r, t)
	}
}

// listOptions reads the query parameters a list or watch honours, with the
// API server's rules for booleans: present and neither "0" nor "false".
func listOptions(q url.Values) (metav1.ListOptions, error) {
	flag := func(name string) *bool {
		v, ok := q[name]
		if !ok || len(v) == 0 {
			return nil
		}
		b := v[0] != "0" && !strings.EqualFold(v[0], "false")
		return &b
	}
	opts := metav1.ListOptions{
		ResourceVersion:      q.Get("resourceVersion"),
		ResourceVersionMatch: metav1.ResourceVersionMatch(q.Get("resourceVersionMatch")),
		SendInitialEvents:    flag("sendInitialEvents"),
	}
	if b := flag("allowWatchBookmarks"); b != nil {
		opts.AllowWatchBookmarks = *b
	}
	if v := q.Get("timeoutSeconds"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return opts, fmt.Errorf("invalid timeoutSeconds %q: %w", v, err)
		}
		opts.TimeoutSeconds = &n
	}
	return opts, nil
}

func (st *objectStore) serveGet(w http.ResponseWriter, r *http.Request, t *resourceType, name string) {
	st.mu.Lock()
	o := st.objects[t][name]
	st.mu.Unlock()
	if o == nil {
		writeStatus(w, apierrors.NewNotFound(schema.GroupResource{Group: t.group, Resource: t.resource}, name))
		return
	}
	if wantsPartial(r.Header.Get("Accept"), "PartialObjectMetadata") {
		writeJSON(w, partialContentType("PartialObjectMetadata"), o.partial())
		return
	}
	writeJSON(w, "application/json", o.full())
}

// serveList answers every object at once, whatever limit and continue say:
// a real server may return fewer than the limit too, and clients page only
// while a continue token comes back.
func (st *objectStore) serveList(w http.ResponseWriter, r *http.Request, t *resourceType) {
	st.mu.Lock()
	if st.forbidden && !fromAggregatedAPI(r.Context()) {
		st.mu.Unlock()
		writeStatus(w, st.forbiddenError(t, "list"))
		return
	}
	objs := st.objects[t]
	items := make([]*object, 0, len(objs))
	for _, name := range slices.Sorted(maps.Keys(objs)) {
		items = append(items, objs[name])
	}
	rv := strconv.FormatUint(st.rv, 10)
	st.mu.Unlock()

	if wantsPartial(r.Header.Get("Accept"), "PartialObjectMetadataList") {
		list := metav1.PartialObjectMetadataList{TypeMeta: partialListType, ListMeta: metav1.ListMeta{ResourceVersion: rv}}
		list.Items = make([]metav1.PartialObjectMetadata, 0, len(items))
		for _, o := range items {
			list.Items = append(list.Items, o.partial())
		}
		writeJSON(w, partialContentType("PartialObjectMetadataList"), list)
		return
	}
	list := struct {
		metav1.TypeMeta `json:",inline"`
		Metadata        metav1.ListMeta `json:"metadata"`
		Items           []fullObject    `json:"items"`
	}{
		TypeMeta: metav1.TypeMeta{Kind: t.kind + "List", APIVersion: t.apiVersion()},
		Metadata: metav1.ListMeta{ResourceVersion: rv},
		Items:    make([]fullObject, 0, len(items)),
	}
	for _, o := range items {
		list.Items = append(list.Items, o.full())
	}
	writeJSON(w, "application/json", list)
}

// watchEvent is one line of a JSON watch stream.
type watchEvent struct {
	Type   watch.EventType `json:"type"`
	Object any             `json:"object"`
}

// bookmarkObject is what a BOOKMARK carries: the type and a resourceVersion.
type bookmarkObject struct {
	metav1.TypeMeta `json:",inline"`
	Metadata        metav1.ObjectMeta `json:"metadata"`
}

// serveWatch streams events as newline-delimited JSON, each flushed:
// first the initial events the parameters ask for (every object as ADDED,
// or the history after resourceVersion), then each change as it happens,
// with BOOKMARKs if allowed, until the client leaves, timeoutSeconds pass,
// or the server drops its watches.
func (st *objectStore) serveWatch(w http.ResponseWriter, r *http.Request, t *resourceType, opts metav1.ListOptions) {
	partial := wantsPartial(r.Header.Get("Accept"), "PartialObjectMetadata")
	sendInitial := opts.SendInitialEvents != nil && *opts.SendInitialEvents
	if sendInitial && opts.ResourceVersionMatch != metav1.ResourceVersionMatchNotOlderThan {
		writeStatus(w, apierrors.NewInvalid(schema.GroupKind{Group: "meta.k8s.io", Kind: "ListOptions"}, "", fieldpath.ErrorList{
			fieldpath.Forbidden(fieldpath.NewPath("resourceVersionMatch"), "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"),
		}))
		return
	}
	var from uint64 // resume after this resourceVersion, unless synthetic
	synthetic := sendInitial
	switch opts.ResourceVersion {
	case "", "0":
		synthetic = synthetic || opts.SendInitialEvents == nil
	default:
		rv, err := strconv.ParseUint(opts.ResourceVersion, 10, 64)
		if err != nil {
			writeStatus(w, apierrors.NewBadRequest(fmt.Sprintf("invalid resource version: %q", opts.ResourceVersion)))
			return
		}
		from = rv
	}

	st.mu.Lock()
	if st.forbidden && !fromAggregatedAPI(r.Context()) {
		st.mu.Unlock()
		writeStatus(w, st.forbiddenError(t, "watch"))
		return
	}
	var initial []event
	var expired error
	switch {
	case synthetic:
		for _, name := range slices.Sorted(maps.Keys(st.objects[t])) {
			initial = append(initial, event{typ: watch.Added, obj: st.objects[t][name]})
		}
	case opts.ResourceVersion == "" || opts.ResourceVersion == "0":
		// From now on.
	case from < st.compacted:
		expired = apierrors.NewResourceExpired(fmt.Sprintf("too old resource version: %d (%d)", from, st.compacted))
	case from > st.rv:
		// A version this server never gave (another server's): a real
		// server refuses it too rather than skip what comes between.
		expired = apierrors.NewResourceExpired(fmt.Sprintf("too large resource version: %d, current: %d", from, st.rv))
	default:
		for _, e := range st.history {
			if e.obj.rv > from && e.obj.typ == t {
				initial = append(initial, e)
			}
		}
	}
	startRV := st.rv
	wt := &watcher{typ: t, notify: make(chan struct{}, 1), stop: make(chan struct{})}
	switch {
	case st.stopped:
		close(wt.stop)
	case expired == nil:
		st.watchers[wt] = struct{}{}
	}
	interval := st.bookmarkInterval
	st.mu.Unlock()
	defer func() {
		st.mu.Lock()
		delete(st.watchers, wt)
		st.mu.Unlock()
	}()

	contentType := "application/json"
	if partial {
		contentType = partialContentType("PartialObjectMetadata")
	}
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("Transfer-Encoding", "chunked")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	send := func(typ watch.EventType, obj any) bool {
		line, err := json.Marshal(watchEvent{Type: typ, Object: obj})
		if err != nil {
			return false
		}
		if _, err := w.Write(append(line, '\n')); err != nil {
			return false
		}
		if flusher != nil {
			flusher.Flush()
		}
		return true
	}
	render := func(o *object) any {
		if partial {
			return o.partial()
		}
		return o.full()
	}
	bookmark := func(rv uint64, annotations map[string]string) any {
		meta := metav1.ObjectMeta{ResourceVersion: strconv.FormatUint(rv, 10), Annotations: annotations}
		if partial {
			return metav1.PartialObjectMetadata{TypeMeta: partialType, ObjectMeta: meta}
		}
		return bookmarkObject{TypeMeta: metav1.TypeMeta{Kind: t.kind, APIVersion: t.apiVersion()}, Metadata: meta}
	}

	var statusErr *apierrors.StatusError
	if errors.As(expired, &statusErr) {
		status := statusErr.ErrStatus
		status.TypeMeta = metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}
		send(watch.Error, status)
		return
	}
	// seen is what this watch has delivered up to: its periodic bookmarks
	// carry it, not the store's resourceVersion, which may have moved on
	// past a compaction (see CompactWatchHistory) without an event here.
	seen := startRV
	if !synthetic && from > seen {
		seen = from
	}
	sendEvents := func(events []event) bool {
		for _, e := range events {
			if !send(e.typ, render(e.obj)) {
				return false
			}
			seen = max(seen, e.obj.rv)
		}
		return true
	}
	if !sendEvents(initial) {
		return
	}
	if sendInitial && !send(watch.Bookmark, bookmark(startRV, map[string]string{initialEventsEnd: "true"})) {
		return
	}
	if flusher != nil {
		flusher.Flush() // the status line, even with nothing to send yet
	}

	var ticks <-chan time.Time
	if opts.AllowWatchBookmarks && interval > 0 {
		ticker := time.NewTicker(interval)
		defer ticker.Stop()
		ticks = ticker.C
	}
	var timeout <-chan time.Time
	if opts.TimeoutSeconds != nil && *opts.TimeoutSeconds > 0 {
		timer := time.NewTimer(time.Duration(*opts.TimeoutSeconds) * time.Second)
		defer timer.Stop()
		timeout = timer.C
	}
	for {
		select {
		case <-r.Context().Done():
			return
		case <-wt.stop:
			return
		case <-timeout:
			return
		case <-wt.notify:
			if !sendEvents(wt.take(st)) {
				return
			}
		case <-ticks:
			// Events queued by now go out first, so the bookmark is at
			// least as new as everything sent.
			if !sendEvents(wt.take(st)) || !send(watch.Bookmark, bookmark(seen, nil)) {
				return
			}
		}
	}
}
