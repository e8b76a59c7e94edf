"""The dense signal of file localization: a static embedding model over paths and defined names, added
to the model-free ranking (`--dense`)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from tokenizers import Tokenizer
from tokenizers.models import WordLevel
from tokenizers.pre_tokenizers import Whitespace

import agentless.localize.dense as dense
import agentless.pipeline as pipeline
from agentless.localize.dense import StaticEmbedder, dense_scores, load_wordllama, names_bag
from agentless.localize.files import RankedFile, RankWeights, add_dense, rank_files
from agentless.localize.index import IndexCache
from agentless.pipeline import Context, RunConfig, localize_files
from swerl.errors import UserError
from swerl.execution.instances import Instance
from swerl.git.clones import RepoCache

# The module that asserts is named for rewriting and assertions; the issue says "check". Only the
# embedding relates the words: no term of the issue occurs in that module.
FILES = {
    "pkg/__init__.py": "",
    "pkg/rewrite.py": "class AssertionRewriter:\n    def visit_assert(self, node):\n        return node\n",
    "pkg/cart.py": "class Cart:\n    def add_item(self, item):\n        '''Add an item; no check here.'''\n",
    "pkg/report.py": "def format_message(text):\n    return text\n",
    "tests/test_rewrite.py": "def test_assert():\n    assert AssertionRewriter\n",
}
ISSUE = "A failing check gives a wrong result: the check fails"

# A 4-dimension table: one direction per topic, unknown words at zero.
TOPICS = {
    "assert": 0,
    "assertion": 0,
    "check": 0,
    "failing": 0,
    "cart": 1,
    "item": 1,
    "add": 1,
    "message": 2,
    "text": 2,
    "format": 2,
}


def tiny_embedder() -> StaticEmbedder:
    vocab = {"[UNK]": 0, **{word: i + 1 for i, word in enumerate(TOPICS)}}
    tokenizer = Tokenizer(WordLevel(vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = Whitespace()
    table = np.zeros((len(vocab), 4), dtype=np.float32)
    for word, topic in TOPICS.items():
        table[vocab[word], topic] = 1.0
    return StaticEmbedder(tokenizer, table)


def _index(tmp_path: Path) -> tuple[RepoCache, str, IndexCache]:
    src = tmp_path / "clones" / "pkg__pkg"
    for rel, text in FILES.items():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_text(text)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q"], cwd=src, check=True)
    subprocess.run(["git", "add", "-A"], cwd=src, check=True)
    subprocess.run([*git, "commit", "-qm", "x"], cwd=src, check=True)
    sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=src, capture_output=True, text=True).stdout.strip()
    repos = RepoCache(tmp_path / "cache", mirror_dir=tmp_path / "clones", offline=True)
    return repos, sha, IndexCache(repos)


def test_names_bag_holds_the_path_and_the_defined_names() -> None:
    bag = names_bag("src/pkg/assertion_rewrite.py", ("AssertionRewriter", "visit_assert"))
    assert {"src", "pkg", "assertion", "rewrite", "rewriter", "visit", "assert"} <= set(bag)
    assert bag["assertion"] == 2 and "py" not in bag


def test_dense_signal_finds_the_module_the_issue_describes_in_other_words(tmp_path: Path) -> None:
    _, sha, cache = _index(tmp_path)
    index = cache.get("pkg/pkg", sha)
    similarity = dense_scores(index, ISSUE, tiny_embedder())
    assert max(similarity, key=lambda p: similarity[p]) in ("pkg/rewrite.py", "tests/test_rewrite.py")
    assert similarity["pkg/rewrite.py"] == pytest.approx(1.0) and similarity["pkg/cart.py"] == 0.0

    full = rank_files(index, ISSUE, top=len(index.stats))
    assert full[0].path == "pkg/cart.py"  # the only file that spells "check"
    assert "pkg/rewrite.py" not in [r.path for r in full]  # no shared word at all

    fused = add_dense(full, similarity, weights=RankWeights(dense=0.5))
    assert [r.path for r in fused[:2]] == ["pkg/cart.py", "pkg/rewrite.py"]
    rewrite = fused[1]
    assert rewrite.reasons == {"dense": pytest.approx(0.5 * full[0].score, abs=1e-4)}
    # The test file defines the same names but is demoted like any test file's evidence.
    test_file = next(r for r in fused if r.path == "tests/test_rewrite.py")
    assert test_file.reasons["dense"] == pytest.approx(
        RankWeights().test_factor * rewrite.reasons["dense"], abs=1e-4
    )
    # A bonus as large as the top score overtakes a words-only ranking; weight 0 changes nothing.
    assert add_dense(full, similarity, weights=RankWeights(dense=1.5))[0].path == "pkg/rewrite.py"
    assert add_dense(full, similarity, weights=RankWeights(dense=0.0)) == full[:50]
    assert add_dense(full, {}, weights=RankWeights(dense=0.5)) == full[:50]


def test_dense_bonus_is_relative_to_the_median_and_the_top_score() -> None:
    ranked = [RankedFile("a.py", 4.0, {"bm25": 4.0}), RankedFile("b.py", 2.0, {"bm25": 2.0})]
    similarity = {"a.py": 0.5, "b.py": 0.9, "c.py": 0.5, "d.py": 0.7, "e.py": 0.1}
    fused = {r.path: r for r in add_dense(ranked, similarity, weights=RankWeights(dense=0.5))}
    assert fused["b.py"].score == pytest.approx(2.0 + 0.5 * 4.0)  # the most similar: the full bonus
    assert fused["d.py"].score == pytest.approx(0.5 * 4.0 * 0.5)  # halfway between median and best
    assert fused["a.py"].reasons == {"bm25": 4.0}  # at the median: no bonus
    assert "e.py" not in fused and "c.py" not in fused  # below or at the median, and no other evidence
    # All files equally similar: nothing to tell them apart, so the ranking is unchanged.
    flat = dict.fromkeys(similarity, 0.4)
    assert add_dense(ranked, flat, weights=RankWeights(dense=0.5)) == ranked


def test_run_with_dense_records_the_option_and_the_bonus(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repos, sha, cache = _index(tmp_path)
    monkeypatch.setattr(pipeline, "load_wordllama", tiny_embedder)
    ctx = Context(repos=repos, indexes=cache)
    inst = Instance("pkg__pkg-1", "pkg/pkg", sha, ISSUE)
    row = localize_files(inst, ctx, RunConfig(model_localization=False, dense=0.5))
    assert row["files"][:2] == ["pkg/cart.py", "pkg/rewrite.py"]
    assert "dense" in dict((path, reasons) for path, _, reasons in row["model_free"])["pkg/rewrite.py"]
    off = localize_files(inst, ctx, RunConfig(model_localization=False))
    assert "pkg/rewrite.py" not in off["files"]
    assert pipeline.stage_options(RunConfig(dense=0.2))["localize_files"]["dense"] == 0.2
    assert pipeline.stage_options(RunConfig())["localize_files"]["dense"] is None  # as before the option


def test_missing_package_is_a_user_error_naming_the_install(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    load_wordllama.cache_clear()
    monkeypatch.setattr(dense.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(UserError, match=r"pip install 'swerl\[dense\]'"):
        load_wordllama()
    # The command stops before any stage: no failed row per instance in the run folder.
    from swerl.cli.main import main

    out, dataset = tmp_path / "run", tmp_path / "instances.jsonl"
    row = {"instance_id": "o__r-1", "repo": "o/r", "base_commit": "0" * 40, "problem_statement": "p"}
    dataset.write_text(json.dumps(row) + "\n")
    argv = ["agentless", "localize", "--dataset", str(dataset), "--dense", "0.2", "--out", str(out)]
    assert main(argv) == 1
    assert "needs the wordllama package" in capsys.readouterr().err and not out.exists()
    load_wordllama.cache_clear()


@pytest.mark.skipif(importlib.util.find_spec("wordllama") is None, reason="the dense extra is not installed")
def test_wordllama_table_loads_offline_and_relates_words(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    load_wordllama.cache_clear()
    embedder = load_wordllama()
    assert embedder.dim == 256
    idf = dict.fromkeys(["assertion", "assert", "rewrite", "shopping", "cart", "basket"], 1.0)
    vec = {w: embedder.embed(Counter([w]), idf) for w in idf}
    assert float(vec["cart"] @ vec["basket"]) > float(vec["cart"] @ vec["assertion"])
    assert float(vec["assertion"] @ vec["assert"]) > float(vec["assertion"] @ vec["shopping"])
