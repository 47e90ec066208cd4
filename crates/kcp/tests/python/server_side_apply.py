"""Server-side apply from the Python client's dynamic client (`server_side_apply`): an apply
that creates, a second manager sharing the object, a conflict (409 naming the owner), a forced
apply, and a dropped field going. Run by the end-to-end test `python_client` with the
kubeconfig to use; prints `ok` when every check held (a failed check raises)."""

import json
import sys

from kubernetes import config, dynamic
from kubernetes.client import api_client
from kubernetes.client.rest import ApiException

client = dynamic.DynamicClient(api_client.ApiClient(configuration=config.load_kube_config(
    config_file=sys.argv[1])))
configmaps = client.resources.get(api_version="v1", kind="ConfigMap")


def configmap(data):
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "applied", "namespace": "default"}, "data": data}


def owners(obj):
    return {e["manager"]: e["fieldsV1"] for e in obj["metadata"]["managedFields"]}


def apply(data, manager, **kwargs):
    return configmaps.server_side_apply(body=configmap(data), field_manager=manager,
                                        **kwargs).to_dict()


created = apply({"a": "1", "b": "1"}, "py-one")
assert created["data"] == {"a": "1", "b": "1"}, created["data"]
shared = apply({"c": "1"}, "py-two")
assert shared["data"] == {"a": "1", "b": "1", "c": "1"}, shared["data"]
assert owners(shared)["py-two"] == {"f:data": {"f:c": {}}}, owners(shared)

try:
    apply({"a": "2"}, "py-two")
    raise AssertionError("a conflicting apply succeeded")
except ApiException as error:
    assert error.status == 409, error.status
    status = json.loads(error.body)
    assert status["details"]["causes"][0]["field"] == ".data.a", status
    assert 'conflict with "py-one"' in status["message"], status["message"]

forced = apply({"a": "2", "c": "1"}, "py-two", force_conflicts=True)
assert forced["data"]["a"] == "2", forced["data"]
dropped = apply({}, "py-one")
assert dropped["data"] == {"a": "2", "c": "1"}, dropped["data"]
print("ok")
