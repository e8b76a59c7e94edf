"""A dense signal for file localization: a static embedding model, offline, over each file's names.

BM25 matches an issue's words; an issue that describes behaviour ("the assertion message is rewritten
wrongly") may share few words with the module that implements it (`rewrite.py`, `AssertionRewriter`).
Embeddings match related words. A static model (one vector per token, a text's vector is a weighted
mean) costs a table look-up per term, so every file of a commit can be scored for every issue, which a
transformer encoder cannot do on a CPU (MiniLM took 35-95 s an instance on a few files' summaries).

A file's text is its path and the names it defines (already in the index, so no file is read): what a
developer scans in a tree and a skeleton. Terms are weighted by (1 + log count) x idf, the idf over the
commit's files, on both sides, so frequent words of the code base say little. The model is WordLlama's
`l2_supercat` table (256 dimensions, 32,000 tokens), which its PyPI wheel ships with its tokenizer; it is
read straight from the installed package, never from a hub. It is optional: `pip install 'swerl[dense]'`.
"""

from __future__ import annotations

import importlib.util
import math
from collections import Counter
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

import numpy as np

from agentless.localize.index import RepoIndex
from swerl.errors import UserError
from swerl.retrieval.bm25 import terms

INSTALL_HINT = "pip install 'swerl[dense]'  (or: pip install wordllama)"
_WEIGHTS = "weights/l2_supercat_256.safetensors"
_TOKENIZER = "tokenizers/l2_supercat_tokenizer_config.json"


class StaticEmbedder:
    """Vectors of terms from a token table: a term's vector is the mean of its tokens' rows.

    Terms repeat across files and issues, so each is tokenized once and kept (`_rows`)."""

    def __init__(self, tokenizer: object, table: np.ndarray) -> None:
        self.tokenizer = tokenizer
        self.table = np.asarray(table, dtype=np.float32)
        self._rows: dict[str, int] = {}
        self._vectors = np.zeros((0, self.table.shape[1]), dtype=np.float32)

    @property
    def dim(self) -> int:
        return int(self.table.shape[1])

    def rows(self, words: Sequence[str]) -> np.ndarray:
        """Row numbers of `words` in `vectors`, embedding the ones not seen before."""
        new = [w for w in dict.fromkeys(words) if w not in self._rows]
        if new:
            encoded = self.tokenizer.encode_batch(new, add_special_tokens=False)  # type: ignore[attr-defined]
            added = np.zeros((len(new), self.dim), dtype=np.float32)
            for i, enc in enumerate(encoded):
                if enc.ids:
                    added[i] = self.table[enc.ids].mean(axis=0)
            start = len(self._rows)
            self._rows.update((w, start + i) for i, w in enumerate(new))
            self._vectors = np.concatenate([self._vectors, added])
        return np.fromiter((self._rows[w] for w in words), dtype=np.int64, count=len(words))

    @property
    def vectors(self) -> np.ndarray:
        return self._vectors

    def embed(self, bag: Counter[str], idf: dict[str, float]) -> np.ndarray:
        """Unit vector of a bag of terms, each weighted (1 + log count) x idf (terms without idf: 0)."""
        words = [w for w in bag if idf.get(w, 0.0) > 0]
        if not words:
            return np.zeros(self.dim, dtype=np.float32)
        weights = np.array([(1 + math.log(bag[w])) * idf[w] for w in words], dtype=np.float32)
        rows = self.rows(words)  # before reading `vectors`: it grows with new words
        vector = weights @ self.vectors[rows]
        norm = float(np.linalg.norm(vector))
        return vector / norm if norm > 0 else vector


@lru_cache(maxsize=1)
def load_wordllama() -> StaticEmbedder:
    """WordLlama's 256-dimension table and tokenizer, from the files its wheel installs (no download)."""
    spec = importlib.util.find_spec("wordllama")
    if spec is None or spec.origin is None:
        raise UserError(
            f"dense localization needs the wordllama package, which is not installed: {INSTALL_HINT}"
        )
    root = Path(spec.origin).parent
    weights, tokenizer_file = root / _WEIGHTS, root / _TOKENIZER
    if not weights.is_file() or not tokenizer_file.is_file():
        raise UserError(
            f"the installed wordllama lacks {_WEIGHTS} or {_TOKENIZER} under {root}: {INSTALL_HINT}"
        )
    from safetensors import safe_open
    from tokenizers import Tokenizer

    with safe_open(str(weights), framework="np") as f:
        table = f.get_tensor("embedding.weight")
    return StaticEmbedder(Tokenizer.from_file(str(tokenizer_file)), table)


def names_bag(path: str, symbols: Sequence[str]) -> Counter[str]:
    """A file's terms for the dense signal: its path (without the suffix) and the names it defines."""
    bag = Counter(terms(path.rsplit(".", 1)[0].replace("/", " ")))
    for symbol in symbols:
        bag.update(terms(symbol))
    return bag


def _idf(index: RepoIndex) -> dict[str, float]:
    """BM25's idf over the commit's source files (their content terms)."""
    df: Counter[str] = Counter()
    for st in index.stats.values():
        df.update(st.counts.keys())
    n = len(index.stats)
    return {term: math.log(1 + (n - count + 0.5) / (count + 0.5)) for term, count in df.items()}


def dense_scores(index: RepoIndex, issue: str, embedder: StaticEmbedder) -> dict[str, float]:
    """Cosine similarity of the issue and each source file of `index` (path and defined names)."""
    idf = _idf(index)
    query = embedder.embed(Counter(terms(issue)), idf)
    paths = list(index.stats)
    if not paths:
        return {}
    files = np.stack([embedder.embed(names_bag(p, index.stats[p].symbols), idf) for p in paths])
    return dict(zip(paths, (files @ query).tolist(), strict=True))
