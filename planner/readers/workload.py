"""Read Kubernetes manifests for review: model-server workloads, autoscalers, and where each field sits.

:func:`load_documents` reads a YAML file with PyYAML's safe loader (as
``safe_load_all``, with libyaml when present) and, from ``compose_all``'s node marks, the line of every field, so a
finding can say ``spec.triggers[0].metadata.query`` is on line 26 of the
third document. Helm-rendered output works: empty documents are skipped and
each document keeps the template named by its ``# Source:`` comment.

:func:`workload_from_document` finds every pod spec in a Deployment,
StatefulSet, LeaderWorkerSet, KServe or llm-d template (any mapping with a
``containers`` list) and, in the container that runs vLLM, reads the flags
that matter for autoscaling (``--max-num-seqs``, ``--max-model-len``,
``--tensor-parallel-size``, ``--shutdown-timeout``) from ``command`` and
``args`` as a list, or from a ``sh -c`` / ``bash -c`` script. It also reads
the GPU count, ``terminationGracePeriodSeconds`` (``None`` when unset; the
kubelet then gives 30 s), the preStop hook, the probes and the image.

:func:`read_manifest_set` reads files and folders into a
:class:`ManifestSet`; it refuses, with one line naming the file and
document, a file that is not YAML, a document that is not a Kubernetes
object, and an autoscaler the controllers would reject (a ScaledObject
without triggers, a scalingModifiers formula outside KEDA's arithmetic). A
prometheus-adapter configuration file is recognised and skipped.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from planner.autoscaler.spec import Autoscaler
from planner.errors import PlannerInputError
from planner.readers.manifest import autoscaler_from_document

__all__ = [
    "AUTOSCALER_KINDS",
    "GPU_RESOURCES",
    "WHOLE_PLACEHOLDER",
    "ManifestSet",
    "ModelServer",
    "PreStopHook",
    "Probe",
    "ReadProblem",
    "Workload",
    "YamlDocument",
    "documents_from_text",
    "find_scale_target",
    "format_path",
    "load_documents",
    "manifest_set_from_documents",
    "manifest_set_from_texts",
    "parse_server_args",
    "read_manifest_set",
    "target_in_documents",
    "without_placeholders",
    "workload_from_document",
]

AUTOSCALER_KINDS = ("HorizontalPodAutoscaler", "ScaledObject")
GPU_RESOURCES = ("nvidia.com/gpu", "amd.com/gpu", "gpu.intel.com/i915", "gpu.intel.com/xe", "habana.ai/gaudi")
YAML_SUFFIXES = (".yaml", ".yml")
_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

# Flags read from the vLLM command line; a unique prefix is accepted, as argparse does.
SERVER_FLAGS = (
    "--max-num-seqs",
    "--max-model-len",
    "--tensor-parallel-size",
    "--pipeline-parallel-size",
    "--data-parallel-size",
    "--shutdown-timeout",
    "--max-num-batched-tokens",
    "--gpu-memory-utilization",
    "--model",
    "--served-model-name",
    "--port",
)
_SHORT_FLAGS = {"-tp": "--tensor-parallel-size", "-pp": "--pipeline-parallel-size", "-dp": "--data-parallel-size"}
_SHELLS = re.compile(r"(^|/)(ba|z|da)?sh$")
_VLLM_CALL = re.compile(r"\bvllm\s+serve\b|vllm\.entrypoints|\bvllm\b")


@dataclass(frozen=True)
class YamlDocument:
    """One document of a YAML file, with the line of each field.

    Attributes
    ----------
    source : str
        The file.
    number : int
        1-based position among the file's documents (empty ones count, as ``kubectl`` reports).
    data : Mapping
        The document as ``safe_load_all`` returns it.
    lines : Mapping of tuple to int
        YAML path (keys and list indices) -> 1-based line of that key or item.
    start_line : int
        First line of the document's content.
    template : str
        The Helm template named by a ``# Source:`` comment above it, else ``""``.
    """

    source: str
    number: int
    data: Mapping
    lines: Mapping = field(default_factory=dict, repr=False, compare=False)
    start_line: int = 1
    template: str = ""

    @property
    def kind(self) -> str:
        return str(self.data.get("kind") or "")

    @property
    def name(self) -> str:
        metadata = self.data.get("metadata")
        return str(metadata.get("name") or "") if isinstance(metadata, Mapping) else ""

    @property
    def namespace(self) -> str:
        metadata = self.data.get("metadata")
        return str(metadata.get("namespace") or "") if isinstance(metadata, Mapping) else ""

    def line(self, path: tuple) -> int:
        """Line of ``path``, or of its nearest ancestor present in the file."""
        path = tuple(path)
        while path:
            if path in self.lines:
                return self.lines[path]
            path = path[:-1]
        return self.start_line


def format_path(path: tuple) -> str:
    """``("spec", "triggers", 0, "metadata")`` -> ``spec.triggers[0].metadata``."""
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


@dataclass(frozen=True)
class ReadProblem:
    """A file or document that could not be read, kept so the rest of the run goes on.

    Attributes
    ----------
    source : str
    document : int
        1-based document number (0 when the whole file is unreadable).
    line : int
        1-based line the problem is at, or the document's first line.
    message : str
        One line: what is wrong and what was expected.
    """

    source: str
    document: int
    line: int
    message: str


def load_documents(path: str | Path) -> tuple[YamlDocument, ...]:
    """Every non-empty document of a YAML file, with line numbers.

    Raises
    ------
    PlannerInputError
        The file is not valid YAML, or holds no document.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise PlannerInputError(f"{path}: not a text file (expected YAML)") from None
    return documents_from_text(text, str(path))


def documents_from_text(text: str, source: str) -> tuple[YamlDocument, ...]:
    """Every non-empty document of YAML ``text``; ``source`` names it in errors and findings."""
    try:
        # safe_load_all's loader, in C when PyYAML has libyaml; compose_all for each field's line
        datas = list(yaml.load_all(text, Loader=_SAFE_LOADER))
        nodes = list(yaml.compose_all(text, Loader=_SAFE_LOADER))
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" in document {_document_at(text, mark.line)} at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(error, "problem", None) or str(error).splitlines()[0]
        raise PlannerInputError(f"{source}: not valid YAML{where}: {problem}") from None
    text_lines = text.splitlines()
    documents = []
    for number, (data, node) in enumerate(zip(datas, nodes, strict=True), start=1):
        if data is None:
            continue
        lines: dict[tuple, int] = {}
        _walk_marks(node, (), lines)
        start = node.start_mark.line + 1
        documents.append(YamlDocument(source, number, data, lines, start, _helm_source(text_lines, start)))
    if not documents:
        raise PlannerInputError(f"{source}: no YAML documents found (expected Kubernetes manifests)")
    return tuple(documents)


def _document_at(text: str, line_index: int) -> int:
    """1-based number of the document that holds 0-based line ``line_index``."""
    number, content = 1, False
    for line in text.splitlines()[:line_index]:
        if line.startswith("---"):
            number += 1 if content else 0
            content = False
        elif line.strip() and not line.lstrip().startswith("#"):
            content = True
    return number


def _walk_marks(node, path: tuple, lines: dict) -> None:
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            key = key_node.value
            lines[(*path, key)] = key_node.start_mark.line + 1
            _walk_marks(value_node, (*path, key), lines)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            lines[(*path, index)] = item.start_mark.line + 1
            _walk_marks(item, (*path, index), lines)


def _helm_source(text_lines: list[str], start_line: int) -> str:
    # Helm writes "---" then "# Source: chart/templates/x.yaml" above each rendered document.
    for index in range(start_line - 2, -1, -1):
        line = text_lines[index].strip()
        if line.startswith("# Source:"):
            return line[len("# Source:") :].strip()
        if line.startswith("---"):
            break
    return ""


@dataclass(frozen=True)
class Probe:
    """A readiness, startup or liveness probe.

    Attributes
    ----------
    action : str
        ``httpGet``, ``tcpSocket``, ``exec`` or ``grpc``.
    initial_delay_s, period_s : float
        ``initialDelaySeconds`` (default 0) and ``periodSeconds`` (default 10). [s]
    failure_threshold : int
        ``failureThreshold`` (default 3).
    """

    action: str
    initial_delay_s: float = 0.0
    period_s: float = 10.0
    failure_threshold: int = 3

    @property
    def budget_s(self) -> float:
        """Longest the probe lets a container take before it gives up. [s]"""
        return self.initial_delay_s + self.period_s * self.failure_threshold


@dataclass(frozen=True)
class PreStopHook:
    """``lifecycle.preStop``.

    Attributes
    ----------
    action : str
        ``sleep``, ``exec``, ``httpGet`` or ``tcpSocket``.
    sleep_s : float or None
        How long it holds the pod when it is a plain sleep (``sleep.seconds`` or ``exec: sleep N``). [s]
    drains : bool
        The hook waits for vLLM's running requests to reach zero (it polls ``num_requests_running``).
    """

    action: str
    sleep_s: float | None = None
    drains: bool = False


@dataclass(frozen=True)
class ModelServer:
    """The vLLM container of a pod spec.

    Attributes
    ----------
    container : str
        Container name.
    path : tuple
        YAML path of the container in its document.
    image : str
    flags : Mapping of str to str or None
        vLLM flags as written (``--max-num-seqs`` -> ``"64"``; a bare flag -> ``None``).
    gpus : int or None
        GPUs requested (limits, else requests) of any vendor in :data:`GPU_RESOURCES`. [GPUs]
    gpu_resource : str
        The resource name the GPUs were requested under.
    readiness_probe, startup_probe, liveness_probe : Probe or None
    pre_stop : PreStopHook or None
    """

    container: str
    path: tuple
    image: str = ""
    flags: Mapping = field(default_factory=dict)
    gpus: int | None = None
    gpu_resource: str = ""
    readiness_probe: Probe | None = None
    startup_probe: Probe | None = None
    liveness_probe: Probe | None = None
    pre_stop: PreStopHook | None = None

    def flag_int(self, name: str) -> int | None:
        """A flag's integer value; ``None`` when absent or not a plain number (a template, a variable)."""
        value = self.flags.get(name)
        try:
            return int(str(value))
        except ValueError:
            return None

    @property
    def max_num_seqs(self) -> int | None:
        return self.flag_int("--max-num-seqs")

    @property
    def max_model_len(self) -> int | None:
        return self.flag_int("--max-model-len")

    @property
    def tensor_parallel_size(self) -> int | None:
        return self.flag_int("--tensor-parallel-size")

    @property
    def shutdown_timeout_s(self) -> int | None:
        """``--shutdown-timeout`` [s]; ``None`` when absent or not a number."""
        return self.flag_int("--shutdown-timeout")


@dataclass(frozen=True)
class Workload:
    """A pod template that runs vLLM, with the object that owns it.

    Attributes
    ----------
    kind, name, namespace : str
        Of the owning object (Deployment, StatefulSet, LeaderWorkerSet, ...).
    document : YamlDocument
    pod_path : tuple
        YAML path of the pod spec inside the document.
    termination_grace_period_s : int or None
        ``terminationGracePeriodSeconds``; ``None`` when unset (Kubernetes then uses 30). [s]
    servers : tuple of ModelServer
    """

    kind: str
    name: str
    namespace: str
    document: YamlDocument = field(repr=False)
    pod_path: tuple
    termination_grace_period_s: int | None
    servers: tuple[ModelServer, ...]


def _number(value, default: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return default
    try:
        return float(value)
    except ValueError:
        return default


def _probe(data) -> Probe | None:
    if not isinstance(data, Mapping):
        return None
    action = next((key for key in ("httpGet", "tcpSocket", "exec", "grpc") if key in data), "")
    return Probe(
        action=action,
        initial_delay_s=_number(data.get("initialDelaySeconds"), 0.0),
        period_s=_number(data.get("periodSeconds"), 10.0),
        failure_threshold=int(_number(data.get("failureThreshold"), 3)),
    )


def _pre_stop(container: Mapping) -> PreStopHook | None:
    lifecycle = container.get("lifecycle")
    hook = lifecycle.get("preStop") if isinstance(lifecycle, Mapping) else None
    if not isinstance(hook, Mapping):
        return None
    if isinstance(hook.get("sleep"), Mapping):
        return PreStopHook("sleep", _number(hook["sleep"].get("seconds"), 0.0))
    if isinstance(hook.get("exec"), Mapping):
        command = [str(part) for part in hook["exec"].get("command") or []]
        text = " ".join(command)
        sleep = re.fullmatch(r"\s*(?:\S*/)?sleep\s+(\d+(?:\.\d+)?)\s*", text)
        if sleep is None and len(command) >= 3 and _SHELLS.search(command[0]) and command[1] == "-c":
            sleep = re.fullmatch(r"\s*sleep\s+(\d+(?:\.\d+)?)\s*;?\s*", command[2])
        return PreStopHook("exec", float(sleep.group(1)) if sleep else None, drains="num_requests_running" in text)
    action = next((key for key in ("httpGet", "tcpSocket") if key in hook), "unknown")
    return PreStopHook(action)


def _gpus(container: Mapping) -> tuple[int | None, str]:
    resources = container.get("resources")
    if not isinstance(resources, Mapping):
        return None, ""
    for section in ("limits", "requests"):
        values = resources.get(section)
        if not isinstance(values, Mapping):
            continue
        for name in GPU_RESOURCES:
            if name in values:
                count = _number(values[name], -1)
                return (int(count) if count >= 0 else None), name
    return None, ""


def _canonical_flag(flag: str) -> str:
    flag = _SHORT_FLAGS.get(flag, flag)
    if not flag.startswith("--"):
        return flag
    flag = "--" + flag[2:].replace("_", "-")
    if flag in SERVER_FLAGS:
        return flag
    matches = [known for known in SERVER_FLAGS if known.startswith(flag)]
    return matches[0] if len(matches) == 1 else flag


def parse_server_args(tokens: list[str]) -> dict[str, str | None]:
    """vLLM flags from a command line given as a list (``--x 1``, ``--x=1``, bare ``--flag``).

    Examples
    --------
    >>> parse_server_args(["vllm", "serve", "m", "--max-num-seqs", "64", "--max_model_len=4096", "--enforce-eager"])
    {'--max-num-seqs': '64', '--max-model-len': '4096', '--enforce-eager': None}
    """
    flags: dict[str, str | None] = {}
    index = 0
    while index < len(tokens):
        token = tokens[index]
        if token == "-m":  # python -m vllm.entrypoints...: the module, not a server flag
            index += 2
            continue
        if token.startswith("-") and len(token) > 1 and token != "--" and not _is_number(token):
            if "=" in token and token.startswith("--"):
                name, value = token.split("=", 1)
                flags[_canonical_flag(name)] = value
            elif index + 1 < len(tokens) and (not tokens[index + 1].startswith("-") or _is_number(tokens[index + 1])):
                flags[_canonical_flag(token)] = tokens[index + 1]
                index += 1
            else:
                flags[_canonical_flag(token)] = None
        index += 1
    return flags


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


_SCRIPT_FLAG = re.compile(
    r"(?<![\w-])(--[a-z][a-z0-9_-]*|-tp|-pp|-dp)(?:=|[ \t]+)(\"[^\"]*\"|'[^']*'|\{\{.*?\}\}|[^\s\\;&|\"']+)"
)


_COMMENT = re.compile(r"(?m)(^|\s)#.*$")


def _script_flags(script: str) -> dict[str, str | None]:
    """vLLM flags anywhere in a shell script (a value may be a ``{{ template }}`` or ``$VAR``)."""
    joined = _COMMENT.sub(r"\1", script.replace("\\\n", " "))
    try:
        tokens = shlex.split(joined, comments=True)
    except ValueError:
        tokens = []
    flags = {}
    if tokens:
        flags.update({k: v for k, v in parse_server_args(tokens).items() if k in SERVER_FLAGS})
    # Templated values ({{ ... }}) and flags inside quoted strings escape shlex; read them by pattern.
    for match in _SCRIPT_FLAG.finditer(joined):
        name = _canonical_flag(match.group(1))
        if name in SERVER_FLAGS and name not in flags:
            flags[name] = match.group(2).strip("\"'")
    return flags


def _string_list(value) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list):  # invalid for Kubernetes, but read it as one word rather than letters
        return [str(value)]
    return [str(part) for part in value if part is not None]


_SHELL_C = re.compile(r"^-[a-z]*c[a-z]*$")  # -c, -lc, -ec, -xc: the next word is the script
# Flags only vLLM's server takes (SGLang says --mem-fraction-static and --context-length, TGI
# --max-total-tokens): two of them on a command line mark a vLLM server whatever the image is called.
_VLLM_ONLY_FLAGS = (
    "--gpu-memory-utilization",
    "--max-num-seqs",
    "--max-num-batched-tokens",
    "--max-model-len",
    "--enable-prefix-caching",
    "--enforce-eager",
    "--swap-space",
)
_OTHER_SERVERS = re.compile(r"sglang|text-generation-inference|\btgi\b|ollama|llama[.-]?cpp|triton|tensorrt", re.I)
# vLLM's own runtime settings (vllm/envs.py): only a vLLM process reads them.
_VLLM_RUNTIME_ENV = frozenset(
    {
        "VLLM_ATTENTION_BACKEND",
        "VLLM_USE_V1",
        "VLLM_WORKER_MULTIPROC_METHOD",
        "VLLM_LOGGING_LEVEL",
        "VLLM_ALLOW_LONG_MAX_MODEL_LEN",
        "VLLM_USE_MODELSCOPE",
        "VLLM_ENGINE_ITERATION_TIMEOUT_S",
        "VLLM_USE_TRITON_FLASH_ATTN",
        "VLLM_FLASH_ATTN_VERSION",
        "VLLM_CONFIGURE_LOGGING",
        "VLLM_NO_USAGE_STATS",
        "VLLM_DO_NOT_TRACK",
        "VLLM_CACHE_ROOT",
        "VLLM_ENABLE_V1_MULTIPROCESSING",
        "VLLM_TARGET_DEVICE",
    }
)


def _env_flags(container: Mapping) -> tuple[dict[str, str | None], bool]:
    """vLLM flags an entrypoint script takes from ``VLLM_*`` env vars (``VLLM_MAX_NUM_SEQS`` -> ``--max-num-seqs``).

    The second value says whether the env marks a vLLM server: a ``VLLM_<server flag>`` setting or one
    of vLLM's own runtime variables. A client's ``VLLM_BASE_URL`` or ``VLLM_ENDPOINT`` does not.
    """
    flags: dict[str, str | None] = {}
    marks = False
    for item in container.get("env") or []:
        if not isinstance(item, Mapping) or not isinstance(item.get("name"), str):
            continue
        name = item["name"]
        if not name.startswith("VLLM_"):
            continue
        value = item.get("value")
        if name in _VLLM_RUNTIME_ENV:
            marks = True
            continue
        flag = "--" + name[len("VLLM_") :].lower().replace("_", "-")
        if flag in SERVER_FLAGS and not (isinstance(value, str) and "://" in value):
            flags[flag] = None if value is None else str(value)
            marks = True
    return flags, marks


def _server_flags(container: Mapping) -> tuple[dict[str, str | None], bool]:
    """(flags, runs vLLM) for one container."""
    command, args = _string_list(container.get("command")), _string_list(container.get("args"))
    tokens = command + args
    image = str(container.get("image") or "")
    text = " ".join(tokens)
    env_flags, env_marks = _env_flags(container)
    shell_at = next((i for i in (1, 2) if i < len(tokens) and _SHELL_C.match(tokens[i])), None)
    if tokens and _SHELLS.search(tokens[0]) and shell_at is not None:
        script = "\n".join(tokens[shell_at + 1 :])
        runs = bool(re.search(r"\bvllm\s+serve\b|vllm\.entrypoints", script))
        flags = _script_flags(script) if runs else {}
    else:
        runs = bool(re.search(r"\bvllm\b", text)) or ("vllm" in image.lower() and not command)
        if not runs and len(args) == 1 and re.search(r"\bvllm\s+serve\b|vllm\.entrypoints", args[0]):
            flags, runs = _script_flags(args[0]), True
        else:
            flags = parse_server_args(tokens) if tokens else {}
            if not runs and not _OTHER_SERVERS.search(image + " " + text):
                runs = sum(flag in flags for flag in _VLLM_ONLY_FLAGS) >= 2
            if not runs:
                flags = {}
    if not runs and env_marks and not _OTHER_SERVERS.search(image + " " + text):
        runs = True  # an entrypoint script configured through VLLM_* env vars
    if runs:
        for flag, value in env_flags.items():
            flags.setdefault(flag, value)
    return flags, runs


# KServe's InferenceService puts the server in predictor.model; its Hugging Face runtime serves with vLLM.
_KSERVE_VLLM_FORMATS = ("huggingface", "vllm")


def _pod_specs(node, path: tuple = ()) -> Iterator[tuple[tuple, Mapping, list]]:
    """Every pod spec wherever its owner keeps it: (path, spec, [(container path, container, runs vLLM)]).

    A pod spec is a mapping with a ``containers`` list, or a KServe predictor with a ``model``.
    """
    if isinstance(node, Mapping):
        containers, model = node.get("containers"), node.get("model")
        model_format = model.get("modelFormat") if isinstance(model, Mapping) else None
        if isinstance(containers, list) or isinstance(model_format, Mapping):
            items = [((*path, "containers", i), c, False) for i, c in enumerate(containers or [])]
            if isinstance(model_format, Mapping):  # KServe
                format_name = str(model_format.get("name") or "").lower()
                items.append(((*path, "model"), model, format_name in _KSERVE_VLLM_FORMATS))
            yield path, node, items
            return
        for key, value in node.items():
            if key in ("metadata", "status"):
                continue
            yield from _pod_specs(value, (*path, key))
    elif isinstance(node, list):
        for index, item in enumerate(node):
            yield from _pod_specs(item, (*path, index))


def workload_from_document(document: YamlDocument) -> tuple[Workload, ...]:
    """The pod templates in ``document`` whose containers run vLLM (empty when none do)."""
    found = []
    for pod_path, pod, containers in _pod_specs(document.data.get("spec"), ("spec",)):
        servers = []
        for container_path, container, serves in containers:
            if not isinstance(container, Mapping):
                continue
            flags, runs = _server_flags(container)
            if serves and not runs:
                flags, runs = parse_server_args(_string_list(container.get("args"))), True
            if not runs:
                continue
            gpus, resource = _gpus(container)
            servers.append(
                ModelServer(
                    container=str(container.get("name") or ""),
                    path=container_path,
                    image=str(container.get("image") or ""),
                    flags=flags,
                    gpus=gpus,
                    gpu_resource=resource,
                    readiness_probe=_probe(container.get("readinessProbe")),
                    startup_probe=_probe(container.get("startupProbe")),
                    liveness_probe=_probe(container.get("livenessProbe")),
                    pre_stop=_pre_stop(container),
                )
            )
        if not servers:
            continue
        grace = pod.get("terminationGracePeriodSeconds")
        grace_s = int(grace) if isinstance(grace, int) and not isinstance(grace, bool) else None
        found.append(
            Workload(document.kind, document.name, document.namespace, document, pod_path, grace_s, tuple(servers))
        )
    return tuple(found)


@dataclass(frozen=True)
class ManifestSet:
    """Everything read from the files given to ``planner lint``.

    Attributes
    ----------
    files : tuple of str
    documents : tuple of YamlDocument
    autoscalers : tuple of (YamlDocument, Autoscaler)
    workloads : tuple of Workload
    problems : tuple of ReadProblem
        What could not be read, when read with ``strict=False`` (``planner lint``).
    """

    files: tuple[str, ...]
    documents: tuple[YamlDocument, ...]
    autoscalers: tuple[tuple[YamlDocument, Autoscaler], ...]
    workloads: tuple[Workload, ...]
    problems: tuple[ReadProblem, ...] = ()


def _generated_deployments(kind: str, name: str) -> tuple[str, ...]:
    """Deployments a controller makes for an object: KServe runs an InferenceService X in RawDeployment
    (Standard) mode as X-predictor, and an LLMInferenceService X as X-kserve (and X-kserve-prefill)."""
    if kind == "InferenceService":
        return (f"{name}-predictor",)
    if kind == "LLMInferenceService":
        return (f"{name}-kserve", f"{name}-kserve-prefill")
    return ()


def target_in_documents(autoscaler: Autoscaler, document: YamlDocument, documents) -> bool:
    """Whether any of ``documents`` is the object the autoscaler's ``scaleTargetRef`` names (any kind)."""
    kind, name = autoscaler.hpa.scale_target_kind, autoscaler.hpa.scale_target_name
    for other in documents:
        if other.kind != kind or other.name != name:
            if not (kind == "Deployment" and name in _generated_deployments(other.kind, other.name)):
                continue
        if document.namespace and other.namespace and document.namespace != other.namespace:
            continue
        return True
    return False


def find_scale_target(autoscaler: Autoscaler, document: YamlDocument, workloads) -> Workload | None:
    """The workload an autoscaler's ``scaleTargetRef`` names (kind and name; namespace when both give one)."""
    kind, name = autoscaler.hpa.scale_target_kind, autoscaler.hpa.scale_target_name
    for workload in workloads:
        owned = kind == "Deployment" and name in _generated_deployments(workload.kind, workload.name)
        if not owned and (workload.kind != kind or workload.name != name):
            continue
        if document.namespace and workload.namespace and document.namespace != workload.namespace:
            continue
        return workload
    return None


def _yaml_files(path: Path) -> list[Path]:
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in YAML_SUFFIXES)
        if not files:
            raise PlannerInputError(f"{path}: no .yaml or .yml files in this folder")
        return files
    if not path.exists():
        raise PlannerInputError(f"{path}: no such file or folder")
    return [path]


_ADAPTER_KEYS = frozenset({"rules", "externalRules", "resourceRules"})


def _is_adapter_config(data) -> bool:
    """A prometheus-adapter ``--config`` file: only rule lists, no apiVersion or kind."""
    return (
        isinstance(data, Mapping)
        and bool(data)
        and set(data) <= _ADAPTER_KEYS
        and all(isinstance(value, list | Mapping) for value in data.values())
    )


def read_manifest_set(paths, *, strict: bool = True) -> ManifestSet:
    """Read files and folders (``*.yaml``, ``*.yml``, recursively) for review.

    Parameters
    ----------
    paths : iterable of str or Path
    strict : bool
        ``True``: refuse the first unreadable file or document. ``False`` (``planner lint``): keep
        each one as a :class:`ReadProblem` and read everything else; a missing path is still refused.

    Raises
    ------
    PlannerInputError
        A path that does not exist or a folder without YAML; with ``strict``, one line naming the
        file and document: not YAML, not a Kubernetes object, or an autoscaler the controllers reject.
    """
    files: list[Path] = []
    for path in paths:
        files.extend(_yaml_files(Path(path)))
    if strict:
        return manifest_set_from_documents([str(p) for p in files], [load_documents(p) for p in files])
    per_file: list[tuple[YamlDocument, ...]] = []
    problems: list[ReadProblem] = []
    for path in files:
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            problems.append(ReadProblem(str(path), 0, 1, f"{path}: not a text file (expected YAML)"))
            per_file.append(())
            continue
        documents, file_problems = _documents_lenient(text, str(path))
        per_file.append(documents)
        problems.extend(file_problems)
    result = manifest_set_from_documents([str(p) for p in files], per_file, strict=False)
    return ManifestSet(
        result.files, result.documents, result.autoscalers, result.workloads, tuple(problems) + result.problems
    )


def manifest_set_from_texts(texts, *, strict: bool = True) -> ManifestSet:
    """The same as :func:`read_manifest_set` for YAML already in memory: a mapping of name -> text."""
    names = list(texts)
    if strict:
        return manifest_set_from_documents(names, [documents_from_text(texts[name], name) for name in names])
    per_file: list[tuple[YamlDocument, ...]] = []
    problems: list[ReadProblem] = []
    for name in names:
        documents, file_problems = _documents_lenient(texts[name], name)
        per_file.append(documents)
        problems.extend(file_problems)
    result = manifest_set_from_documents(names, per_file, strict=False)
    return ManifestSet(
        result.files, result.documents, result.autoscalers, result.workloads, tuple(problems) + result.problems
    )


_DOCUMENT_START = re.compile(r"^---(\s|$)")


def _documents_lenient(text: str, source: str) -> tuple[tuple[YamlDocument, ...], list[ReadProblem]]:
    """Every readable document of ``text``; a document YAML cannot parse becomes a problem, the rest are read."""
    try:
        return documents_from_text(text, source), []
    except PlannerInputError as error:
        whole_error = str(error)
    # Parse document by document (split at "---" lines) so one broken document does not hide the others.
    lines = text.splitlines(keepends=True)
    chunks, start = [], 0
    for index, line in enumerate(lines):
        if _DOCUMENT_START.match(line) and index > start:
            chunks.append((start, "".join(lines[start:index])))
            start = index
    chunks.append((start, "".join(lines[start:])))
    documents, problems = [], []
    number = 0
    for position, (offset, chunk) in enumerate(chunks):
        content = any(
            ln.strip() and not ln.lstrip().startswith("#") and not _DOCUMENT_START.match(ln)
            for ln in chunk.splitlines()
        )
        if position == 0 and not content:
            continue  # comments before the first "---"
        number += 1
        if not content:
            continue
        padded = "\n" * offset + chunk  # keep the file's line numbers
        try:
            datas = list(yaml.load_all(padded, Loader=_SAFE_LOADER))
            nodes = list(yaml.compose_all(padded, Loader=_SAFE_LOADER))
        except yaml.YAMLError as error:
            mark = getattr(error, "problem_mark", None)
            line_number = mark.line + 1 if mark is not None else offset + 1
            problem = getattr(error, "problem", None) or str(error).splitlines()[0]
            problems.append(
                ReadProblem(
                    source,
                    number,
                    line_number,
                    f"{source}: not valid YAML in document {number} at line {line_number}: {problem}",
                )
            )
            continue
        text_lines = padded.splitlines()
        for data, node in zip(datas, nodes, strict=True):
            if data is None:
                continue
            marks: dict[tuple, int] = {}
            _walk_marks(node, (), marks)
            first = node.start_mark.line + 1
            documents.append(YamlDocument(source, number, data, marks, first, _helm_source(text_lines, first)))
    if (
        not documents
        and not problems
        and any(
            ln.strip() and not ln.lstrip().startswith("#") and not _DOCUMENT_START.match(ln) for ln in text.splitlines()
        )
    ):
        problems.append(ReadProblem(source, 0, 1, whole_error))  # an empty file is skipped, not an error
    return tuple(documents), problems


_PATH_IN_MESSAGE = re.compile(r": ((?:spec|metadata)(?:\.[A-Za-z0-9_-]+|\[\d+\])*):")
_PATH_PART = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def _problem_line(document: YamlDocument, message: str) -> int:
    """The line of the YAML path a reader's message names (``spec.triggers[0].metadata``), else the document's."""
    match = _PATH_IN_MESSAGE.search(message)
    if match is None:
        return document.start_line
    path = tuple(int(index) if index else key for key, index in _PATH_PART.findall(match.group(1)))
    return document.line(path)


# A whole value left for a template tool: ${VAR}, __VAR__, REPLACE_..., <your-value>.
WHOLE_PLACEHOLDER = re.compile(
    r"^\s*(\$\{[A-Za-z_][A-Za-z0-9_]*\}|__[A-Z][A-Z0-9_]*__|REPLACE[_-][A-Za-z0-9_;-]*|<[^<>\n]+>)\s*$"
)


def without_placeholders(node):
    """A copy of a parsed document without the fields whose whole value is a placeholder (read as unset)."""
    if isinstance(node, Mapping):
        return {
            key: without_placeholders(value)
            for key, value in node.items()
            if not (isinstance(value, str) and WHOLE_PLACEHOLDER.match(value))
        }
    if isinstance(node, list):
        return [without_placeholders(item) for item in node]
    return node


def _list_items(document: YamlDocument) -> tuple[YamlDocument, ...]:
    """The objects of a ``kind: List`` (``kubectl get -o yaml``), each as a document with its own lines."""
    items = document.data.get("items")
    if not isinstance(items, list):
        return ()
    found = []
    for index, item in enumerate(items):
        prefix = ("items", index)
        lines = {path[2:]: line for path, line in document.lines.items() if path[:2] == prefix and len(path) > 2}
        found.append(
            YamlDocument(
                document.source,
                document.number,
                item,
                lines,
                document.lines.get(prefix, document.start_line),
                document.template,
            )
        )
    return tuple(found)


def _kserve_scaled_object(document: YamlDocument) -> YamlDocument | None:
    """The ScaledObject KServe writes for an InferenceService with ``autoscalerClass: keda`` and
    ``predictor.autoScaling`` metrics, as a document whose fields point at the InferenceService's lines.

    Each External metric with ``backend: prometheus`` becomes a prometheus trigger (query, threshold
    from the target, metricType from the target type) on the Deployment ``NAME-predictor``; a
    Resource metric on cpu or memory becomes a cpu or memory trigger.
    """
    data = document.data
    if document.kind != "InferenceService" or not isinstance(data.get("metadata"), Mapping):
        return None
    annotations = data["metadata"].get("annotations")
    if not isinstance(annotations, Mapping) or annotations.get("serving.kserve.io/autoscalerClass") != "keda":
        return None
    predictor = data.get("spec", {}).get("predictor") if isinstance(data.get("spec"), Mapping) else None
    if not isinstance(predictor, Mapping):
        return None
    auto = predictor.get("autoScaling")
    metrics = auto.get("metrics") if isinstance(auto, Mapping) else None
    if not isinstance(metrics, list):
        return None
    base = ("spec", "predictor", "autoScaling")
    lines: dict[tuple[str | int, ...], int] = {("spec",): document.line(base)}
    triggers: list[dict[str, object]] = []
    for index, metric in enumerate(metrics):
        resource = metric.get("resource") if isinstance(metric, Mapping) else None
        if (
            isinstance(resource, Mapping)
            and resource.get("name") in ("cpu", "memory")
            and isinstance(resource.get("target"), Mapping)
        ):
            goal = resource["target"]
            utilization = goal.get("averageUtilization")
            value = utilization if utilization is not None else goal.get("averageValue")
            where = (*base, "metrics", index)
            lines[("spec", "triggers", len(triggers))] = document.line(where)
            triggers.append(
                {
                    "type": resource["name"],
                    "metadata": {"value": value},
                    "metricType": "Utilization" if utilization is not None else "AverageValue",
                }
            )
            continue
        external = metric.get("external") if isinstance(metric, Mapping) else None
        source = external.get("metric") if isinstance(external, Mapping) else None
        target = external.get("target") if isinstance(external, Mapping) else None
        if not isinstance(source, Mapping) or source.get("backend") != "prometheus" or not isinstance(target, Mapping):
            continue
        value = target.get("value", target.get("averageValue"))
        position = len(triggers)
        triggers.append(
            {
                "type": "prometheus",
                "metricType": target.get("type") or "AverageValue",
                # KServe writes the trigger: its ignoreNullValues is not the team's to set here.
                "metadata": {"query": source.get("query"), "threshold": value, "ignoreNullValues": "false"},
            }
        )
        where = (*base, "metrics", index)
        lines[("spec", "triggers", position)] = document.line(where)
        lines[("spec", "triggers", position, "metadata", "query")] = document.line(
            (*where, "external", "metric", "query")
        )
        lines[("spec", "triggers", position, "metadata", "threshold")] = document.line((*where, "external", "target"))
    if not triggers:
        return None
    spec = {
        "scaleTargetRef": {"name": f"{document.name}-predictor"},
        "triggers": triggers,
        "minReplicaCount": predictor.get("minReplicas", 1),
    }
    if predictor.get("maxReplicas") is not None:
        spec["maxReplicaCount"] = predictor["maxReplicas"]
    metadata = {"name": document.name, **({"namespace": document.namespace} if document.namespace else {})}
    so = {"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject", "metadata": metadata, "spec": spec}
    return YamlDocument(document.source, document.number, so, lines, document.line(base), document.template)


def _is_keda_owned(data: Mapping) -> bool:
    """An HPA KEDA made for a ScaledObject (its owner), as a `kubectl get` dump shows it."""
    metadata = data.get("metadata")
    if not isinstance(metadata, Mapping):
        return False
    owners = metadata.get("ownerReferences")
    if isinstance(owners, list) and any(isinstance(o, Mapping) and o.get("kind") == "ScaledObject" for o in owners):
        return True
    labels = metadata.get("labels")
    return isinstance(labels, Mapping) and "scaledobject.keda.sh/name" in labels


def manifest_set_from_documents(files, documents_per_file, *, strict: bool = True) -> ManifestSet:
    """Sort parsed documents into autoscalers and vLLM workloads.

    With ``strict`` a document that is not a Kubernetes object, or an autoscaler the controllers
    reject, is refused; without, it becomes a :class:`ReadProblem` and the rest is read. Items of a
    ``kind: List`` are read as documents; HPAs KEDA owns (``keda-hpa-*``) are kept as documents but
    not reviewed as autoscalers of their own.
    """
    documents: list[YamlDocument] = []
    autoscalers: list[tuple[YamlDocument, Autoscaler]] = []
    workloads: list[Workload] = []
    problems: list[ReadProblem] = []
    for file_documents in documents_per_file:
        queue = list(file_documents)
        while queue:
            document = queue.pop(0)
            label = f"{document.source} (document {document.number})"
            data = document.data
            if _is_adapter_config(data):
                continue  # prometheus-adapter's own config, not an object the cluster stores
            if not isinstance(data, Mapping) or not data.get("apiVersion") or not data.get("kind"):
                shown = type(data).__name__ if not isinstance(data, Mapping) else "a mapping without apiVersion/kind"
                message = f"{label}: not a Kubernetes object (got {shown}; expected apiVersion and kind)"
                if strict:
                    raise PlannerInputError(message)
                problems.append(ReadProblem(document.source, document.number, document.start_line, message))
                continue
            if data.get("kind") == "List" and isinstance(data.get("items"), list):
                queue[:0] = _list_items(document)
                continue
            documents.append(document)
            try:
                autoscaler = autoscaler_from_document(label, data)
            except PlannerInputError as error:
                if strict:
                    raise
                try:  # a placeholder where a number belongs: read the rest, the field as unset
                    autoscaler = autoscaler_from_document(label, without_placeholders(data))
                except PlannerInputError:
                    problems.append(
                        ReadProblem(document.source, document.number, _problem_line(document, str(error)), str(error))
                    )
                    autoscaler = None
            if autoscaler is not None and not (autoscaler.kind == "HorizontalPodAutoscaler" and _is_keda_owned(data)):
                autoscalers.append((document, autoscaler))
            kserve = _kserve_scaled_object(document)
            if kserve is not None:
                try:
                    kserve_autoscaler = autoscaler_from_document(
                        f"{label}: spec.predictor.autoScaling", without_placeholders(kserve.data)
                    )
                except PlannerInputError as error:
                    if strict:
                        raise
                    problems.append(ReadProblem(document.source, document.number, kserve.start_line, str(error)))
                else:
                    assert kserve_autoscaler is not None  # _kserve_scaled_object writes a keda.sh ScaledObject
                    autoscalers.append((kserve, kserve_autoscaler))
            workloads.extend(workload_from_document(document))
    return ManifestSet(tuple(files), tuple(documents), tuple(autoscalers), tuple(workloads), tuple(problems))
