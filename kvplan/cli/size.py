"""``kvplan size MODEL``: KV bytes per token, per sequence, per GPU and in total."""

from __future__ import annotations

from typing import Annotated

import typer

from kvplan.cli.options import (BatchOpt, BlockOpt, CardsOpt, EngineOpt, ExplainOpt, FormatOpt, KVDtypeOpt,
                                MaxBatchedTokensOpt, OutputOpt, PPOpt, SeqOpt, TPOpt, cards_dirs, emit)
from kvplan.plans.build import size_from_names
from kvplan.units import parse_list, parse_tokens, split_items


def parse_ints(text: str, what: str) -> list[int]:
    return parse_list(text, parse_tokens, what=what)


def parse_names(text: str, what: str = "--kv-dtype/--engine") -> list[str]:
    return split_items(text, what=what)


def size_command(
    model: Annotated[str, typer.Argument(help="Card name, Hugging Face repo id, card file or config.json.")],
    seq: SeqOpt = "128k",
    batch: BatchOpt = "1",
    kv_dtype: KVDtypeOpt = "auto",
    tp: TPOpt = "1",
    pp: PPOpt = 1,
    engine: EngineOpt = "vllm",
    block_size: BlockOpt = None,
    max_num_batched_tokens: MaxBatchedTokensOpt = None,
    fmt: FormatOpt = None,
    output: OutputOpt = None,
    explain: ExplainOpt = False,
    cards: CardsOpt = None,
) -> None:
    """KV-cache size: per token (one copy), per GPU (with replication), per sequence, in total."""
    result = size_from_names(model, parse_ints(seq, "--seq"), parse_ints(batch, "--batch"),
                             parse_names(kv_dtype, "--kv-dtype"), parse_ints(tp, "--tp"), pp,
                             parse_names(engine, "--engine"), block_size=block_size,
                             max_num_batched_tokens=max_num_batched_tokens, cards=cards_dirs(cards))
    emit(result, fmt, output, explain)
