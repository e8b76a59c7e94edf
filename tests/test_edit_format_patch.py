"""`build_git_patch` checked with real `git apply`; `apply_patch_to_contents` fed real `git diff` output."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from swerl.edit_format import (
    PatchApplyError,
    apply_patch_to_contents,
    build_git_patch,
    parse_patch,
    patch_paths,
    split_lines,
)

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")

# Keep the user's and the system's git configuration (autocrlf, hooks, ...) out of the picture.
GIT_ENV = {
    **os.environ,
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.com",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.com",
}


def git(repo: Path, *args: str, stdin: bytes | None = None) -> bytes:
    result = subprocess.run(
        ["git", "-c", "core.autocrlf=false", "-c", "core.quotePath=true", *args],
        cwd=repo,
        env=GIT_ENV,
        input=stdin,
        capture_output=True,
        check=False,
    )
    assert result.returncode == 0, f"git {' '.join(args)} failed:\n{result.stderr.decode()}"
    return result.stdout


def write_tree(root: Path, contents: Mapping[str, str | None]) -> None:
    for path, content in contents.items():
        target = root / path
        if content is None:
            target.unlink(missing_ok=True)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content.encode("utf-8"))


def read_tree(root: Path) -> dict[str, str]:
    return {
        str(path.relative_to(root)): path.read_bytes().decode("utf-8")
        for path in root.rglob("*")
        if path.is_file() and ".git" not in path.relative_to(root).parts
    }


def make_repo(root: Path, old: Mapping[str, str]) -> Path:
    git(root, "init", "-q")
    write_tree(root, old)
    git(root, "add", "-A")
    git(root, "commit", "-q", "--allow-empty", "-m", "old")
    return root


def expected_tree(old: Mapping[str, str], new: Mapping[str, str | None]) -> dict[str, str]:
    tree = {**old, **new}
    return {path: content for path, content in tree.items() if content is not None}


def git_apply(root: Path, patch: str) -> None:
    if not patch:
        return
    (root.parent / "change.patch").write_bytes(patch.encode("utf-8"))
    git(root, "apply", "--check", str(root.parent / "change.patch"))
    git(root, "apply", str(root.parent / "change.patch"))


CASES = {
    "modify": ({"m.py": "a\nb\nc\n"}, {"m.py": "a\nB\nc\n"}),
    "modify_far_apart": (
        {"m.py": "".join(f"line {i}\n" for i in range(40))},
        {"m.py": "".join(f"line {i}\n" if i not in (3, 30) else f"LINE {i}\n" for i in range(40))},
    ),
    "new_file": ({}, {"pkg/new.py": "x = 1\n"}),
    "new_empty_file": ({}, {"empty.txt": ""}),
    "delete": ({"gone.py": "bye\n", "keep.py": "k\n"}, {"gone.py": None}),
    "delete_empty_file": ({"e": ""}, {"e": None}),
    "fill_empty_file": ({"e": ""}, {"e": "now\n"}),
    "empty_a_file": ({"f": "all\nof\nit\n"}, {"f": ""}),
    "drop_final_newline": ({"f": "a\nb\n"}, {"f": "a\nb"}),
    "add_final_newline": ({"f": "a\nb"}, {"f": "a\nb\n"}),
    "no_final_newline_both": ({"f": "a\nb"}, {"f": "a\nc"}),
    "crlf": ({"w.txt": "one\r\ntwo\r\nthree\r\n"}, {"w.txt": "one\r\n2\r\nthree\r\n"}),
    "mixed_line_endings": ({"w.txt": "a\r\nb\nc\rd\n"}, {"w.txt": "a\nb\r\nc\rD\n"}),
    "not_line_breaks_for_git": ({"u.txt": "a\x0cb\x85c\u2028d\n"}, {"u.txt": "a\x0cB\x85c\u2028d\n"}),
    "space_in_path": ({"my file.py": "x\n"}, {"my file.py": "y\n"}),
    "unicode_path": ({"ünï.py": "x\n"}, {"ünï.py": "y\n"}),
    "several_files": ({"a": "1\n", "b": "2\n"}, {"b": "3\n", "c": "4", "a": None}),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_git_apply_reproduces_new_exactly(name, tmp_path):
    old, new = CASES[name]
    (tmp_path / "repo").mkdir()
    repo = make_repo(tmp_path / "repo", old)
    patch = build_git_patch(old, new)
    git_apply(repo, patch)
    assert read_tree(repo) == expected_tree(old, new)


@pytest.mark.parametrize("name", sorted(CASES))
def test_apply_patch_to_contents_reads_real_git_diff(name, tmp_path):
    old, new = CASES[name]
    (tmp_path / "repo").mkdir()
    repo = make_repo(tmp_path / "repo", old)
    write_tree(repo, new)
    git(repo, "add", "-A")
    real_patch = git(repo, "diff", "--cached", "--no-renames").decode("utf-8")
    changed = {path: content for path, content in new.items() if old.get(path) != content}
    assert apply_patch_to_contents(old, real_patch) == changed
    assert apply_patch_to_contents(old, build_git_patch(old, new)) == changed
    assert sorted(patch_paths(real_patch)) == sorted(changed)


def test_hunk_header_and_markers_match_git_conventions():
    patch = build_git_patch({"f": "a\nb"}, {"f": "a\nc"})
    assert patch == (
        "diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n"
        "+c\n\\ No newline at end of file\n"
    )
    assert build_git_patch({}, {"n": "x\n"}).endswith("--- /dev/null\n+++ b/n\n@@ -0,0 +1 @@\n+x\n")
    assert build_git_patch({"f": "same"}, {"f": "same", "g": None}) == ""


def test_context_lines_is_respected():
    old = "".join(f"{i}\n" for i in range(20))
    patch = build_git_patch({"f": old}, {"f": old.replace("10\n", "ten\n")}, context_lines=1)
    assert "@@ -10,3 +10,3 @@\n 9\n-10\n+ten\n 11\n" in patch


def test_split_lines_only_breaks_on_newline():
    assert split_lines("a\rb\x0cc\u2028d\ne") == ["a\rb\x0cc\u2028d\n", "e"]
    assert split_lines("") == []
    assert split_lines("\n\n") == ["\n", "\n"]


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet=st.sampled_from("ab \n\r\x0b\x0c\x1c\x1d\x1e\x1f\x85\u2028\u2029é"), max_size=40))
def test_split_lines_is_its_definition(text):
    """Both paths (ASCII without other line breaks, and the rest) split on "\\n" only."""
    parts = text.split("\n")
    assert split_lines(text) == [part + "\n" for part in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


def test_rename_from_real_git(tmp_path):
    old = {"old_name.py": "".join(f"v{i}\n" for i in range(10))}
    (tmp_path / "repo").mkdir()
    repo = make_repo(tmp_path / "repo", old)
    git(repo, "mv", "old_name.py", "new_name.py")
    (repo / "new_name.py").write_text(old["old_name.py"].replace("v5", "five"))
    git(repo, "add", "-A")
    real_patch = git(repo, "diff", "--cached", "-M").decode()
    assert "rename from old_name.py" in real_patch
    result = apply_patch_to_contents(old, real_patch)
    assert result == {"old_name.py": None, "new_name.py": old["old_name.py"].replace("v5", "five")}
    assert patch_paths(real_patch) == ["old_name.py", "new_name.py"]


def test_mismatching_context_is_a_clear_error():
    patch = build_git_patch({"f": "a\nb\nc\n"}, {"f": "a\nB\nc\n"})
    with pytest.raises(PatchApplyError, match="does not match"):
        apply_patch_to_contents({"f": "a\nX\nc\n"}, patch)
    with pytest.raises(PatchApplyError, match="not in the given contents"):
        apply_patch_to_contents({}, patch)
    with pytest.raises(PatchApplyError, match="not a valid unified diff"):
        apply_patch_to_contents({"f": "a\n"}, "diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -1,3 +1,3 @@\n a\n")


def test_parse_patch_keeps_carriage_returns():
    patch = build_git_patch({"w": "a\r\nb\r\n"}, {"w": "a\r\nc\r\n"})
    hunk = parse_patch(patch)[0][0]
    assert [line.value for line in hunk] == ["a\r\n", "b\r\n", "c\r\n"]


def test_unsupported_paths_are_refused():
    with pytest.raises(ValueError, match="unsupported path"):
        build_git_patch({}, {'quote".py': "x\n"})


LINES = st.sampled_from(
    ["alpha", "beta", "", "  indented", "cr\r", "ff\x0cx", "ls\u2028x", "nel\x85", "t\tx"]
)
CONTENT = st.builds(
    lambda lines, final_newline: "\n".join(lines) + ("\n" if final_newline and lines else ""),
    st.lists(LINES, max_size=10),
    st.booleans(),
)
PATHS = st.sampled_from(["a.txt", "dir/b.py", "c d.txt"])
OLD = st.dictionaries(PATHS, CONTENT, max_size=3)
NEW = st.dictionaries(PATHS, st.one_of(st.none(), CONTENT), max_size=3)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(old=OLD, new=NEW)
def test_git_apply_on_random_contents(old, new):
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "repo"
        repo.mkdir()
        git(repo, "init", "-q")
        write_tree(repo, old)
        git_apply(repo, build_git_patch(old, new, context_lines=1))
        assert read_tree(repo) == expected_tree(old, new)


@settings(max_examples=300, deadline=None)
@given(old=OLD, new=NEW, context_lines=st.integers(0, 4))
def test_apply_patch_to_contents_inverts_build_git_patch(old, new, context_lines):
    changed = {path: content for path, content in new.items() if old.get(path) != content}
    patch = build_git_patch(old, new, context_lines=context_lines)
    assert apply_patch_to_contents(old, patch) == changed
