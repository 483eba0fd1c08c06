"""Property-based fuzz (hypothesis) over card fields and flag values.

Whatever the value, kvplan either answers (exit 0 or 1, finite non-negative figures in its JSON)
(a budget below zero only with exit 1, "does not fit") or refuses (exit 2, one ``Error:`` line and a ``Hint:``, no traceback, no output file).
"""

from __future__ import annotations

import json
import math

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .corpus import MODEL, ROOT
from .harness import assert_refused, run_inprocess

NO_CI = {"GITHUB_ACTIONS": None, "GITHUB_STEP_SUMMARY": None, "KVPLAN_DEBUG": None}
FUZZ = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

numbers = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([0, 1, -1, 2**31, 2**32, 2**63, 10**12, 10**18]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12), st.none(), st.booleans(),
)
card_fields = st.sampled_from(["params_total", "hidden_size", "vocab_size", "num_attention_heads", "max_context",
                               "intermediate_size", "group.count", "group.num_kv_heads", "group.head_dim"])


def _check(res, output=None) -> None:
    assert res.exit_code in (0, 1, 2), res.stderr
    assert "Traceback" not in res.stderr
    if res.exit_code == 2:
        assert_refused(res, outputs=[output] if output else [])
        return
    text = output.read_text(encoding="utf-8") if output is not None else res.stdout
    for row in json.loads(text):
        for key, value in row.items():
            if isinstance(value, float):
                assert math.isfinite(value) or value == math.inf and "concurrency" in key, (key, value)
            if (res.exit_code == 0 and isinstance(value, (int, float)) and not isinstance(value, bool)
                    and key.endswith(("_bytes", "_tokens"))):
                assert value >= 0, (key, value)  # exit 1 ("does not fit") may report a negative KV budget


@FUZZ
@given(field=card_fields, value=numbers)
def test_fuzz_model_card_fields(tmp_path_factory, field, value):
    card = json.loads(json.dumps(MODEL))
    card.pop("field_sources", None)
    if field.startswith("group."):
        card["layer_groups"][0][field.split(".", 1)[1]] = value
    else:
        card[field] = value
    path = tmp_path_factory.mktemp("fuzz") / "card.yaml"
    path.write_text(yaml.safe_dump(card), encoding="utf-8")
    _check(run_inprocess(["size", path, "--seq", "8k", "--format", "json"], env=NO_CI))


flag_text = st.one_of(
    st.text(max_size=16),
    st.from_regex(r"\A-?[0-9]{1,25}(\.[0-9]{1,5})?(e[+-]?[0-9]{1,4})?(k|m|GiB|GB|ms|s|x)?\Z", fullmatch=True),
    st.sampled_from(["0", "-1", "nan", "inf", "1e308", ",", "", " ", "128k", "80GiB"]),
)


@FUZZ
@given(flag=st.sampled_from(["--seq", "--batch", "--tp", "--kv-dtype", "--block-size"]), value=flag_text)
def test_fuzz_size_flags(tmp_path_factory, flag, value):
    if value.startswith("-") and not value[1:2].isdigit():
        value = " " + value  # an option-like value is a usage error of its own; keep it a value
    out = tmp_path_factory.mktemp("fuzz") / "out.json"
    _check(run_inprocess(["size", "llama-3.1-8b", flag, value, "-o", out], env=NO_CI), out if out.exists() else None)


@FUZZ
@given(flag=st.sampled_from(["--gpu-memory", "--kv-cache-memory", "--max-model-len", "--max-num-seqs",
                             "--max-num-batched-tokens", "--gpu-memory-utilization"]), value=flag_text)
def test_fuzz_fit_flags(tmp_path_factory, flag, value):
    if value.startswith("-") and not value[1:2].isdigit():
        value = " " + value
    out = tmp_path_factory.mktemp("fuzz") / "out.json"
    res = run_inprocess(["fit", "llama-3.1-8b", "h100-sxm", flag, value, "-o", out], env=NO_CI)
    _check(res, out if out.exists() else None)
