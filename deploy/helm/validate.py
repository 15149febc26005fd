"""Validates every object of rendered Kubernetes YAML against the API schemas of the given
Kubernetes versions, offline: kubernetes-validate's bundled schemas, strict (a field the API does
not have fails). Unlike the kubernetes-validate command, an object whose kind and apiVersion have
no schema in a version (a misspelt or removed apiVersion) fails too: the command only warns. So
does a null anywhere in an object, which the schemas allow: the API server drops it, so
`emptyDir:` with nothing after it is a volume without a source there (a template's mistake).

    python validate.py --kube-version 1.25.0 --kube-version 1.37.0 rendered.yaml ...
"""
import argparse
import collections
import os
import sys

import kubernetes_validate
import yaml


def nulls(value, path=""):
    """The paths of the null values in value."""
    if value is None:
        yield path or "(top)"
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from nulls(v, f"{path}.{k}" if path else str(k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from nulls(v, f"{path}.{i}")


# The Prometheus Operator's PodMonitor (monitoring.coreos.com/v1) is a custom resource: no
# Kubernetes version has a schema for it. The fields the chart may render, checked strictly the
# same way (the operator's CRD has many more; a name outside these is the template's mistake).
POD_MONITOR = {
    "": {"apiVersion", "kind", "metadata", "spec"},
    "spec": {"selector", "podMetricsEndpoints", "namespaceSelector", "jobLabel"},
    "endpoint": {"port", "path", "interval", "scrapeTimeout", "scheme", "tlsConfig",
                 "honorLabels", "relabelings", "metricRelabelings"},
    "tlsConfig": {"ca", "cert", "keySecret", "serverName", "insecureSkipVerify"},
}


def pod_monitor_problems(o):
    """What is wrong with a rendered PodMonitor, as the operator's CRD would refuse it."""
    problems = [f"unknown field {k}" for k in o if k not in POD_MONITOR[""]]
    spec = o.get("spec") or {}
    problems += [f"unknown field spec.{k}" for k in spec if k not in POD_MONITOR["spec"]]
    if not (spec.get("selector") or {}).get("matchLabels"):
        problems.append("spec.selector.matchLabels is required")
    endpoints = spec.get("podMetricsEndpoints")
    if not isinstance(endpoints, list) or not endpoints:
        problems.append("spec.podMetricsEndpoints must be a non-empty list")
        endpoints = []
    for i, e in enumerate(endpoints):
        problems += [f"unknown field spec.podMetricsEndpoints.{i}.{k}"
                     for k in e if k not in POD_MONITOR["endpoint"]]
        if not isinstance(e.get("port"), str):
            problems.append(f"spec.podMetricsEndpoints.{i}.port must be a port name")
        if e.get("scheme", "http") not in ("http", "https"):
            problems.append(f"spec.podMetricsEndpoints.{i}.scheme must be http or https")
        problems += [f"unknown field spec.podMetricsEndpoints.{i}.tlsConfig.{k}"
                     for k in (e.get("tlsConfig") or {}) if k not in POD_MONITOR["tlsConfig"]]
    return problems


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--kube-version", action="append", required=True)
    parser.add_argument("files", nargs="+")
    args = parser.parse_args()
    failures = 0
    for path in args.files:
        label = os.path.basename(path)
        with open(path, encoding="utf-8") as f:
            objects = [o for o in yaml.safe_load_all(f) if o]
        if not objects:
            print(f"{label}: no object rendered")
            failures += 1
        kinds = collections.Counter(o.get("kind", "?") for o in objects)
        for o in objects:
            for where in nulls(o):
                print(f'{label}: {o.get("kind")}/{o.get("metadata", {}).get("name")}: {where} is '
                      "null (the API server drops it)")
                failures += 1
        for version in args.kube_version:
            for o in objects:
                name = f'{o.get("kind")}/{o.get("metadata", {}).get("name")}'
                if o.get("apiVersion") == "monitoring.coreos.com/v1" and o.get("kind") == "PodMonitor":
                    for problem in pod_monitor_problems(o):
                        print(f"{label}: {name}: {problem}")
                        failures += 1
                    continue
                try:
                    kubernetes_validate.validate(o, version, strict=True)
                except kubernetes_validate.ValidationError as e:
                    where = ".".join(str(p) for p in e.path) or "(top)"
                    print(f"{label}: {name} is not a valid object of Kubernetes {version}: "
                          f"{where}: {e.message}")
                    failures += 1
                except kubernetes_validate.SchemaNotFoundError as e:
                    print(f"{label}: {name}: {e.message}")
                    failures += 1
        summary = ", ".join(f"{n} {k}" for k, n in sorted(kinds.items()))
        print(f"{label}: {len(objects)} objects ({summary}) checked against Kubernetes "
              f"{' and '.join(args.kube_version)}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
