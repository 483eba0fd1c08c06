"""What-if: the NVIDIA NIM rows of tests/data/measurements/closed_loop.csv (Llama-3.3-70B 1.8.0, 2×H100 fp8 TP2) replayed
three ways, to see where their KV-bound plateau and their slow first tokens come from.

Run: python benchmarks/closed_loop_nim_whatif.py

Columns, each the replay's output tokens/s, mean TTFT and mean ITL (the page prints one TTFT and one ITL per row
without saying mean or median; the rows record them as means):

* ``default``: the row as scored (``benchmarks/score_closed_loop.py``): kvplan's KV dtype for the profile (the page
  states none: bf16), kvplan's pool for it, every engine step priced by the per-operator model.
* ``fp8 KV``: the same with an FP8 KV cache (half the bytes per token: about twice the requests in the pool). The
  page does not say which KV dtype NIM's fp8 profile runs; this is a what-if, not a reading of the row.
* ``unpadded mixed``: the default KV, with steps that carry a prompt priced at their own token count. kvplan pads a
  mixed step's tokens up to the engine's CUDA-graph sizes (``kvplan/calc/operators.py operator_pass``; TensorRT-LLM's
  go to 8,192, so a 5,000-token prompt step is priced as 8,192 tokens); TensorRT-LLM's PyTorch scheduler runs a CUDA
  graph only for a step with no context request (``ScheduledRequests.can_run_cuda_graph``: ``return (not
  self.context_requests)``), so such a step is not padded there.
* ``both``: fp8 KV and unpadded mixed steps.

Not a score and nothing is fitted: no default changes with these figures.
"""

from __future__ import annotations

from contextlib import contextmanager

from closed_loop_rows import deployment, replay, rows
import kvplan.plans.sizing.perfmodel as perfmodel


@contextmanager
def unpadded_mixed_steps():
    """Steps with a prompt chunk priced at their own token count (no CUDA-graph padding); decode-only steps unchanged."""
    priced = perfmodel.operator_pass

    def operator_pass(*args, phase="decode", graph_sizes=(), **kw):
        return priced(*args, phase=phase, graph_sizes=() if phase == "mixed" else graph_sizes, **kw)

    perfmodel.operator_pass = operator_pass
    try:
        yield
    finally:
        perfmodel.operator_pass = priced


def _cells(out) -> str:
    return f"{out['output_tokens_per_s']:,.0f} / {out['ttft_mean_s'] * 1e3:,.0f} / {out['itl_mean_s'] * 1e3:.1f}"


def main() -> None:
    print("| ISL/OSL | C | measured tok/s / TTFT ms / ITL ms | default (pool tokens, requests at ISL+OSL) | fp8 KV "
          "(pool, requests) | unpadded mixed | both |")
    print("|---|---:|---|---|---|---|---|")
    for r in rows():
        if not r["engine"].startswith("nvidia-nim"):
            continue
        context = int(r["isl"]) + int(r["osl"])
        cells = []
        for kv in ("", "fp8"):
            dep = deployment(dict(r, kv_dtype=kv))
            tokens = dep.pool.tokens_per_gpu
            cells.append(f"{_cells(replay(r, dep))} ({tokens:,}, {tokens // context})")
        with unpadded_mixed_steps():
            cells.append(_cells(replay(r, deployment(r))))
            cells.append(_cells(replay(r, deployment(dict(r, kv_dtype="fp8")))))
        print(f"| {r['isl']}/{r['osl']} | {r['concurrency']} | {float(r['output_tokens_per_s']):,.0f} / "
              f"{float(r['ttft_mean_ms']):,.0f} / {float(r['itl_mean_ms']):.1f} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
