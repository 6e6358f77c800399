// Package metaview writes a discovery snapshot in apimachinery's meta/v1
// discovery types (APIGroupList, APIResourceList), exactly as client-go's
// discovery client would have returned them for the same server
// responses. It is what discovery/clientgo answers with, kept apart from
// that package so that restmapper, which needs the conversion but not the
// adapter, does not link client-go's discovery package and, through it,
// client-go's scheme of every built-in API type (about 10 MB of a
// process's memory from package initialisation alone).
//
// # Files
//
//   - metaview.go: [View] and [Of], the conversion.
package metaview
