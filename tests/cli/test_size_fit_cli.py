"""The size, fit and cards commands through the CLI: formats, files, errors and library equivalence."""

from __future__ import annotations

import csv
import io
import json

import pytest


from kvplan.plans.build import fit_from_names, size_from_names

from ..conftest import DATA, ROOT, json_rows


def test_size_json_deepseek_v3_one_token(invoke):
    rows = json_rows(invoke("size", "deepseek-v3", "--seq", "1", "--format", "json"))
    assert rows[0]["kv_bytes_per_token"] == 70_272
    assert rows[0]["kv_bytes_per_token_per_gpu"] == 70_272


def test_size_keys_scripts_depend_on(invoke):
    row = json_rows(invoke("size", "llama-3.1-70b", "--format", "json"))[0]
    for key in ("model", "seq_len", "batch", "kv_dtype", "tp", "pp", "engine", "kv_bytes_per_token",
                "kv_bytes_per_token_per_gpu", "kv_bytes_per_sequence", "kv_bytes_total"):
        assert key in row
    assert row["kv_bytes_per_sequence"] == 40 * 2**30


def test_size_lists_give_one_row_per_point(invoke):
    rows = json_rows(invoke("size", "llama-3.1-8b", "--seq", "4k,32k,128k", "--batch", "1,8",
                            "--kv-dtype", "bf16,fp8", "--format", "json"))
    assert len(rows) == 3 * 2 * 2
    assert {(r["seq_len"], r["batch"], r["kv_dtype"]) for r in rows} == {
        (s, b, d) for s in (4096, 32768, 131072) for b in (1, 8) for d in ("bf16", "fp8")}


def test_cli_json_equals_library(invoke):
    cli = json_rows(invoke("size", "qwen3-32b", "--seq", "8k,32k", "--batch", "4", "--tp", "2",
                           "--format", "json"))
    lib = size_from_names("qwen3-32b", seq=[8192, 32768], batch=[4], tp=[2]).rows
    assert cli == json.loads(json.dumps(lib))
    cli = json_rows(invoke("fit", "llama-3.1-8b", "h100-sxm", "--max-model-len", "32k", "--format", "json"))
    lib = fit_from_names("llama-3.1-8b", "h100-sxm", seq=[32768]).rows
    assert cli == json.loads(json.dumps(lib))


def test_hf_engine_shows_decompressed_mla(invoke):
    rows = json_rows(invoke("size", "deepseek-v3", "--engine", "vllm,hf,hf4", "--seq", "1", "--format", "json"))
    assert [r["kv_bytes_per_token"] for r in rows] == [70_272, 70_272, 4_997_120]


def test_alias_works_where_name_does(invoke):
    row = json_rows(invoke("size", "meta-llama/Llama-3.1-70B-Instruct", "--seq", "1k", "--format", "json"))[0]
    assert row["model"] == "llama-3.1-70b"


def test_config_json_path_works_where_name_does(invoke):
    row = json_rows(invoke("size", DATA / "hf_configs" / "llama-3.1-8b.json", "--format", "json"))[0]
    assert row["kv_bytes_per_token"] == 32 * 2 * 8 * 128 * 2


@pytest.mark.parametrize("fmt", ["table", "markdown", "csv", "json"])
def test_every_format_renders(invoke, fmt):
    res = invoke("size", "llama-3.1-70b", "--seq", "128k", "--format", fmt)
    assert res.exit_code == 0, res.stderr
    out = res.stdout
    if fmt == "csv":
        rows = list(csv.DictReader(io.StringIO(out)))
        assert rows[0]["kv_bytes_per_sequence"] == str(40 * 2**30)
    elif fmt == "json":
        assert json.loads(out)[0]["seq_len"] == 131072
    else:
        assert "40.00 GiB" in out
    if fmt == "markdown":
        assert out.splitlines()[2].startswith("| seq len |")


def test_output_file_is_written_whole(invoke, tmp_path):
    target = tmp_path / "size.csv"
    res = invoke("size", "llama-3.1-8b", "--format", "csv", "-o", target)
    assert res.exit_code == 0 and res.stdout == ""
    assert "Wrote" in res.stderr
    assert target.read_text().startswith("model,")
    assert [p.name for p in tmp_path.iterdir()] == ["size.csv"]


def test_explain_prints_formula_with_numbers(invoke):
    res = invoke("size", "llama-3.1-70b", "--tp", "16", "--explain")
    assert "8 kv_heads × (128 + 128) × 2 B = 4,096 B/token/layer" in res.stdout
    assert "40,960 B on one GPU" in res.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["size", "llama-3.1-7b"], "unknown model 'llama-3.1-7b'"),
        (["size", "llama-3.1-70b", "--seq", "-5"], "token count must be > 0"),
        (["size", "llama-3.1-70b", "--seq", "12x"], "cannot read a token count '12x'"),
        (["size", "llama-3.1-70b", "--tp", "3"], "tp=3 does not fit 8 KV heads"),
        (["size", "llama-3.1-70b", "--kv-dtype", "fp7"], "unknown KV cache dtype 'fp7'"),
        (["size", "llama-3.1-70b", "--engine", "tgi"], "unknown engine 'tgi'"),
        (["size", "llama-3.1-70b", "--batch", "0"], "token count must be > 0"),
        (["fit", "llama-3.1-70b", "h100-sxm", "--max-model-len", "1m"], "exceeds llama-3.1-70b's max_position"),
        (["fit", "llama-3.1-70b", "h100-sxmm"], "unknown hardware 'h100-sxmm'"),
    ],
)
def test_bad_input_one_error_line_and_exit_2(invoke, args, message, tmp_path):
    out = tmp_path / "out.json"
    res = invoke(*args, "--format", "json", "-o", out)
    assert res.exit_code == 2, res.stdout + res.stderr
    lines = res.stderr.strip().splitlines()
    assert lines[0].startswith("Error: ") and message in lines[0]
    assert lines[1].startswith("Hint: ")
    assert "Traceback" not in res.stderr and res.stdout == ""
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_unknown_model_suggests(invoke):
    res = invoke("size", "llama-3.1-7b")
    assert "llama-3.1-70b" in res.stderr.splitlines()[1] or "llama-3.1-8b" in res.stderr.splitlines()[1]


def test_non_json_config_file(invoke, tmp_path):
    bad = tmp_path / "config.json"
    bad.write_text("{not json")
    res = invoke("size", bad)
    assert res.exit_code == 2
    assert res.stderr.startswith("Error: ") and "not valid JSON" in res.stderr


def test_malformed_card(invoke, tmp_path):
    card = tmp_path / "broken.yaml"
    card.write_text("name: broken\nfamily: x\nsource: [x]\nparams_total: -1\n")
    res = invoke("size", card)
    assert res.exit_code == 2
    assert "params_total" in res.stderr.splitlines()[0]


def test_fit_does_not_fit_exits_1_with_verdict(invoke):
    res = invoke("fit", "llama-3.1-70b", "h100-sxm", "--max-model-len", "128k", "--batch", "4", "--tp", "2")
    assert res.exit_code == 1
    assert "does not fit" in res.stdout


def test_fit_keys(invoke):
    row = json_rows(invoke("fit", "llama-3.1-70b", "h100-sxm", "--tp", "4", "--format", "json"))[0]
    for key in ("kv_cache_memory_bytes", "num_blocks", "kv_cache_tokens", "max_concurrency", "fits"):
        assert key in row
    assert row["kv_cache_tokens"] == row["num_blocks"] * 16


def test_cards_list_show_validate_import(invoke, tmp_path):
    listing = json_rows(invoke("cards", "list", "--format", "json"))
    names = {r["name"] for r in listing}
    assert {"llama-3.1-70b", "deepseek-v3", "qwen3-next-80b-a3b"} <= names
    hw = json_rows(invoke("cards", "list", "hardware", "--format", "json"))
    assert "h100-sxm" in {r["name"] for r in hw}
    shown = invoke("cards", "show", "deepseek-v3", "--format", "json")
    assert json.loads(shown.stdout)["layer_groups"][0]["kind"] == "mla"
    valid = invoke("cards", "validate")
    assert valid.exit_code == 0, valid.stdout
    out = tmp_path / "card.yaml"
    imported = invoke("cards", "import", DATA / "hf_configs" / "qwen2.5-72b.json", "--name", "my-72b", "-o", out)
    assert imported.exit_code == 0, imported.stderr
    row = json_rows(invoke("size", out, "--format", "json"))[0]
    assert row["kv_bytes_per_token"] == 327_680 and row["model"] == "my-72b"


def test_cards_validate_reports_bad_file(invoke, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: Bad Name\n")
    res = invoke("cards", "validate", bad)
    assert res.exit_code == 2
    assert "bad.yaml" in res.stdout


def test_user_card_directories_shadow_and_extend_the_shipped_ones(invoke, tmp_path, monkeypatch):
    """--cards DIR and KVPLAN_CARDS_PATH add cards (and a user card of a shipped name wins)."""
    from kvplan.cards import loader

    (tmp_path / "model_cards").mkdir()
    card = (ROOT / "examples" / "cards" / "llama-65b.yaml").read_text()
    (tmp_path / "model_cards" / "llama-65b.yaml").write_text(card)
    row = json_rows(invoke("size", "huggyllama/llama-65b", "--seq", "1k", "--cards", tmp_path, "--format", "json"))[0]
    assert row["model"] == "llama-65b" and row["kv_bytes_per_token"] == 2_621_440
    loader._index.cache_clear()
    monkeypatch.setenv("KVPLAN_CARDS_PATH", str(tmp_path))
    row = json_rows(invoke("size", "llama-65b", "--seq", "1k", "--format", "json"))[0]
    assert row["kv_bytes_per_token"] == 2_621_440
    loader._index.cache_clear()


def test_kvplan_debug_shows_the_traceback(invoke, monkeypatch):
    monkeypatch.setenv("KVPLAN_DEBUG", "1")
    res = invoke("size", "no-such-model")
    assert res.exit_code != 0 and res.exception is not None
    assert type(res.exception).__name__ == "UnknownCardError"
