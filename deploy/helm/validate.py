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
