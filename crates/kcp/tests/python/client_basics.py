"""The Python Kubernetes client against kcp: typed CRUD with label selectors, strategic merge
and JSON merge patches, optimistic concurrency (409), 404s, a watch, and custom resources
through a CRD. Run by the end-to-end test `python_client` with the kubeconfig to use; prints
`ok` when every check held (a failed check raises)."""

import sys
import time

from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException

config.load_kube_config(config_file=sys.argv[1])
core = client.CoreV1Api()
ns = "python"


def expect_status(status, call):
    try:
        call()
    except ApiException as error:
        assert error.status == status, f"expected {status}, got {error.status}: {error.body}"
        return
    raise AssertionError(f"expected {status}, got success")


core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=ns)))

# Create, read, list by label.
meta = client.V1ObjectMeta(name="one", labels={"app": "py"})
created = core.create_namespaced_config_map(ns, client.V1ConfigMap(metadata=meta, data={"a": "1"}))
assert created.data == {"a": "1"}, created.data
assert created.metadata.uid
read = core.read_namespaced_config_map("one", ns)
assert read.metadata.resource_version == created.metadata.resource_version
listed = core.list_namespaced_config_map(ns, label_selector="app=py")
assert [item.metadata.name for item in listed.items] == ["one"]
assert core.list_namespaced_config_map(ns, label_selector="app=other").items == []

# Patches: strategic merge (the client's default for dicts) and JSON merge.
patched = core.patch_namespaced_config_map("one", ns, {"data": {"b": "2"}})
assert patched.data == {"a": "1", "b": "2"}, patched.data

# Replace with the current version, then with a stale one (409).
patched.data = {"c": "3"}
replaced = core.replace_namespaced_config_map("one", ns, patched)
assert replaced.data == {"c": "3"}, replaced.data
expect_status(409, lambda: core.replace_namespaced_config_map("one", ns, read))
expect_status(404, lambda: core.read_namespaced_config_map("missing", ns))
expect_status(409, lambda: core.create_namespaced_config_map(ns, client.V1ConfigMap(metadata=meta)))

# A watch from the list's resourceVersion sees a new object.
since = core.list_namespaced_config_map(ns).metadata.resource_version
core.create_namespaced_config_map(ns, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="two")))
seen = None
stream = watch.Watch()
for event in stream.stream(core.list_namespaced_config_map, ns, resource_version=since, timeout_seconds=20):
    if event["object"].metadata.name == "two":
        seen = event["type"]
        stream.stop()
        break
assert seen == "ADDED", seen

# Custom resources through a CRD.
crd = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "pythons.example.com"},
    "spec": {
        "group": "example.com",
        "scope": "Namespaced",
        "names": {"plural": "pythons", "singular": "python", "kind": "Python", "listKind": "PythonList"},
        "versions": [{
            "name": "v1", "served": True, "storage": True,
            "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                "spec": {"type": "object", "properties": {"length": {"type": "integer"}}},
            }}},
        }],
    },
}
extensions = client.ApiextensionsV1Api()
extensions.create_custom_resource_definition(crd)
for _ in range(200):
    status = extensions.read_custom_resource_definition("pythons.example.com").status
    if status and any(c.type == "Established" and c.status == "True" for c in status.conditions or []):
        break
    time.sleep(0.05)
else:
    raise AssertionError("the CRD never became Established")
custom = client.CustomObjectsApi()
body = {"apiVersion": "example.com/v1", "kind": "Python", "metadata": {"name": "monty"}, "spec": {"length": 3, "extra": "pruned"}}
made = custom.create_namespaced_custom_object("example.com", "v1", ns, "pythons", body)
assert made["spec"] == {"length": 3}, made["spec"]
merged = custom.patch_namespaced_custom_object("example.com", "v1", ns, "pythons", "monty", {"spec": {"length": 4}})
assert merged["spec"]["length"] == 4, merged
items = custom.list_namespaced_custom_object("example.com", "v1", ns, "pythons")["items"]
assert [item["metadata"]["name"] for item in items] == ["monty"]
expect_status(422, lambda: custom.create_namespaced_custom_object(
    "example.com", "v1", ns, "pythons",
    {"apiVersion": "example.com/v1", "kind": "Python", "metadata": {"name": "bad"}, "spec": {"length": "long"}}))
custom.delete_namespaced_custom_object("example.com", "v1", ns, "pythons", "monty")

core.delete_namespaced_config_map("one", ns)
expect_status(404, lambda: core.read_namespaced_config_map("one", ns))
print("ok")
