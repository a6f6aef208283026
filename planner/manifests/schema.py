"""Check Kubernetes and KEDA manifests against their published schemas.

An edge module: it reads schema files. Built-in kinds (Deployment,
StatefulSet, ``autoscaling/v2`` HorizontalPodAutoscaler, ...) are checked
with the JSON schemas that the ``kubernetes-validate`` wheel ships for
Kubernetes :data:`KUBERNETES_VERSION`, in strict mode (a field the API does
not know is an error, as with ``kubectl apply``'s default field
validation). A ``keda.sh/v1alpha1`` ScaledObject is checked with
``jsonschema`` against the ``openAPIV3Schema`` of KEDA's CRD kept in
``planner/manifests/schemas/`` (source, version and licence in the README there),
with unknown fields refused the same way and the CRD's one CEL rule
(``minReplicaCount <= maxReplicaCount``) evaluated by hand.

A kind with no schema here is reported as *not checked*, never as valid.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

import jsonschema
import yaml
from kubernetes_validate import utils as kubernetes_schemas
from referencing import Registry, Resource

from planner.autoscaler.defaults import DEFAULT_HPA_MAX_REPLICAS

__all__ = [
    "KEDA_CRD_SCHEMA_FILE",
    "KUBERNETES_VERSION",
    "SchemaProblem",
    "schema_errors",
    "validate_manifest",
]

KUBERNETES_VERSION = "1.37.0"
"""Kubernetes release whose schemas built-in kinds are checked against."""
KEDA_CRD_SCHEMA_FILE = "keda-scaledobject-v1alpha1.yaml"
_KEDA_KINDS = {("keda.sh/v1alpha1", "ScaledObject"): KEDA_CRD_SCHEMA_FILE}


@dataclass(frozen=True)
class SchemaProblem:
    """One place where a manifest breaks its schema, or a note that it was not checked.

    Attributes
    ----------
    path : str
        Where, as ``spec.triggers[0].metadata.threshold``; ``""`` for the whole document.
    message : str
        What is wrong and what the schema expects.
    checked : bool
        False when no schema was available: ``message`` then says why, and the
        document is neither valid nor invalid.
    source : str
        File (and document) the manifest came from, if given.
    """

    path: str
    message: str
    checked: bool = True
    source: str = ""

    def __str__(self) -> str:
        parts = [part for part in (self.source, self.path) if part]
        return ": ".join([*parts, self.message])


def validate_manifest(document, *, source: str = "", partial: bool = False) -> list[SchemaProblem]:
    """Check one YAML document against the schema of its kind.

    Parameters
    ----------
    document : dict
        The parsed document (``yaml.safe_load``).
    source : str, optional
        File (and document number) quoted in messages.
    partial : bool, optional
        The document is a strategic-merge patch: fields must exist and have
        the right type, but required fields may be left out.

    Returns
    -------
    list of SchemaProblem
        Empty when the document is valid; one problem with ``checked=False``
        when its kind has no schema here.
    """
    if not isinstance(document, Mapping):
        return [
            SchemaProblem("", f"expected a Kubernetes object (a mapping), got {type(document).__name__}", source=source)
        ]
    api_version, kind = document.get("apiVersion"), document.get("kind")
    if not isinstance(api_version, str) or not isinstance(kind, str) or not api_version or not kind:
        return [SchemaProblem("", "expected a Kubernetes object with apiVersion and kind", source=source)]
    validator = _validator(api_version, kind, partial)
    if validator is None:
        return [
            SchemaProblem(
                "",
                f"not checked: no schema for {kind} ({api_version}) "
                f"in Kubernetes {_major_minor(KUBERNETES_VERSION)} or KEDA's CRDs",
                checked=False,
                source=source,
            )
        ]
    problems = [
        SchemaProblem(_path(error.absolute_path), _message(error), source=source)
        for error in sorted(validator.iter_errors(_plain(document)), key=_order)
    ]
    if (api_version, kind) in _KEDA_KINDS:
        problems.extend(_keda_cel_rules(document, source))
    return problems


def schema_errors(document, *, source: str = "", partial: bool = False) -> list[SchemaProblem]:
    """Only the real problems from :func:`validate_manifest` (no "not checked" notes)."""
    return [p for p in validate_manifest(document, source=source, partial=partial) if p.checked]


def _major_minor(version: str) -> str:
    return ".".join(version.split(".")[:2])


@lru_cache(maxsize=64)
def _validator(api_version: str, kind: str, partial: bool):
    if (api_version, kind) in _KEDA_KINDS:
        schema = _strict(_keda_schema(_KEDA_KINDS[(api_version, kind)]))
        registry = Registry()
    else:
        # kubernetes-validate names its files <kind>-<group>-<version>.json, the group cut at its first dot
        group_version = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
        folder = f"kubernetes-json-schema/v{KUBERNETES_VERSION}-local-strict"
        try:
            schema = kubernetes_schemas.schema_contents(
                f"{folder}/{kind.lower()}-{group_version}.json", KUBERNETES_VERSION
            )
        except FileNotFoundError:
            return None
        definitions = kubernetes_schemas.schema_contents(f"{folder}/_definitions.json", KUBERNETES_VERSION)
        registry = Resource.from_contents(definitions) @ (Resource.from_contents(schema) @ Registry())
    validator_class = jsonschema.Draft202012Validator
    if partial:
        validator_class = jsonschema.validators.extend(validator_class, {"required": _no_required})
    return validator_class(schema, registry=registry)


def _no_required(validator, required, instance, schema) -> Iterable:
    return iter(())


@lru_cache(maxsize=4)
def _keda_schema(name: str) -> dict:
    text = resources.files("planner.manifests").joinpath("schemas", name).read_text(encoding="utf-8")
    return yaml.safe_load(text)


def _strict(schema):
    """Refuse fields the schema does not list, as the API server's strict field validation does."""
    schema = copy.deepcopy(schema)

    def walk(node):
        if isinstance(node, dict):
            if (
                node.get("type") == "object"
                and "properties" in node
                and "additionalProperties" not in node
                and not node.get("x-kubernetes-preserve-unknown-fields")
            ):
                node["additionalProperties"] = False
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(schema)
    return schema


def _keda_cel_rules(document, source: str) -> list[SchemaProblem]:
    spec = document.get("spec")
    if not isinstance(spec, Mapping):
        return []
    low, high = (
        spec.get("minReplicaCount"),
        spec.get("maxReplicaCount", DEFAULT_HPA_MAX_REPLICAS),
    )  # the CRD's CEL rule compares with it when unset
    if isinstance(low, int) and isinstance(high, int) and not isinstance(low, bool) and low > high:
        return [
            SchemaProblem(
                "spec.minReplicaCount",
                f"minReplicaCount must be less than or equal to maxReplicaCount ({low} > {high})",
                source=source,
            )
        ]
    return []


def _plain(value):
    """ruamel or PyYAML output as plain dicts and lists, for jsonschema's type checks."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, str):
        return str(value)
    return value


def _path(parts) -> str:
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def _order(error) -> tuple:
    return (_path(error.absolute_path), error.message)


def _message(error) -> str:
    if error.validator == "additionalProperties" and error.validator_value is False:
        extra = sorted(set(error.instance) - set(error.schema.get("properties", {})))
        return f"unknown field{'s' if len(extra) > 1 else ''} {', '.join(map(repr, extra))}"
    if error.validator == "required":
        return error.message.replace("is a required property", "is required")
    if error.validator in ("type", "enum", "minimum", "maximum", "minItems", "minLength", "pattern", "format"):
        return f"{error.message}"
    if error.validator in ("oneOf", "anyOf"):
        return f"{_short(error.instance)} does not match any allowed form"
    return error.message


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
