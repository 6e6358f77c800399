"""Watches the served API's apigroups for as long as it runs, as a Python
controller would (issue 47's soak): list, then watch from the list's
resourceVersion; when the watch ends (its timeout, a cut connection) watch
again from the last resourceVersion seen; on 410 Gone, list again.

usage: served_watch.py KUBECONFIG GROUP VERSION PLURAL WATCH_SECONDS

Prints one JSON object a line:
  {"type": "LIST", "rv": RV, "items": [[name, rv], ...]}  a (re)list
  {"type": "ADDED"|"MODIFIED"|"DELETED", "name": N, "rv": RV}
  {"type": "REWATCH", "rv": RV, "why": ...}               a watch ended
"""
import json
import sys
import time

from kubernetes import client, config, watch


def out(**kw):
    print(json.dumps(kw), flush=True)


def main():
    kubeconfig, group, version, plural, seconds = sys.argv[1:6]
    config.load_kube_config(config_file=kubeconfig)
    api = client.CustomObjectsApi()
    rv = None
    while True:
        if rv is None:
            try:
                l = api.list_cluster_custom_object(group, version, plural, _request_timeout=10)
            except Exception as e:  # the server away: try again
                out(type="REWATCH", rv="", why="list: %s" % type(e).__name__)
                time.sleep(0.5)
                continue
            rv = l["metadata"]["resourceVersion"]
            out(type="LIST", rv=rv, items=[[o["metadata"]["name"], o["metadata"]["resourceVersion"]] for o in l["items"]])
        w = watch.Watch()
        why = "ended"
        try:
            for e in w.stream(api.list_cluster_custom_object, group, version, plural,
                              resource_version=rv, timeout_seconds=int(seconds)):
                meta = e["object"]["metadata"]
                rv = meta["resourceVersion"]
                out(type=e["type"], name=meta["name"], rv=rv)
        except client.rest.ApiException as e:
            if e.status == 410:
                rv = None
            why = "status %s" % e.status
        except Exception as e:  # a cut connection
            why = type(e).__name__
            time.sleep(0.5)
        out(type="REWATCH", rv=rv or "", why=why)


if __name__ == "__main__":
    sys.exit(main())
