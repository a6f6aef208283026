"""Write generated manifests as commented YAML, and patch a user's workload file in place of a copy.

:func:`dump_manifest` turns a :class:`planner.manifests.generate.GeneratedManifest`
into YAML with ruamel.yaml, each comment beside the value it explains.

:func:`patch_workload_text` edits the text of a user's Deployment or
StatefulSet file so that everything outside the patched fields stays byte
for byte as it was: ruamel.yaml's round-trip loader gives the line and
column of every key and item, and the edits are made on those lines only
(a value replaced, or lines inserted), instead of re-emitting the whole
file, which would re-indent and re-quote parts the user wrote differently.
The result is parsed again and compared with the original, field by
field, so an edit that went anywhere else is refused.
"""

from __future__ import annotations

import io
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass

import yaml
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import YAMLError as RuamelYAMLError

from planner.dynamics.grace import GracePlan
from planner.errors import PlannerInputError
from planner.manifests.generate import (
    GeneratedManifest,
    grace_reason,
    pre_stop_reason,
    shutdown_reason,
)

__all__ = ["WorkloadPatch", "dump_manifest", "patch_workload_text", "vllm_argument", "workload_names"]

_WORKLOAD_KINDS = ("Deployment", "StatefulSet")
_SHUTDOWN_FLAG = "--shutdown-timeout"


def _round_trip() -> YAML:
    rt = YAML(typ="rt")
    rt.preserve_quotes = True
    rt.width = 4096  # never fold a long query or formula
    rt.indent(mapping=2, sequence=4, offset=2)
    return rt


def dump_manifest(manifest: GeneratedManifest) -> str:
    """The manifest as YAML text, with its header and per-value comments.

    Parameters
    ----------
    manifest : GeneratedManifest

    Returns
    -------
    str
    """
    root = _commented(manifest.document)
    for path, text in manifest.comments:
        _attach(root, path, text)
    stream = io.StringIO()
    _round_trip().dump(root, stream)
    header = "".join(f"# {line}\n" if line else "#\n" for line in manifest.header.splitlines())
    return header + stream.getvalue()


def _commented(value):
    if isinstance(value, Mapping):
        out = CommentedMap()
        for key, item in value.items():
            out[key] = _commented(item)
        return out
    if isinstance(value, list | tuple):
        return CommentedSeq(_commented(item) for item in value)
    return value


def _attach(root, path: tuple, text: str) -> None:
    parent = root
    for part in path[:-1]:
        parent = parent[part]
    key = path[-1]
    if isinstance(parent[key], CommentedMap | CommentedSeq) and isinstance(parent, CommentedMap):
        # a block value: the comment goes on its own line above the key, at the key's column
        # (each level of the output is indented by 2, a list item's keys included)
        parent.yaml_set_comment_before_after_key(key, before=text, indent=2 * (len(path) - 1))
    else:
        parent.yaml_add_eol_comment(text, key)


@dataclass(frozen=True)
class WorkloadPatch:
    """The patched text of a workload file and what was done.

    Attributes
    ----------
    text : str
        The whole file, patched.
    changes : tuple of str
        One line per edit (field and new value).
    warnings : tuple of str
        Edits that could not be made safely, with what to do by hand.
    document_index : int
        Which document of the file was patched (0-based).
    container : str
        The container taken as vLLM's.
    """

    text: str
    changes: tuple[str, ...]
    warnings: tuple[str, ...]
    document_index: int
    container: str


def patch_workload_text(
    text: str, grace: GracePlan, *, source: str, target_name: str | None = None, container_name: str | None = None
) -> WorkloadPatch:
    """Set the grace period, the preStop sleep and ``--shutdown-timeout`` in a workload's YAML text.

    Parameters
    ----------
    text : str
        A Deployment or StatefulSet file (several documents allowed).
    grace : GracePlan
        From :func:`planner.dynamics.grace.plan_grace`.
    source : str
        File name, quoted in messages.
    target_name : str, optional
        Which workload, when the file holds several.
    container_name : str, optional
        The vLLM container; by default the one whose image, command or args name vLLM.

    Returns
    -------
    WorkloadPatch

    Raises
    ------
    PlannerInputError
        Not YAML, no (or several) workloads, no vLLM container, or a layout
        that cannot be edited without touching other lines.
    """
    index, where, pod, c_index, container = _find_vllm_container(text, source, target_name, container_name)
    c_name = str(container.get("name", c_index))
    c_path = f"spec.template.spec.containers[{c_index}]"
    lines = text.splitlines(keepends=True)
    edits: list[_Edit] = []
    changes: list[str] = []
    warnings: list[str] = []

    # terminationGracePeriodSeconds
    grace_s = grace.termination_grace_period_s
    if "terminationGracePeriodSeconds" in pod:
        old = pod["terminationGracePeriodSeconds"]
        if old is None:
            raise PlannerInputError(
                f"{where}: spec.template.spec.terminationGracePeriodSeconds is present "
                f"but empty; set it to {grace_s} by hand"
            )
        if isinstance(old, int) and not isinstance(old, bool) and old >= grace_s:
            # a longer grace period only makes termination slower, never cuts a generation
            changes.append(
                f"spec.template.spec.terminationGracePeriodSeconds: kept {old} (at least the {grace_s} s needed)"
            )
        else:
            edits.append(_replace_scalar(lines, pod, "terminationGracePeriodSeconds", str(grace_s), where))
            changes.append(f"spec.template.spec.terminationGracePeriodSeconds: {old} -> {grace_s}")
    else:
        edits.append(
            _insert_key(
                lines,
                pod,
                [f"terminationGracePeriodSeconds: {grace_s}  # {grace_reason(grace)}"],
                where,
                "spec.template.spec",
            )
        )
        changes.append(f"spec.template.spec.terminationGracePeriodSeconds: (unset, 30) -> {grace_s}")

    # preStop
    lifecycle = container.get("lifecycle")
    sleep_block = ["preStop:", "  sleep:", f"    seconds: {grace.pre_stop_s}  # {pre_stop_reason(grace)}"]
    if "lifecycle" in container and not isinstance(lifecycle, CommentedMap):
        warnings.append(
            f"{c_path}.lifecycle is set but is not a mapping, so it was left alone; add "
            f"a preStop sleep of {grace.pre_stop_s} s by hand"
        )
    elif lifecycle is None:
        edits.append(_insert_key(lines, container, ["lifecycle:", *("  " + s for s in sleep_block)], where, c_path))
        changes.append(f"{c_path}.lifecycle.preStop.sleep.seconds: {grace.pre_stop_s}")
    elif "preStop" not in lifecycle:
        edits.append(_insert_key(lines, lifecycle, sleep_block, where, f"{c_path}.lifecycle"))
        changes.append(f"{c_path}.lifecycle.preStop.sleep.seconds: {grace.pre_stop_s}")
    elif lifecycle["preStop"] is None:
        warnings.append(
            f"{c_path}.lifecycle.preStop is present but empty, so it was left alone; add "
            f"a preStop sleep of {grace.pre_stop_s} s by hand"
        )
    else:
        warnings.append(
            f"{c_path}.lifecycle.preStop is already set and was kept; the grace period "
            f"assumes it ends within {grace.pre_stop_s} s, so check how long it can run"
        )

    # --shutdown-timeout
    flag_edit, flag_change, flag_warning = _shutdown_edit(lines, container, grace, where, c_path)
    if flag_edit is not None:
        edits.append(flag_edit)
    if flag_change:
        changes.append(flag_change)
    if flag_warning:
        warnings.append(flag_warning)

    patched = _apply(lines, edits, "\r\n" if "\r\n" in text else "\n")
    _verify(text, patched, index, source)
    _check_effect(patched, source, index, c_index, changes)
    return WorkloadPatch(patched, tuple(changes), tuple(warnings), index, c_name)


# --- finding the workload and the container -------------------------------------------------------


def workload_names(text: str, source: str) -> list[str]:
    """Names of the Deployments and StatefulSets in a YAML text."""
    return [
        str((d.get("metadata") or {}).get("name", ""))
        for d in _load_all(text, source)
        if isinstance(d, CommentedMap) and d.get("kind") in _WORKLOAD_KINDS
    ]


def vllm_argument(
    text: str, flag: str, *, source: str, target_name: str | None = None, container_name: str | None = None
) -> str | None:
    """The value of a vLLM flag (``--max-num-seqs``) in the workload's vLLM container, if set.

    Reads ``--flag=value`` and ``--flag value`` from ``command`` and ``args``,
    shell strings included. None when the flag is absent.
    """
    *_, container = _find_vllm_container(text, source, target_name, container_name)
    words = []
    for word in _words(container):
        try:
            words += shlex.split(word) if " " in word.strip() else [word]
        except ValueError:
            words.append(word)
    for position, word in enumerate(words):
        if word.startswith(flag + "="):
            return word.split("=", 1)[1]
        if word == flag and position + 1 < len(words):
            return words[position + 1]
    return None


def _load_all(text: str, source: str) -> list:
    try:
        return list(_round_trip().load_all(text))
    except RuamelYAMLError as error:
        mark = getattr(error, "problem_mark", None)
        at = f" at line {mark.line + 1}" if mark is not None else ""
        raise PlannerInputError(f"{source}: not valid YAML{at}: {getattr(error, 'problem', '') or error}") from None


def _find_workload(text: str, source: str, target_name: str | None):
    documents = _load_all(text, source)
    found = []
    for index, document in enumerate(documents):
        if isinstance(document, CommentedMap) and document.get("kind") in _WORKLOAD_KINDS:
            name = (document.get("metadata") or {}).get("name", "")
            if target_name is None or name == target_name:
                found.append((index, document))
    if not found:
        what = f" named {target_name!r}" if target_name else ""
        raise PlannerInputError(f"{source}: no Deployment or StatefulSet{what} to patch")
    if len(found) > 1:
        names = ", ".join(str((d.get("metadata") or {}).get("name", "?")) for _, d in found)
        raise PlannerInputError(f"{source}: holds several workloads ({names}); pick one with --target")
    return found[0]


def _find_vllm_container(text: str, source: str, target_name: str | None, container_name: str | None):
    """The workload's document index, its name for messages, its pod spec, and the vLLM container and its index."""
    index, workload = _find_workload(text, source, target_name)
    where = f"{source} (document {index + 1})"
    pod = _mapping_at(workload, ("spec", "template", "spec"), where)
    containers = pod.get("containers")
    if not isinstance(containers, CommentedSeq) or not containers:
        raise PlannerInputError(f"{where}: spec.template.spec.containers: expected a list of containers")
    c_index, container = _find_container(containers, container_name, where)
    return index, where, pod, c_index, container


def _mapping_at(node, path: tuple, where: str) -> CommentedMap:
    for depth, key in enumerate(path):
        node = node.get(key) if isinstance(node, CommentedMap) else None
        if not isinstance(node, CommentedMap):
            raise PlannerInputError(f"{where}: {'.'.join(path[: depth + 1])}: expected a mapping")
    return node


def _words(container) -> list[str]:
    words = []
    for key in ("command", "args"):
        value = container.get(key)
        if isinstance(value, list):
            words += [str(v) for v in value]
        elif isinstance(value, str):
            words.append(value)
    return words


def _is_vllm(container) -> bool:
    if "vllm" in str(container.get("image", "")).lower():
        return True
    return any("vllm" in word.lower() for word in _words(container))


def _find_container(containers, name: str | None, where: str):
    if name is not None:
        for index, container in enumerate(containers):
            if isinstance(container, CommentedMap) and container.get("name") == name:
                return index, container
        raise PlannerInputError(f"{where}: no container named {name!r}")
    matches = [(i, c) for i, c in enumerate(containers) if isinstance(c, CommentedMap) and _is_vllm(c)]
    if len(matches) != 1:
        found = "none" if not matches else ", ".join(str(c.get("name")) for _, c in matches)
        raise PlannerInputError(
            f"{where}: cannot tell which container runs vLLM (found {found}); name it with --container"
        )
    return matches[0]


# --- the edits --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Edit:
    line: int  # 0-based line the edit applies to
    replace: str | None  # new text of that line, or None to insert before it
    insert: tuple[str, ...] = ()
    rank: int = 1  # among inserts before one line, lower ranks go first


_PLAIN_SCALAR = re.compile(r"""("(?:[^"\\]|\\.)*"|'(?:[^']|'')*'|[^\s#,\]}]+)""")


def _replace_scalar(lines, mapping: CommentedMap, key: str, new: str, where: str) -> _Edit:
    line, col = mapping.lc.value(key)
    text = lines[line]
    match = _PLAIN_SCALAR.match(text, col)
    if match is None:
        raise PlannerInputError(f"{where}: {key}: cannot find its value on line {line + 1}")
    return _Edit(line, text[: match.start()] + new + text[match.end() :])


def _insert_key(lines, mapping: CommentedMap, new_lines: list[str], where: str, path: str) -> _Edit:
    """Insert keys into a block mapping, before one of its keys that starts its own line."""
    for key in mapping:
        line, col = mapping.lc.key(key)
        if lines[line][:col].strip() == "":
            indent = lines[line][:col]
            # keep a comment that sits on the lines just above the key next to that key
            while line > 0 and lines[line - 1].startswith(indent + "#"):
                line -= 1
            return _Edit(line, None, tuple(f"{indent}{text}\n" for text in new_lines))
    raise PlannerInputError(
        f"{where}: {path}: written in a layout (flow style or one key only after "
        "'- ') that cannot be edited without touching other lines; add the fields by hand"
    )


def _shutdown_edit(lines, container, grace: GracePlan, where: str, c_path: str):
    wanted = f"{_SHUTDOWN_FLAG}={grace.shutdown_timeout_s}"
    key = (
        "args"
        if isinstance(container.get("args"), list)
        else ("command" if isinstance(container.get("command"), list) else None)
    )
    if key is None:
        return (
            None,
            "",
            (f"{c_path} has no command or args list to add {wanted} to; add it by hand ({shutdown_reason(grace)})"),
        )
    items = container[key]
    for word in _words(container):
        if " " in word.strip() and "vllm" in word and (_SHUTDOWN_FLAG not in word):
            return (
                None,
                "",
                (
                    f"{c_path}.{key} runs vLLM from a shell string, which cannot be edited "
                    f"safely; add {wanted} to it by hand ({shutdown_reason(grace)})"
                ),
            )
    for position, item in enumerate(items):
        word = str(item)
        if word == _SHUTDOWN_FLAG or word.startswith(_SHUTDOWN_FLAG + "="):
            if word == _SHUTDOWN_FLAG:
                if position + 1 >= len(items):
                    raise PlannerInputError(f"{where}: {c_path}.{key}[{position}]: {_SHUTDOWN_FLAG} has no value")
                old, target, new = str(items[position + 1]), position + 1, str(grace.shutdown_timeout_s)
            else:
                old, target, new = word.split("=", 1)[1], position, wanted
            if old == str(grace.shutdown_timeout_s):
                return None, "", ""
            edit = _replace_item(lines, items, target, new, where, f"{c_path}.{key}")
            return edit, f"{c_path}.{key}: {_SHUTDOWN_FLAG} {old} -> {grace.shutdown_timeout_s}", ""
        if _SHUTDOWN_FLAG in word:
            return (
                None,
                "",
                (
                    f"{c_path}.{key}[{position}] sets {_SHUTDOWN_FLAG} inside a longer string; "
                    f"set it to {grace.shutdown_timeout_s} by hand"
                ),
            )
    edit = _append_item(lines, items, wanted, where, f"{c_path}.{key}", shutdown_reason(grace))
    return edit, f"{c_path}.{key}: + {wanted}", ""


def _replace_item(lines, items: CommentedSeq, position: int, new: str, where: str, path: str) -> _Edit:
    line, col = items.lc.item(position)
    text = lines[line]
    match = _PLAIN_SCALAR.match(text, col)
    if match is None:
        raise PlannerInputError(f"{where}: {path}[{position}]: cannot find it on line {line + 1}")
    quote = match.group(0)[0] if match.group(0)[0] in "\"'" else ""
    return _Edit(line, text[: match.start()] + f"{quote}{new}{quote}" + text[match.end() :])


def _append_item(lines, items: CommentedSeq, word: str, where: str, path: str, reason: str) -> _Edit:
    if not items:
        raise PlannerInputError(f"{where}: {path}: an empty list; add {word} to it by hand")
    last = len(items) - 1
    line, col = items.lc.item(last)
    text = lines[line]
    if items.fa.flow_style():
        close = text.find("]", col)
        if close < 0 or "\n" in str(items[last]):
            raise PlannerInputError(f"{where}: {path}: a flow list over several lines; add {word} by hand")
        quote = text[col] if text[col] in "\"'" else '"'
        return _Edit(line, text[:close] + f", {quote}{word}{quote}" + text[close:])
    match = _PLAIN_SCALAR.match(text, col)
    if match is None or match.group(0) in ("|", ">", "|-", ">-"):
        raise PlannerInputError(f"{where}: {path}[{last}]: a multi-line item; add {word} by hand")
    dash = text.rfind("-", 0, col)
    if dash < 0 or text[:dash].strip():
        raise PlannerInputError(f"{where}: {path}[{last}]: unusual list layout; add {word} by hand")
    quote = match.group(0)[0] if match.group(0)[0] in "\"'" else ""
    new_line = text[:col] + f"{quote}{word}{quote}  # {reason}\n"
    # a new line after the last item, with that item's indentation and dash
    return _Edit(line + 1, None, (new_line,), rank=0)


def _apply(lines: list[str], edits: list[_Edit], newline: str) -> str:
    out = list(lines)
    if out and not out[-1].endswith("\n"):
        out[-1] += "\n"
        trailing_newline_added = True
    else:
        trailing_newline_added = False
    for edit in edits:
        if edit.replace is not None:
            out[edit.line] = edit.replace
    inserts = sorted((e for e in edits if e.replace is None), key=lambda e: (e.line, e.rank))
    for edit in reversed(inserts):  # bottom up, so earlier line numbers stay valid
        out[edit.line : edit.line] = [line[:-1] + newline for line in edit.insert]  # keep the file's line ends
    text = "".join(out)
    if trailing_newline_added and text.endswith("\n"):
        text = text[:-1]
    return text


def _verify(before: str, after: str, index: int, source: str) -> None:
    """The patched file must equal the original apart from the three patched fields."""
    try:
        old_docs = list(yaml.safe_load_all(before))
        new_docs = list(yaml.safe_load_all(after))
    except yaml.YAMLError as error:
        raise PlannerInputError(f"{source}: the patch would not leave valid YAML ({error}); patch it by hand") from None
    if len(old_docs) != len(new_docs) or any(
        old != new for i, (old, new) in enumerate(zip(old_docs, new_docs, strict=True)) if i != index
    ):
        raise PlannerInputError(f"{source}: the patch would change other documents; patch it by hand")
    if _strip(old_docs[index]) != _strip(new_docs[index]):
        raise PlannerInputError(f"{source}: the patch would change fields it should not; patch it by hand")


def _check_effect(patched: str, source: str, index: int, c_index: int, changes: list[str]) -> None:
    """Each change claimed must be in the patched file, once (no duplicated keys)."""
    _load_all(patched, source)  # ruamel refuses duplicate keys, which PyYAML would silently merge
    document = list(yaml.safe_load_all(patched))[index]
    pod = document["spec"]["template"]["spec"]
    container = pod["containers"][c_index]
    for change in changes:
        field, _, value = change.rpartition(": ")
        if "->" in value:
            value = value.split("-> ")[-1]
        if field.endswith("terminationGracePeriodSeconds") and "kept" not in value:
            ok = str(pod.get("terminationGracePeriodSeconds")) == value
        elif field.endswith("preStop.sleep.seconds"):
            ok = str(((container.get("lifecycle") or {}).get("preStop") or {}).get("sleep", {}).get("seconds")) == value
        elif _SHUTDOWN_FLAG in change:
            words = [str(w) for key in ("command", "args") for w in (container.get(key) or [])]
            ok = any(w.startswith(_SHUTDOWN_FLAG) for w in words)
        else:
            ok = True
        if not ok:
            raise PlannerInputError(f"{source}: the patch did not take effect for {field}; patch it by hand")


def _strip(document):
    """The document without the fields the patch may change."""
    import copy

    document = copy.deepcopy(document)
    pod = document["spec"]["template"]["spec"]
    pod.pop("terminationGracePeriodSeconds", None)
    for container in pod.get("containers") or []:
        lifecycle = container.get("lifecycle")
        if isinstance(lifecycle, dict):
            lifecycle.pop("preStop", None)
            if not lifecycle:
                container.pop("lifecycle")
        for key in ("command", "args"):
            if isinstance(container.get(key), list):
                container[key] = _without_flag(container[key])
    return document


def _without_flag(words: list) -> list:
    out, skip = [], False
    for word in words:
        if skip:
            skip = False
            continue
        text = str(word)
        if text == _SHUTDOWN_FLAG:
            skip = True
            continue
        if text.startswith(_SHUTDOWN_FLAG + "="):
            continue
        out.append(word)
    return out
