"""Localization: issue signals, model-free file ranking, index caching, trees, skeletons, elements."""

from __future__ import annotations

import subprocess
from pathlib import Path

from agentless.localize.elements import (
    EditLocation,
    ElementHit,
    edit_locations,
    merge_elements,
    parse_element_answer,
    rank_elements,
)
from agentless.localize.files import (
    RankWeights,
    compact_tree,
    merge_rankings,
    parse_file_ranking,
    rank_files,
    rerank_by_elements,
)
from agentless.localize.index import IndexCache, RepoIndex, is_peripheral_path
from agentless.localize.signals import extract_signals, issue_title
from agentless.localize.skeleton import elements_of, skeleton
from agentless.pipeline import Context, RunConfig, localize_files
from agentless.repair.context import windows
from swerl.execution.instances import Instance
from swerl.git.clones import RepoCache

TRACEBACK_ISSUE = """\
Parsing fails for headers with a trailing comment

```
Traceback (most recent call last):
  File "/home/u/venv/lib/python3.11/site-packages/shop/cli.py", line 3, in main
    run()
  File "/home/u/venv/lib/python3.11/site-packages/shop/io/headers.py", line 5, in parse_header
    key, value = line.split(":")
ValueError: too many values to unpack
```
"""

FILES = {
    "shop/__init__.py": "",
    "shop/cli.py": "from shop.io.headers import parse_header\n\n\ndef main():\n    run()\n",
    "shop/io/__init__.py": "",
    "shop/io/headers.py": (
        "import re\n\n\ndef parse_header(line):\n    key, value = line.split(':')\n    return key, value\n"
    ),
    "shop/cart.py": "class Cart:\n    def total(self):\n        return sum(self.items)\n",
    "shop/pricing.py": "def discount(price, rate):\n    '''Apply a discount.'''\n    return price\n",
    "tests/test_headers.py": (
        "from shop.io.headers import parse_header\n\n\ndef test_parse_header():\n    pass\n"
    ),
}


def _repo(tmp_path: Path, files: dict[str, str]) -> tuple[RepoCache, str]:
    src = tmp_path / "clones" / "shop__shop"
    for path, text in files.items():
        (src / path).parent.mkdir(parents=True, exist_ok=True)
        (src / path).write_text(text)
    env = ["-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=src, check=True)
    subprocess.run(["git", "add", "-A"], cwd=src, check=True)
    subprocess.run(["git", *env, "commit", "-qm", "x"], cwd=src, check=True)
    sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=src, capture_output=True, text=True).stdout.strip()
    return RepoCache(tmp_path / "cache", mirror_dir=tmp_path / "clones", offline=True), sha


def _index(tmp_path: Path, files: dict[str, str]) -> RepoIndex:
    """The search index of a one-commit repository holding `files`."""
    repos, sha = _repo(tmp_path, files)
    return IndexCache(repos).get("shop/shop", sha)


def test_signals_read_frames_paths_modules_and_names() -> None:
    sig = extract_signals(
        TRACEBACK_ISSUE + "\nSee shop/io/headers.py and `from shop.pricing import discount`.\n"
        "pytest says:\ntests/test_headers.py:4: in test_parse_header\n"
    )
    assert [f.function for f in sig.frames] == ["main", "parse_header", "test_parse_header"]
    assert sig.frames[1].line == 5
    assert "shop/io/headers.py" in sig.paths
    assert "shop.pricing" in sig.modules and "shop.pricing.discount" in sig.modules
    assert sig.identifiers["parse_header"] >= 2


def test_rank_files_uses_the_deepest_frame_and_demotes_tests(tmp_path: Path) -> None:
    index = _index(tmp_path, FILES)
    ranked = rank_files(index, TRACEBACK_ISSUE)
    assert ranked[0].path == "shop/io/headers.py"
    assert "deepest_frame" in ranked[0].reasons
    assert [r.path for r in ranked].index("tests/test_headers.py") > 1
    by_module = rank_files(index, "`shop.pricing.discount` ignores the rate")
    assert by_module[0].path == "shop/pricing.py"
    assert index.by_module("shop.pricing.discount") == ["shop/pricing.py"]
    assert index.by_module("shop.io") == ["shop/io/__init__.py"]
    assert index.by_module("shop") == [] and index.by_module("shop.Cart") == []  # the bare package
    by_symbol = rank_files(index, "Cart.total() is wrong when items is a generator")
    assert by_symbol[0].path == "shop/cart.py"


def test_pasted_output_is_not_read_as_names_and_options_point_to_their_declaration(tmp_path: Path) -> None:
    """A pasted log or package list in a fenced block names everything it mentions; read as code names,
    its words pull up whichever file defines `version` or `report`. A command-line option
    (`--dry-run`) points to the file that declares it, not to the tests that pass it."""
    files = {
        "tool/main.py": (
            "def add_options(parser):\n    parser.addoption('--dry-run', action='store_true')\n\n\n"
            "def session(config):\n    return config\n"
        ),
        "tool/report.py": "def report(items):\n    return items\n\n\ndef version():\n    return 1\n",
        "tool/dry.py": 'def dry_items(tree):\n    """Dry run of the items."""\n    return 1\n',
        "tests/test_main.py": "def test_dry():\n    run('--dry-run')\n",
    }
    issue = (
        "Add a shortcut for --dry-run\n\nTyping the long option is slow.\n\n"
        "```\nPackage  version\nreport   1.0\npluggy   0.13\n```\n"
    )
    sig = extract_signals(issue)
    assert sig.options == ["--dry-run"]
    assert "version" not in sig.identifiers and "report" not in sig.identifiers
    assert extract_signals("```\nx = parse_header(line)\n```").identifiers["parse_header"] >= 1
    index = _index(tmp_path, files)
    ranked = {r.path: r for r in rank_files(index, issue)}
    assert "symbol" not in ranked["tool/report.py"].reasons  # before: `version` and `report` matched
    assert "option" in ranked["tool/main.py"].reasons and "option" not in ranked["tests/test_main.py"].reasons
    order = [r.path for r in rank_files(index, issue)]
    assert order.index("tool/main.py") < order.index("tool/dry.py")
    without = [r.path for r in rank_files(index, issue, weights=RankWeights(option=0))]
    assert without.index("tool/main.py") > without.index("tool/dry.py")  # BM25 alone prefers it


def test_vendored_copies_docs_and_package_metadata_are_demoted(tmp_path: Path) -> None:
    """requests ships urllib3 under requests/packages/: an issue about a header names words both share,
    and the vendored copy must not outrank the project's own module (it does without the demotion)."""
    own = "def parse_header(line):\n    key, value = line.split(':')\n    return key, value\n"
    files = {
        "shop/headers.py": own,
        "shop/packages/urllib3/headers.py": own + "\n# header parse header split line key value\n",
        "docs/conf.py": "# parse_header split header line key value\n",
        "shop/__init__.py": "from shop.headers import parse_header  # parse header line\n",
    }
    index = _index(tmp_path, files)
    issue = "parse_header splits the header line wrongly"
    ranked = [r.path for r in rank_files(index, issue)]
    assert ranked[0] == "shop/headers.py"
    assert ranked.index("shop/packages/urllib3/headers.py") > ranked.index("shop/__init__.py")
    flat = rank_files(index, issue, weights=RankWeights(peripheral_factor=1, init_factor=1))
    assert flat[0].path == "shop/packages/urllib3/headers.py"
    assert is_peripheral_path("requests/packages/urllib3/util.py") and is_peripheral_path("doc/conf.py")
    assert is_peripheral_path("pip/_vendor/x.py") and is_peripheral_path("setup.py")
    assert not is_peripheral_path("packages/core/x.py")  # a monorepo's own code
    assert not is_peripheral_path("sympy/printing/ccode.py")


_ROUNDING_WORDS = ("negative", "zero", "away", "rounding", "currency", "total")
ROUNDING_FILES = {
    # Each function shares one of the issue's words: the file as a whole matches all of them, thinly.
    "shop/ledger.py": "".join(
        f"def entry_{i}(row):\n    '''The {word} of a row.'''\n    return row\n\n\n"
        for i, word in enumerate(_ROUNDING_WORDS)
    ),
    # One short function is about exactly the issue, among helpers that are not.
    "shop/money.py": "".join(
        f"def helper_{i}(book):\n    '''Entry {i} of the book.'''\n    return book.lines[{i}]\n\n\n"
        for i in range(8)
    )
    + (
        "def round_total(amount, currency):\n"
        "    '''Rounding of a negative total: away from zero, in the currency's digits.'''\n"
        "    return round(amount, currency.digits)\n"
    ),
    "shop/cart.py": "class Cart:\n    def add(self, item):\n        '''Add an item to the cart.'''\n",
    "shop/tax.py": "def tax(total):\n    '''Tax on a total.'''\n    return total\n",
}
ROUNDING_ISSUE = "Rounding a negative total goes toward zero instead of away from zero in every currency"


TITLE_FILES = {
    "shop/coupons.py": (
        'def apply_coupon(total, coupon):\n    """Take a coupon off the total."""\n    return total\n'
    ),
    "shop/orders.py": (
        'def checkout(session):\n    """Checkout of the session: the cart, the payment, the receipt."""\n'
        "    session.cart.pay(session.payment)\n    session.receipt.send(session.cart)\n"
    ),
}
TITLE_ISSUE = """\
Coupon taken off twice

I put items in the cart, went to checkout, and the session showed the cart with the payment.
The receipt of the session lists the cart and the payment; after checkout the session cart is empty,
and the receipt shows the payment. The total is lower than it should be.
"""


def test_the_title_is_scored_on_its_own(tmp_path: Path) -> None:
    """A body that retells a session in many words outweighs a title that says what is wrong; scoring
    the title alone as well puts the module it is about first."""
    assert issue_title("\n  \nCoupon taken off twice  \nbody") == "Coupon taken off twice"
    assert issue_title(" \n") == ""
    index = _index(tmp_path, TITLE_FILES)
    words_only = rank_files(index, TITLE_ISSUE, weights=RankWeights(title=0.0))
    assert words_only[0].path == "shop/orders.py"
    ranked = rank_files(index, TITLE_ISSUE)
    assert ranked[0].path == "shop/coupons.py"
    assert ranked[0].reasons["title"] == RankWeights().title  # the best title match is normalized to 1
    assert "title" not in ranked[1].reasons  # the title's words are not in the orders module


PATH_TITLE_FILES = {
    "shop/refunds/__init__.py": "",
    "shop/refunds/partial_amounts.py": (
        "def share_of(order, fraction):\n    return int(order.total * fraction)\n"
    ),
    "shop/notifications.py": (
        'def notify(customer, payment):\n    """Tell the customer about a payment of an order."""\n'
        '    customer.send(f"Your payment of {payment.amount} for the order")\n'
    ),
    "shop/ledger.py": "def book(entry, amount):\n    return entry.total + amount\n",
}
PATH_TITLE_ISSUE = """\
Partial refunds are rounded down

A customer paid an order of 19.99 and got back half of it, with fraction 0.5: the payment notification
said 9. The amount should keep the cents.
"""


def test_the_title_is_scored_against_paths(tmp_path: Path) -> None:
    """The title names the feature ("partial refunds") that the layout names its module after, while no
    file's text holds those words and the body's words fit another module better: the title scored over
    the paths' terms puts the feature's module first."""
    index = _index(tmp_path, PATH_TITLE_FILES)
    contents_only = rank_files(index, PATH_TITLE_ISSUE, weights=RankWeights(title_path=0.0))
    assert contents_only[0].path == "shop/notifications.py"
    ranked = rank_files(index, PATH_TITLE_ISSUE)
    assert ranked[0].path == "shop/refunds/partial_amounts.py"
    assert ranked[0].reasons["title_path"] == RankWeights().title_path  # the best path match gets the weight
    assert "title_path" not in {r.path: r for r in ranked}["shop/notifications.py"].reasons


def test_second_stage_ranks_files_by_their_best_function(tmp_path: Path) -> None:
    """Whole-file BM25 prefers a module that uses every word of the issue once in a different function;
    the fix belongs in the one function that is about all of them. Scoring the functions of the top
    files on their own finds it, and only the first `element_files` files are re-ordered."""
    repos, sha = _repo(tmp_path, ROUNDING_FILES)
    index = IndexCache(repos).get("shop/shop", sha)
    ranked = rank_files(index, ROUNDING_ISSUE)
    assert [r.path for r in ranked[:2]] == ["shop/ledger.py", "shop/money.py"]  # file level: wrong
    sources = {path: repos.read_file("shop/shop", sha, path) or "" for path in ROUNDING_FILES}
    second = rerank_by_elements(ranked, sources, ROUNDING_ISSUE)
    assert [r.path for r in second[:2]] == ["shop/money.py", "shop/ledger.py"]
    money = second[0]
    assert money.reasons["element"] == RankWeights().element * ranked[0].score  # the best element is its
    assert money.score == ranked[1].score + money.reasons["element"]
    assert sorted(r.path for r in second) == sorted(r.path for r in ranked)
    only_first = rerank_by_elements(ranked, sources, ROUNDING_ISSUE, weights=RankWeights(element_files=1))
    assert [r.path for r in only_first] == [r.path for r in ranked]
    ledger_only = rerank_by_elements(ranked, {"shop/ledger.py": sources["shop/ledger.py"]}, ROUNDING_ISSUE)
    assert ledger_only[0].path == "shop/ledger.py" and "element" not in ledger_only[1].reasons

    # The run's file stage reads the top files from git and applies it; `element_files=0` turns it off.
    ctx = Context(repos=repos, indexes=IndexCache(repos))
    inst = Instance("shop__shop-1", "shop/shop", sha, ROUNDING_ISSUE)
    row = localize_files(inst, ctx, RunConfig(model_localization=False))
    assert row["files"][0] == "shop/money.py" and "element" in row["model_free"][0][2]
    row = localize_files(inst, ctx, RunConfig(model_localization=False, element_files=0))
    assert row["files"][0] == "shop/ledger.py"


def test_index_cache_reuses_blobs_across_commits_and_runs(tmp_path: Path) -> None:
    repos, sha = _repo(tmp_path, FILES)
    src = tmp_path / "clones" / "shop__shop"
    (src / "shop/cart.py").write_text("class Cart:\n    pass\n")
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "y"], cwd=src, check=True
    )
    sha2 = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=src, capture_output=True, text=True
    ).stdout.strip()
    repos = RepoCache(tmp_path / "cache2", mirror_dir=tmp_path / "clones", offline=True)
    cache = IndexCache(repos, tmp_path / "index")
    cache.get("shop/shop", sha)
    first = cache.blobs_indexed
    cache.get("shop/shop", sha2)
    assert cache.blobs_indexed == first + 1  # only the changed file
    fresh = IndexCache(repos, tmp_path / "index")
    index = fresh.get("shop/shop", sha2)
    assert fresh.blobs_indexed == 0 and "shop/cart.py" in index.stats


def test_tree_parse_and_merge_of_model_rankings(tmp_path: Path) -> None:
    index = _index(tmp_path, FILES)
    tree = compact_tree(index.paths)
    assert "  io/\n    __init__.py\n    headers.py" in tree and "test_headers" not in tree
    answer = "Sure:\n```\nshop/cart.py\nheaders.py\nshop/missing.py\n./shop/cart.py\n```"
    assert parse_file_ranking(answer, index) == ["shop/cart.py", "shop/io/headers.py"]
    merged = merge_rankings(["a.py", "b.py", "c.py"], ["c.py", "d.py"])
    assert merged[0] == "c.py" and merged.index("a.py") < merged.index("d.py")
    assert merge_rankings(["a.py", "b.py"], []) == ["a.py", "b.py"]
    assert len(compact_tree([f"pkg/m{i}.py" for i in range(500)], max_chars=200)) <= 200


SOURCE = '''\
"""Module doc."""
import os


@decorator
def top(a,
        b=1):
    """Doc."""
    def inner():
        return 2
    return inner()


class Shape:
    sides = 0

    def area(self):
        return 0

    class Meta:
        def label(self): return "m"
'''


def test_skeleton_elides_bodies_and_elements_have_spans() -> None:
    sk = skeleton(SOURCE)
    assert "return inner()" not in sk and "def inner" not in sk
    assert "@decorator\ndef top(a,\n        b=1):\n    ..." in sk
    assert "    sides = 0" in sk and '        def label(self): return "m"' in sk
    names = [(e.kind, e.name, e.start, e.end) for e in elements_of(SOURCE)]
    assert names == [
        ("function", "top", 5, 11),
        ("class", "Shape", 14, 21),
        ("method", "Shape.area", 17, 18),
        ("class", "Shape.Meta", 20, 21),
        ("method", "Shape.Meta.label", 21, 21),
    ]
    assert skeleton("def broken(:\n  pass\n") == "def broken(:\n  pass\n"
    assert elements_of("def broken(:\n") == []


def test_elements_ranked_parsed_merged_and_turned_into_locations() -> None:
    sources = {"geo/shape.py": SOURCE, "geo/util.py": "def helper():\n    return 1\n"}
    issue = 'Shape.area returns 0\n  File "x/geo/shape.py", line 18, in area\n'
    signals = extract_signals(issue)
    hits = rank_elements(sources, issue, signals)
    assert hits[0].element.name == "Shape.area"
    answer = "```\ngeo/util.py\nfunction: helper\ngeo/shape.py\nclass: Shape\nfunction: nothere\n```"
    model = parse_element_answer(answer, sources)
    assert [(h.path, h.element.name) for h in model] == [("geo/util.py", "helper"), ("geo/shape.py", "Shape")]
    merged = merge_elements(model, hits, k=3)
    assert [h.element.name for h in merged] == ["helper", "Shape", "Shape.area"]
    locs = edit_locations([ElementHit("geo/shape.py", hits[0].element, 1.0)], signals, sources)
    assert locs == [EditLocation("geo/shape.py", 8, 22)]  # the frame window swallows the method


def test_windows_are_verbatim_with_gap_markers() -> None:
    text = "".join(f"line {i}\n" for i in range(1, 101))
    shown = windows(text, [EditLocation("f", 50, 50)], padding=2)
    assert shown == "...\nline 48\nline 49\nline 50\nline 51\nline 52\n...\n"
