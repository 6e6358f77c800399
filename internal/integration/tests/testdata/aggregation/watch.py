"""Watches a cluster-scoped custom resource through the kube-apiserver with
the Python kubernetes client's watch, as a non-Go client would.

usage: watch.py KUBECONFIG GROUP VERSION PLURAL RESOURCE_VERSION N

Prints one line per event, "TYPE name resourceVersion", and exits 0 after N
events; exits 1 if the watch ends (timeout) before that.
"""
import sys

from kubernetes import client, config, watch


def main():
    kubeconfig, group, version, plural, rv, n = sys.argv[1:7]
    n = int(n)
    config.load_kube_config(config_file=kubeconfig)
    api = client.CustomObjectsApi()
    seen = 0
    # The test starts from the list's resourceVersion so that events
    # before this process connects are not lost.
    for event in watch.Watch().stream(
        api.list_cluster_custom_object, group, version, plural,
        resource_version=rv, timeout_seconds=60,
    ):
        meta = event["object"]["metadata"]
        print(event["type"], meta["name"], meta["resourceVersion"], flush=True)
        seen += 1
        if seen == n:
            return 0
    print("watch ended after %d of %d events" % (seen, n), file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
