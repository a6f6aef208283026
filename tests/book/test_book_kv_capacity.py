"""The KV chapter on real model configs and their real vLLM logs, against `planner kv`.

Each run copies the config to a temporary folder outside data/models (where a user's own
config would be), runs the chapter with papermill, and checks that the glued figures equal
what `planner kv --json` prints for the same files. Three runs keep `make test` short.
"""

import ast
import json
import shutil

import nbformat
import papermill
import pytest

from planner.capacity.replica_kv import replica_kv
from planner.cli import main
from planner.explorers.kv_capacity import kv_capacity_explorer
from planner.readers.metrics import read_metrics_scrape
from planner.readers.model_config import read_model_config
from planner.readers.vllm_log import read_vllm_log
from planner.vllm.release import CURRENT_VLLM_VERSION
from tests.conftest import DATA_DIR, TEST_DATA_DIR
from tests.notebooks import BOOK_DIR, glued, run_chapter

LOGS = TEST_DATA_DIR / "vllm_logs"
CHAPTER = BOOK_DIR / "kv_capacity.ipynb"

# (model config, log, command line put in front of the log, expected TP x PP)
REAL_RUNS = [
    ("gemma-3-4b-it", "orbit-ai-gemma-3-4b-rocm.log", "", (1, 1)),
    # The fixture keeps only the KV lines; the run's command line gave the sizes.
    (
        "deepseek-v2-lite",
        "vllm-20665-deepseek-v2-lite-pp2-tp2.log",
        "$ vllm serve deepseek-ai/DeepSeek-V2-Lite --tensor-parallel-size=2 "
        "--pipeline-parallel-size=2 --max-model-len 1024\n",
        (2, 2),
    ),
    ("gpt-oss-120b", "dennislee22-gpt-oss-120b-tp4.log", "", (4, 1)),
]


def _cli_json(capsys, *argv) -> dict:
    assert main(["kv", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize(("stem", "log_name", "command_line", "parallel"), REAL_RUNS, ids=[run[0] for run in REAL_RUNS])
def test_chapter_equals_the_cli_on_real_logs(tmp_path, capsys, stem, log_name, command_line, parallel):
    own = tmp_path / "my-model"
    own.mkdir()
    config = own / "config.json"
    shutil.copy(DATA_DIR / "models" / f"{stem}.json", config)
    log = own / "vllm.log"
    log.write_text(command_line + (LOGS / log_name).read_text())
    values = glued(run_chapter("kv_capacity", tmp_path, model_config_path=str(config), vllm_log_path=str(log)))
    cli = _cli_json(capsys, "--config", str(config), "--vllm-log", str(log), "--tokens-per-request", "1000")
    assert values["kv_tokens_count"] == cli["kv_tokens"]
    assert values["kv_tokens"] == f"{cli['kv_tokens']:,}"
    assert values["max_concurrency_value"] == cli["max_concurrency"]
    assert values["max_concurrency"] == f"{cli['max_concurrency']:.2f}"
    assert values["requests"] == f"{cli['concurrent_requests']:,.0f}"
    assert (values["tp"], values["pp"]) == parallel == (cli["tensor_parallel_size"], cli["pipeline_parallel_size"])
    assert values["memory_source"] == "the start-up log"
    # The page reproduces what vLLM printed, and says so.
    assert cli["log_consistent"] is True
    assert "reproduces every figure" in values["log_summary"]
    # Every token count the log printed lies in the range the page gives for the printed
    # memory (the point figure differs by the GiB rounding, up to a few hundred tokens).
    low, high = (int(values[k].replace(",", "")) for k in ("kv_tokens_low", "kv_tokens_high"))
    assert list(cli["kv_tokens_range"]) == [low, high]
    assert all(low <= printed <= high for printed in read_vllm_log(log).kv_cache_tokens)
    # Prose follows the input: the model's name, not the default's.
    assert values["model_name"] != "qwen2.5-7b-instruct-awq"


def test_help_notebook_lists_every_parameter():
    cell = next(c for c in nbformat.read(CHAPTER, as_version=4).cells if "parameters" in c.metadata.get("tags", []))
    assigned = {node.target.id for node in ast.parse(cell.source).body if isinstance(node, ast.AnnAssign)}
    assert {
        "kv_cache_dtype",
        "vllm_log_path",
        "pipeline_parallel_size",
        "max_num_batched_tokens",
        "vllm_version",
    } <= assigned
    # papermill skips a line holding a second "=", so no comment may contain one.
    assert set(papermill.inspect_notebook(str(CHAPTER))) == assigned


def test_explorer_opens_on_the_page_inputs():
    qwen = read_model_config(DATA_DIR / "models" / "qwen2.5-7b-instruct-awq.json")
    replica = replica_kv(qwen, default_available_kv_gib=13.76, tokens_per_request=1000.0)
    memory, tp, dtype, length, summary = kv_capacity_explorer(replica).children
    assert (memory.value, length.value) == (13.76, 1000.0)
    # The browser snaps a slider to min + k x step: both values must be positions.
    for slider in (memory, length):
        positions = (slider.value - slider.min) / slider.step
        assert abs(positions - round(positions)) < 1e-6
    assert (tp.value, dtype.value) == (1, "auto")
    assert f"<b>{replica.capacity.kv_tokens:,}</b> tokens" in summary.value
    assert f"<b>{replica.concurrent_requests:,.0f}</b> requests of 1,000 tokens" in summary.value


def test_explorer_keeps_per_stage_memory_of_a_pipeline_log(tmp_path):
    log = tmp_path / "vllm.log"
    log.write_text("vllm serve m -tp 2 -pp 2\n" + (LOGS / "vllm-20665-deepseek-v2-lite-pp2-tp2.log").read_text())
    deepseek = read_model_config(DATA_DIR / "models" / "deepseek-v2-lite.json")
    replica = replica_kv(deepseek, log=read_vllm_log(log), tokens_per_request=1000.0)
    memory, *_, summary = kv_capacity_explorer(replica).children
    assert memory.value == 11.33
    assert f"<b>{replica.capacity.kv_tokens:,}</b> tokens" in summary.value


def test_default_chapter_reads_hybrids_prefixes_and_the_published_log_right(tmp_path):
    values = glued(run_chapter("kv_capacity", tmp_path))
    prose = "\n".join(c.source for c in nbformat.read(CHAPTER, as_version=4).cells if c.cell_type == "markdown")
    # Hybrids: the page's own table shows Gemma 3 holding fewer requests than tokens / length.
    assert "fit more requests than their token count suggests" not in prose
    assert "more for sliding-window hybrids" not in prose
    assert values["gemma_fewer_or_more"] == "fewer"
    assert int(values["gemma_requests"]) < int(values["gemma_tokens_over_length"].replace(",", "")) / 4
    # The published 257,584 against 257,648: rounding of the memory line, under every rule.
    assert values["w30_from_printed"] == "257,648"
    assert (values["log_memory_low_gib"], values["log_memory_high_gib"]) == ("13.7565", "13.7573")
    assert (values["odd_blocks_tokens"], values["odd_capacity_tokens"]) == ("257,648", "257,616")
    assert values["current_release"] == values["vllm_version"] == CURRENT_VLLM_VERSION
    # Shared prefixes: half of each 800-token prompt shared lifts 258 requests to 429.
    assert (values["hit_frac"], values["shared_tokens"]) == ("50.0%", "400")
    assert (values["requests_unshared"], values["requests_shared"]) == ("258", "429")
    assert (values["kv_per_request_shared"], values["overstatement"]) == ("601", "66%")
    assert values["hit_source"] == "the prefix_cache_hit_frac parameter"


def test_chapter_reads_the_hit_fraction_from_a_real_scrape(tmp_path, shared_dir):
    scrape = shared_dir / "real-world" / "metrics" / "vllm-0.25.1-opt125m-tp2-loaded.txt"
    values = glued(run_chapter("kv_capacity", tmp_path, metrics_scrape_path=str(scrape)))
    assert values["hit_frac_value"] == read_metrics_scrape(scrape).prefix_cache_hit_frac
    assert values["hit_frac"] == "0.7%" and values["hit_source"].startswith(f"the scrape {scrape}")
    assert values["requests_shared"] == "259"  # random benchmark prompts share almost nothing


def test_chapter_shares_nothing_when_the_scrape_says_prefix_caching_is_off(tmp_path, shared_dir):
    real = shared_dir / "real-world" / "metrics" / "vllm-0.25.1-opt125m-tp2-loaded.txt"
    scrape = tmp_path / "scrape.txt"
    scrape.write_text(real.read_text().replace('enable_prefix_caching="True"', 'enable_prefix_caching="False"'))
    values = glued(run_chapter("kv_capacity", tmp_path, metrics_scrape_path=str(scrape)))
    assert values["hit_frac"] == "0.0%" and "prefix caching is off" in values["hit_source"]
    assert values["requests_shared"] == values["requests_unshared"] == "258"
