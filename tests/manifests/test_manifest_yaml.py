"""Commented YAML output, and the round-trip patch that leaves the rest of a user's file byte-identical."""

from __future__ import annotations

import difflib

import pytest
import yaml

from planner.dynamics.grace import plan_grace
from planner.errors import PlannerInputError
from planner.manifests.generate import ScalingPlan, generate_manifests
from planner.manifests.writer import dump_manifest, patch_workload_text, workload_names

GRACE = plan_grace(204.8, pre_stop_s=10)  # shutdown 226 s, grace 241 s
PATCHED_KEYS = ("terminationGracePeriodSeconds", "lifecycle:", "preStop:", "sleep:", "seconds:", "--shutdown-timeout")


def _real(shared_dir, prefix):
    [path] = (shared_dir / "real-world" / "manifests").glob(f"{prefix}-*.yaml")
    return path


def _changed_lines(before: str, after: str):
    """Lines removed and added between two texts (a line-level diff)."""
    removed, added = [], []
    matcher = difflib.SequenceMatcher(a=before.splitlines(), b=after.splitlines(), autojunk=False)
    for tag, a0, a1, b0, b1 in matcher.get_opcodes():
        if tag != "equal":
            removed += before.splitlines()[a0:a1]
            added += after.splitlines()[b0:b1]
    return removed, added


def _pod(text):
    [workload] = [d for d in yaml.safe_load_all(text) if d and d["kind"] in ("Deployment", "StatefulSet")]
    return workload["spec"]["template"]["spec"]


def test_dump_keeps_values_and_writes_each_reason_beside_its_value():
    plan = ScalingPlan(
        target_name="llama",
        concurrency_target=40,
        warmup_s=240,
        max_output_tokens=4096,
        itl_ms=50,
        max_replicas=12,
        kv_usage_target_frac=0.8,
        knee_concurrency=48,
        growth_frac=0.2,
    )
    result = generate_manifests(plan)
    for manifest in result.all:
        text = dump_manifest(manifest)
        assert yaml.safe_load(text) == manifest.document
        assert text.startswith("# ")
    text = dump_manifest(result.scaled_object)
    [line] = [line for line in text.splitlines() if "threshold: '40'" in line]
    assert line.split("#", 1)[1].strip().startswith("40 = knee 48 / (1 + 0.2 growth during one warmup)")
    [line] = [
        line for line in dump_manifest(result.workload_patch).splitlines() if "terminationGracePeriodSeconds" in line
    ]
    assert "241 s = preStop 10 s + --shutdown-timeout 226 s" in line


def test_patch_55_inserts_three_fields_and_changes_nothing_else(shared_dir):
    path = _real(shared_dir, "55")
    before = path.read_text(encoding="utf-8")
    patch = patch_workload_text(before, GRACE, source=path.name)
    removed, added = _changed_lines(before, patch.text)
    assert removed == []  # only insertions
    assert [line.split("#")[0].rstrip() for line in added] == [
        "      terminationGracePeriodSeconds: 241",
        "        lifecycle:",
        "          preStop:",
        "            sleep:",
        "              seconds: 10",
        "        - --shutdown-timeout=226",
    ]
    pod = _pod(patch.text)
    container = pod["containers"][0]
    assert pod["terminationGracePeriodSeconds"] == 241
    assert container["lifecycle"] == {"preStop": {"sleep": {"seconds": 10}}}
    assert container["args"][-1] == "--shutdown-timeout=226"
    assert patch.container == "inference-server" and patch.warnings == ()
    # the comments of the original file, including commented-out blocks, are all still there
    assert [line for line in before.splitlines() if "#" in line] == [
        line for line in patch.text.splitlines() if "#" in line and line not in added
    ]


def test_patch_51_command_list_and_an_existing_prestop_hook(shared_dir):
    path = _real(shared_dir, "51")
    before = path.read_text(encoding="utf-8")
    patch = patch_workload_text(before, GRACE, source=path.name)
    removed, added = _changed_lines(before, patch.text)
    assert removed == ["      terminationGracePeriodSeconds: 60"]
    assert [line.split("#")[0].rstrip() for line in added] == [
        "            - --shutdown-timeout=226",
        "      terminationGracePeriodSeconds: 241",
    ]
    assert _pod(patch.text)["containers"][0]["command"][-1] == "--shutdown-timeout=226"
    assert _pod(patch.text)["containers"][1]["command"] == ["aibrix_runtime", "--port", "8080"]
    [warning] = patch.warnings
    assert "preStop is already set and was kept" in warning


def test_patch_keeps_a_longer_grace_period(shared_dir):
    path = _real(shared_dir, "52")
    before = path.read_text(encoding="utf-8")
    patch = patch_workload_text(before, GRACE, source=path.name)
    assert _pod(patch.text)["terminationGracePeriodSeconds"] == 300
    assert any("kept 300" in change for change in patch.changes)
    removed, _ = _changed_lines(before, patch.text)
    assert removed == []


@pytest.mark.parametrize("prefix", ["50", "51", "52", "54", "55"])
def test_every_real_deployment_patches_to_the_same_object_plus_the_fields(shared_dir, prefix):
    path = _real(shared_dir, prefix)
    before = path.read_text(encoding="utf-8")
    patch = patch_workload_text(before, GRACE, source=path.name)
    removed, added = _changed_lines(before, patch.text)
    assert all(any(key in line for key in PATCHED_KEYS) for line in removed + added), (removed, added)
    assert patch_workload_text(patch.text, GRACE, source=path.name).text == patch.text  # idempotent


def test_existing_shutdown_timeout_is_replaced_in_both_spellings():
    text = _deployment('        args: ["--model", "m", "--shutdown-timeout", "30"]\n')
    patched = patch_workload_text(text, GRACE, source="d.yaml").text
    assert _pod(patched)["containers"][0]["args"] == ["--model", "m", "--shutdown-timeout", "226"]
    text = _deployment("        args:\n        - --shutdown-timeout=0  # aborts on SIGTERM\n")
    patched = patch_workload_text(text, GRACE, source="d.yaml").text
    assert "        - --shutdown-timeout=226  # aborts on SIGTERM\n" in patched


def test_windows_line_ends_are_kept(shared_dir):
    before = _real(shared_dir, "55").read_text(encoding="utf-8").replace("\n", "\r\n")
    patched = patch_workload_text(before, GRACE, source="crlf.yaml").text
    assert patched.count("\r\n") == patched.count("\n") == before.count("\n") + 6


def test_max_num_seqs_is_read_from_args_and_shell_strings(shared_dir):
    from planner.manifests.writer import vllm_argument

    text = _real(shared_dir, "55").read_text(encoding="utf-8")
    assert vllm_argument(text, "--max-num-seqs", source="55.yaml") == "64"
    assert vllm_argument(text, "--max-model-len", source="55.yaml") is None
    shell = _deployment(
        '        command: ["/bin/sh", "-c"]\n        args:\n        - vllm serve m --max-num-seqs 32 --port 8000\n'
    )
    assert vllm_argument(shell, "--max-num-seqs", source="s.yaml") == "32"


def test_inserted_keys_go_above_the_comment_of_the_key_they_precede():
    text = _deployment("        # the engine's flags\n        args: [--model, m]\n").replace(
        "      containers:", "      # one container\n      containers:"
    )
    patched = patch_workload_text(text, GRACE, source="d.yaml").text
    assert "      terminationGracePeriodSeconds: 241" in patched.split("      # one container\n")[0]
    assert "# the engine's flags\n        args:" in patched


def test_flow_style_args_get_the_flag_appended_in_place():
    text = _deployment('        args: ["--model", "m"]\n')
    patched = patch_workload_text(text, GRACE, source="d.yaml").text
    assert '        args: ["--model", "m", "--shutdown-timeout=226"]\n' in patched


def test_shell_string_is_not_patched_and_says_what_to_add():
    text = _deployment(
        '        command: ["/bin/sh", "-c"]\n        args:\n        - vllm serve m --max-num-seqs 64\n',
        image="ghcr.io/x/server:1",
    )
    patch = patch_workload_text(text, GRACE, source="d.yaml")
    assert _pod(patch.text)["containers"][0]["args"] == ["vllm serve m --max-num-seqs 64"]
    [warning] = patch.warnings
    assert "shell string" in warning and "--shutdown-timeout=226" in warning


def test_multi_document_file_patches_only_the_named_workload():
    text = (
        _deployment("        args: [--model, m]\n", name="a")
        + "---\n"
        + _deployment("        args: [--model, m]\n", name="b")
    )
    with pytest.raises(PlannerInputError, match="several workloads"):
        patch_workload_text(text, GRACE, source="two.yaml")
    patch = patch_workload_text(text, GRACE, source="two.yaml", target_name="b")
    first, second = list(yaml.safe_load_all(patch.text))
    assert first == yaml.safe_load(text.split("---\n")[0])
    assert second["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] == 241
    assert patch.document_index == 1
    assert workload_names(text, "two.yaml") == ["a", "b"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a: [1, 2\n", "d.yaml: not valid YAML at line"),
        ("apiVersion: v1\nkind: Service\nmetadata: {name: s}\n", "d.yaml: no Deployment or StatefulSet"),
        (
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec: {}\n",
            "d.yaml (document 1): spec.template: expected a mapping",
        ),
    ],
)
def test_bad_workload_files_name_the_file(text, message):
    with pytest.raises(PlannerInputError, match=message.replace("(", r"\(").replace(")", r"\)")):
        patch_workload_text(text, GRACE, source="d.yaml")


@pytest.mark.parametrize(
    ("tail", "outcome"),
    [
        ("        lifecycle:\n        args: [a]\n", "lifecycle is set but is not a mapping"),
        ("        lifecycle: x\n        args: [a]\n", "lifecycle is set but is not a mapping"),
        ("        lifecycle:\n          preStop:\n        args: [a]\n", "preStop is present but empty"),
        ("        args: []\n", "an empty list"),
        ("        args:\n        - |\n          --model m\n", "a multi-line item"),
        ("        args:\n        - |\n          vllm serve m\n", "shell string"),
    ],
)
def test_odd_layouts_are_left_alone_with_a_reason(tail, outcome):
    text = _deployment(tail)
    try:
        patch = patch_workload_text(text, GRACE, source="d.yaml")
    except PlannerInputError as error:
        assert outcome in str(error) and str(error).startswith("d.yaml (document 1): ")
        return
    assert any(outcome in warning for warning in patch.warnings)
    assert patch.text.count("lifecycle:") <= 1  # never a second lifecycle key


def test_no_vllm_container_asks_for_its_name():
    text = _deployment("        args: [serve]\n", image="nginx:1")
    with pytest.raises(PlannerInputError, match="--container"):
        patch_workload_text(text, GRACE, source="d.yaml")
    assert patch_workload_text(text, GRACE, source="d.yaml", container_name="server").container == "server"


def _deployment(container_tail: str, name: str = "d", image: str = "vllm/vllm-openai:v0.11.0") -> str:
    return (
        "apiVersion: apps/v1\n"
        "kind: Deployment\n"
        f"metadata:\n  name: {name}\n"
        "spec:\n"
        f"  selector:\n    matchLabels: {{app: {name}}}\n"
        "  template:\n"
        f"    metadata:\n      labels: {{app: {name}}}\n"
        "    spec:\n"
        "      containers:\n"
        "      - name: server\n"
        f"        image: {image}\n" + container_tail
    )
