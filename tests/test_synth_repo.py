"""The one writer of synthetic git histories (`swerl.synth_repo.FastImport`), read back through git."""

from __future__ import annotations

import random

from swerl.synth_repo import FastImport, build_history, git, stdlib_sources


def test_a_written_history_holds_what_was_committed(tmp_path):
    """Texts and bytes, deletions, symlinks, a side branch merged into main with two parents."""
    writer = FastImport(start=1_700_000_000, step=60)
    base = writer.commit("Initial import", {"a.py": "x = 1\r\n", "b.bin": bytes(range(256))})
    side = writer.commit("Side work", {"c.py": "c = 3\n"}, ref="refs/heads/side", parent=base)
    merged = writer.commit(
        "Merge side",
        {"c.py": "c = 3\n", "b.bin": None},
        parent=base,
        merge=side,
        author="Dev Eloper <dev@example.invalid>",
        symlinks={"link.py": "a.py"},
    )
    assert (base, side, merged) == (1, 2, 3)
    shas = writer.write(tmp_path / "repo", checkout=True)
    repo = tmp_path / "repo"
    assert len(shas) == 2  # main's first-parent line: the import and the merge
    assert git(repo, "rev-list", "--parents", "-1", shas[1]).split()[1:] == [
        shas[0],
        git(repo, "rev-parse", "side").strip(),
    ]
    assert git(repo, "ls-tree", "-r", "--name-only", "HEAD").split() == ["a.py", "c.py", "link.py"]
    assert git(repo, "show", "HEAD:a.py") == "x = 1\r\n"  # bytes as given, no newline translation
    assert (repo / "link.py").is_symlink() and (repo / "link.py").read_bytes() == b"x = 1\r\n"
    assert (
        git(repo, "log", "-1", "--format=%an <%ae> %at", "HEAD")
        == "Dev Eloper <dev@example.invalid> 1700000180\n"
    )


def test_histories_are_reproducible_to_the_sha(tmp_path):
    """The same seed gives the same commits, so benchmarks and tests see the same repository each run."""
    heads = []
    for name in ("one", "two"):
        rng = random.Random(3)
        history = build_history(tmp_path / name, stdlib_sources(6, rng), 5, rng)
        assert [c.message for c in history] == [f"Fix issue #{n}" for n in range(1, 6)]
        assert all(c.old != c.new for c in history if c.old)
        heads.append(history[-1].sha)
    assert heads[0] == heads[1]
