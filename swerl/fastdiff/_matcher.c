/*
 * swerl.fastdiff._matcher -- exact, compiled re-implementation of the matching core of
 * Python 3.11's difflib.SequenceMatcher (isjunk=None).
 *
 * Why this exists: the SWE-RL similarity reward calls SequenceMatcher(...).ratio() on ~10^4 pairs of
 * unified diffs per training step.  Pure-Python difflib is ~13 ms for a small pair and can take tens of
 * seconds on a 20 KB pair, because its find_longest_match is quadratic in the window (it walks every
 * occurrence in b of every character of a).  Rewards must not change, so every result here is
 * bit-identical to difflib: the same blocks, found by the same recursion, with the same tie-breaking.
 *
 * Overview
 * --------
 * get_matching_blocks() in difflib is a divide-and-conquer over windows (alo, ahi, blo, bhi): find the
 * longest matching block of the window, record it, recurse on the part left of it and the part right of
 * it.  The set of blocks found does not depend on the order in which windows are processed, so we use an
 * explicit stack and sort at the end, exactly like difflib.
 *
 * The only expensive part is find_longest_match.  With isjunk=None:
 *   - bjunk is always empty.
 *   - With autojunk=False (or len(b) < 200) there is no "popular" set either, and find_longest_match
 *     returns the longest common substring of a[alo:ahi] and b[blo:bhi]; among equally long ones the one
 *     with the smallest start in a, then the smallest start in b; (alo, blo, 0) when there is none.  The
 *     post-DP extension loops are then no-ops: if a[i-1] == b[j-1] the block (i-1, j-1, k+1) would be a
 *     longer common substring inside the window, contradicting maximality (same on the right), and when
 *     k == 0 no equal pair exists in the window at all.
 *   - With autojunk=True and len(b) >= 200, elements occurring more than len(b)//100 + 1 times in b are
 *     "popular" and removed from b2j: the DP can neither start nor continue a run through them.  We model
 *     that by replacing popular elements with sentinels that never compare equal (distinct on the two
 *     sides) in "masked" copies of the sequences, run the longest-common-substring search on the masked
 *     copies (same tie-breaking, since difflib's DP is a plain LCSubstring DP on them), and then run
 *     difflib's extension loops on the REAL sequences -- bjunk being empty, those loops do extend over
 *     equal elements, popular ones included, even from an empty (alo, blo, 0) result.
 *
 * Longest common substring per window: several exact engines, picked by estimated cost (choose_strategy):
 *   - dp_search: the O(wa*wb) rolling-row DP, scanning i then j ascending with a strict ">" -- literally
 *     difflib's order, so the same tie-breaking.  Fastest for small windows (a tight, vectorisable loop).
 *   - sparse_search: difflib's own walk over b2j (positions of a[i] in b), with j2len as two arrays
 *     stamped by row generation instead of dicts.  O(wa + number of equal pairs): the engine for lines,
 *     which rarely repeat.
 *   - sam_search: a suffix automaton over the SMALLER side of the window, through which the other side is
 *     streamed, O(wa + wb) per window.  Every state stores len, link and firstpos (absolute end index of
 *     the first occurrence of its strings; clones inherit it).  All strings of a state share their set of
 *     end positions, so firstpos gives the earliest occurrence of exactly the matched substring.  While
 *     streaming position t we know the longest suffix of stream[..t] occurring in the built side (length l,
 *     state v), i.e. the longest common substring ending at t.
 *       * automaton over b, stream a: the first t reaching the final maximum L (strict ">") has the smallest
 *         start in a; for that fixed substring the smallest start in b is firstpos(v) - L + 1.
 *       * automaton over a, stream b: each t with l == L yields the candidate (firstpos(v)-L+1, t-L+1),
 *         the smallest a-start for that b-start; we keep the lexicographically smallest (i, j), preferring
 *         the earlier j on equal i (strict "<" as t ascends).
 *     Transitions: a dense array for the root (the alphabet is remapped per call to dense ids) and an
 *     open-addressing hash keyed by (state, symbol) for everything else, plus a per-state list of symbols
 *     so that clones can copy their parent's edges.  No states x alphabet table.
 * Each window also carries an upper bound of its longest match: the size found for its parent (a
 * sub-window's matches are matches of the parent).  Engines stop as soon as a match of that size is
 * found (later ones could only tie), a bound of 1 is answered by a first-occurrence lookup, and chains
 * -- windows whose match keeps reaching the bound, each peeling a few elements off the front -- are
 * answered from an index of b's K-grams or a short DP probe (see find_longest).
 *
 * Cost and the remaining pathological inputs: the recursion itself is as in difflib, so the total time is
 * the sum over all windows of the per-window cost, O(wa + wb) each.  When the found blocks split windows in
 * a balanced way (the typical case for real text) that is O(n log n).  The recursion degrades towards
 * O(n^2) when many successive windows each yield a small block and pass on an almost unchanged window;
 * the bound and the chain path above make the known families of such inputs fast ("aaa..." against
 * "aab aab ...", long runs of spaces against code, chains of length-1 matches), measured in tests and
 * bench/.  What remains is a long path of windows that stay large while their longest match shrinks
 * (a non-"tight" step costs a full engine pass).  Block sizes along a path are strictly decreasing there
 * and sum to at most n, so such a path has at most ~sqrt(2n) steps: O(n^1.5), e.g. "aaa..." against runs
 * "a"*200 + "b" + "a"*199 + "b" + ... takes ~50 ms at 20 KB, the slowest input we have found.  We know of
 * no input where the time is worse, but have no proof of a bound; difflib is far slower on all of these.
 *
 * The matching runs without the GIL (inputs are copied to int32 arrays first), so a thread pool scales
 * across cores.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Inputs longer than this are refused: every index is an int32_t and the automaton needs 3n edges. */
#define MAX_INPUT_LEN ((Py_ssize_t)1 << 27)

/* Strategies.  AUTO picks by estimated cost; the others force one engine so that tests can check every
 * engine against difflib. */
enum {
    STRAT_AUTO = 0,
    STRAT_DP = 1,
    STRAT_SAM = 2,
    STRAT_SAM_OVER_B = 3,
    STRAT_SAM_OVER_A = 4,
    STRAT_SPARSE = 5,
    STRAT_CHAIN_GRAM = 6,  /* AUTO, but every window takes the chain path with the K-gram index */
    STRAT_CHAIN_PROBE = 7, /* AUTO, but every window takes the chain path with the DP probe */
    STRAT_CHAIN_COLLIDE = 8, /* as 6 with hash base 1 (anagrams collide): tests the verification */
    STRAT_LAST = STRAT_CHAIN_COLLIDE
};


typedef struct {
    int32_t i, j, k;
} Block;

typedef struct {
    int32_t alo, ahi, blo, bhi;
    int32_t bound; /* upper bound of the longest (masked) match in the window */
    int32_t tight; /* the parent's match reached its own bound: we may be in a chain (see find_longest) */
} Window;

/* An automaton state: all fields of a state share one cache line (they are used together). */
typedef struct {
    int32_t len;   /* length of the longest string of the state */
    int32_t link;  /* suffix link */
    int32_t fpos;  /* absolute end index of the first occurrence of the state's strings */
    int32_t head;  /* first edge of the state's symbol list (for cloning), -1 if none */
} State;

/* One slot of the transition hash: key = (state << 32) | symbol, its target, and the number of the
 * automaton that wrote it (slots of earlier windows' automata read as empty, so nothing is cleared). */
typedef struct {
    uint64_t key;
    int32_t to;
    uint32_t gen;
} Edge;

/* Everything one call needs, carved out of a single allocation so that cleanup is one free(). */
typedef struct {
    int32_t na, nb;
    int32_t nsym;   /* ids 0..nsym-1: symbols of b; nsym: "not matchable" on the a side; nsym+1 on b */
    int32_t *ra, *rb; /* real ids: equal ids <=> equal elements (a-only elements all map to nsym) */
    int32_t *ma, *mb; /* masked ids (popular elements replaced by sentinels); alias ra/rb if none */
    int32_t *mabuf, *mbbuf; /* storage for ma/mb when autojunk may apply */
    int has_mask;
    int32_t *count; /* occurrences of each b symbol in b */
    /* code point -> id hash (str inputs only) */
    uint32_t *ckey;
    int32_t *cval;
    uint32_t cmask;
    int cshift;
    /* suffix automaton */
    State *st;
    int32_t *root;        /* root transitions, indexed by id; -1 = none */
    int32_t *ec, *enext;  /* edge pool: symbol and next edge of the owning state's list */
    int32_t nedge;
    Edge *htab;
    size_t hcap;   /* allocated slots */
    uint32_t hgen; /* number of the current automaton */
    uint64_t hmask; /* mask of the table sized for the current window (<= the allocated capacity) */
    int hshift;
    /* DP rows */
    int32_t *row0, *row1;
    /* sparse DP (difflib's b2j walk): positions of each non-popular b symbol, CSR layout, built lazily */
    int b2j_ready;
    int32_t *b2j_off, *b2j_pos;
    uint32_t *stamp0, *stamp1; /* row generation that wrote len0/len1[j]; replaces clearing j2len */
    int32_t *len0, *len1;
    uint32_t gen;
    int64_t *apre; /* apre[i] = sum over a[:i] of the count in b of a's symbol: sparse DP cost estimate */
    /* K-gram index of b for chains (see gram_search); allocated on first use, outside the arena */
    void *gram_arena;
    int gram_failed;          /* allocation failed once: never try again (the engines are exact anyway) */
    uint64_t *ha, *hb, *pw;   /* prefix hashes of ma / mb mod 2^61-1, powers of the base */
    int32_t gram_k;           /* K of the index below, 0 = none */
    uint64_t *gkey;           /* open-addressing table: gram hash -> bucket */
    int32_t *gbucket;
    uint64_t gmask;
    int32_t *goff, *gpos;     /* CSR: ascending positions of b per bucket */
    int32_t *gtmp;            /* bucket of each position of b, while building */
    int32_t streak_k, streak_n; /* K of the latest tight windows, and how many there were in a row */
    /* recursion */
    Window *stack;
    Block *blocks;
    int32_t nblocks;
    int strategy;
    int need_codemap; /* ra/rb hold raw code points that still have to be remapped */
    void *arena;
} Work;

/* ------------------------------------------------------------------------------------------------ */
/* allocation                                                                                       */

static size_t
pow2_at_least(size_t n)
{
    size_t c = 16;
    while (c < n) {
        c <<= 1;
    }
    return c;
}

static int
log2_exact(size_t c)
{
    int b = 0;
    while (((size_t)1 << b) < c) {
        b++;
    }
    return b;
}

/* Carves `count` items of `size` bytes out of the arena (8-byte aligned); NULL-safe sizing pass when
 * base is NULL so the same code computes the total size and assigns the pointers. */
static void *
carve(char *base, size_t *off, size_t count, size_t size)
{
    void *p = base ? base + *off : NULL;
    size_t bytes = count * size;
    *off += (bytes + 7) & ~(size_t)7;
    return p;
}

static int
work_layout(Work *w, char *base, size_t *total, int want_codemap, int want_mask)
{
    size_t off = 0;
    size_t na = (size_t)w->na, nb = (size_t)w->nb;
    size_t wmin = na < nb ? na : nb;
    /* the automaton is built over the smaller side of a window, except when a test forces the side */
    size_t wmax = (w->strategy == STRAT_SAM_OVER_A || w->strategy == STRAT_SAM_OVER_B) ? (na < nb ? nb : na)
                                                                                       : wmin;
    size_t hcap = pow2_at_least(4 * wmax + 16); /* <= 3n transitions: load factor <= 0.75 */
    size_t ccap = pow2_at_least(2 * nb + 16);

    /* 8-byte items first */
    w->htab = carve(base, &off, hcap, sizeof(Edge));
    w->hcap = hcap;
    w->ra = carve(base, &off, na + 1, sizeof(int32_t));
    w->rb = carve(base, &off, nb + 1, sizeof(int32_t));
    if (want_mask) {
        w->mabuf = carve(base, &off, na + 1, sizeof(int32_t));
        w->mbbuf = carve(base, &off, nb + 1, sizeof(int32_t));
    }
    w->count = carve(base, &off, nb + 2, sizeof(int32_t));
    if (want_codemap) {
        w->ckey = carve(base, &off, ccap, sizeof(uint32_t));
        w->cval = carve(base, &off, ccap, sizeof(int32_t));
        w->cmask = (uint32_t)(ccap - 1);
        w->cshift = 32 - log2_exact(ccap);
    }
    w->st = carve(base, &off, 2 * wmax + 2, sizeof(State));
    w->root = carve(base, &off, nb + 2, sizeof(int32_t));
    w->ec = carve(base, &off, 3 * wmax + 8, sizeof(int32_t));
    w->enext = carve(base, &off, 3 * wmax + 8, sizeof(int32_t));
    w->apre = carve(base, &off, na + 1, sizeof(int64_t));
    w->stamp0 = carve(base, &off, nb + 1, sizeof(uint32_t));
    w->stamp1 = carve(base, &off, nb + 1, sizeof(uint32_t));
    w->len0 = carve(base, &off, nb + 1, sizeof(int32_t));
    w->len1 = carve(base, &off, nb + 1, sizeof(int32_t));
    w->b2j_off = carve(base, &off, nb + 2, sizeof(int32_t));
    w->b2j_pos = carve(base, &off, nb + 1, sizeof(int32_t));
    w->row0 = carve(base, &off, nb + 2, sizeof(int32_t));
    w->row1 = carve(base, &off, nb + 2, sizeof(int32_t));
    w->stack = carve(base, &off, wmin + 2, sizeof(Window));
    w->blocks = carve(base, &off, wmin + 2, sizeof(Block));
    *total = off;
    return 0;
}

static int
work_alloc(Work *w, Py_ssize_t na, Py_ssize_t nb, int want_codemap, int want_mask, int strategy)
{
    size_t total = 0;
    memset(w, 0, sizeof(*w));
    w->na = (int32_t)na;
    w->nb = (int32_t)nb;
    w->strategy = strategy;
    work_layout(w, NULL, &total, want_codemap, want_mask);
    w->arena = malloc(total);
    if (w->arena == NULL) {
        return -1;
    }
    work_layout(w, (char *)w->arena, &total, want_codemap, want_mask);
    return 0;
}

static void
work_free(Work *w)
{
    free(w->arena);
    w->arena = NULL;
    free(w->gram_arena);
    w->gram_arena = NULL;
}

/* ------------------------------------------------------------------------------------------------ */
/* symbol remapping                                                                                 */

/* Maps the code points already stored in ra/rb to dense ids: b's distinct values get 0..nsym-1 in
 * order of first appearance, values only found in a get nsym.  ASCII goes through a direct table, the
 * rest through an open-addressing hash.  Also counts occurrences in b (for the autojunk rule). */
static void
remap_codepoints(Work *w)
{
    int32_t ascii[128];
    int32_t nsym = 0;
    int32_t *rb = w->rb, *ra = w->ra, *count = w->count;
    uint32_t *ckey = w->ckey;
    int32_t *cval = w->cval;
    uint32_t mask = w->cmask;
    int shift = w->cshift;

    for (int c = 0; c < 128; c++) {
        ascii[c] = -1;
    }
    for (uint32_t s = 0; s <= mask; s++) {
        cval[s] = -1;
    }
    for (int32_t j = 0; j < w->nb; j++) {
        uint32_t v = (uint32_t)rb[j];
        int32_t id;
        if (v < 128) {
            id = ascii[v];
            if (id < 0) {
                id = ascii[v] = nsym;
                count[nsym++] = 0;
            }
        }
        else {
            uint32_t h = (v * 2654435761u) >> shift;
            for (;;) {
                if (cval[h] < 0) {
                    ckey[h] = v;
                    id = cval[h] = nsym;
                    count[nsym++] = 0;
                    break;
                }
                if (ckey[h] == v) {
                    id = cval[h];
                    break;
                }
                h = (h + 1) & mask;
            }
        }
        rb[j] = id;
        count[id]++;
    }
    for (int32_t i = 0; i < w->na; i++) {
        uint32_t v = (uint32_t)ra[i];
        int32_t id = nsym;
        if (v < 128) {
            if (ascii[v] >= 0) {
                id = ascii[v];
            }
        }
        else {
            uint32_t h = (v * 2654435761u) >> shift;
            while (cval[h] >= 0) {
                if (ckey[h] == v) {
                    id = cval[h];
                    break;
                }
                h = (h + 1) & mask;
            }
        }
        ra[i] = id;
    }
    w->nsym = nsym;
}

/* difflib's autojunk rule: with len(b) >= 200, elements occurring more than len(b)//100 + 1 times in b
 * are dropped from b2j.  Builds masked copies (popular -> per-side sentinel) when one is popular. */
static void
apply_autojunk(Work *w, int autojunk)
{
    w->ma = w->ra;
    w->mb = w->rb;
    w->has_mask = 0;
    if (!autojunk || w->nb < 200 || w->mabuf == NULL) {
        return;
    }
    const int32_t ntest = w->nb / 100 + 1;
    const int32_t *count = w->count;
    const int32_t nsym = w->nsym;
    int any = 0;
    for (int32_t s = 0; s < nsym; s++) {
        if (count[s] > ntest) {
            any = 1;
            break;
        }
    }
    if (!any) {
        return;
    }
    for (int32_t j = 0; j < w->nb; j++) {
        int32_t id = w->rb[j];
        w->mbbuf[j] = count[id] > ntest ? nsym + 1 : id;
    }
    for (int32_t i = 0; i < w->na; i++) {
        int32_t id = w->ra[i];
        w->mabuf[i] = (id < nsym && count[id] > ntest) ? nsym : id;
    }
    w->ma = w->mabuf;
    w->mb = w->mbbuf;
    w->has_mask = 1;
}

/* ------------------------------------------------------------------------------------------------ */
/* suffix automaton                                                                                 */

static inline uint64_t
edge_key(int32_t s, int32_t c)
{
    return ((uint64_t)(uint32_t)s << 32) | (uint32_t)c;
}

static inline uint64_t
edge_slot(const Work *w, uint64_t key)
{
    return (key * 0x9E3779B97F4A7C15ULL) >> w->hshift;
}

/* Target of the transition (s, c), or -1. */
static inline int32_t
sam_next(const Work *w, int32_t s, int32_t c)
{
    if (s == 0) {
        return w->root[c];
    }
    const uint64_t key = edge_key(s, c);
    uint64_t h = edge_slot(w, key);
    for (;;) {
        const Edge *slot = &w->htab[h];
        if (slot->gen != w->hgen) {
            return -1;
        }
        if (slot->key == key) {
            return slot->to;
        }
        h = (h + 1) & w->hmask;
    }
}

/* Adds a transition known to be absent; it is also linked into s's symbol list (clones copy it). */
static inline void
sam_add(Work *w, int32_t s, int32_t c, int32_t to)
{
    const int32_t e = w->nedge++;
    w->ec[e] = c;
    w->enext[e] = w->st[s].head;
    w->st[s].head = e;
    if (s == 0) {
        w->root[c] = to;
        return;
    }
    const uint64_t key = edge_key(s, c);
    uint64_t h = edge_slot(w, key);
    while (w->htab[h].gen == w->hgen) {
        h = (h + 1) & w->hmask;
    }
    w->htab[h] = (Edge){key, to, w->hgen};
}

/* Redirects the existing transition (s, c) from `from` to `to`; returns 0 when (s, c) does not lead to
 * `from` (the clone loop stops there). */
static inline int
sam_redirect(Work *w, int32_t s, int32_t c, int32_t from, int32_t to)
{
    if (s == 0) {
        if (w->root[c] != from) {
            return 0;
        }
        w->root[c] = to;
        return 1;
    }
    const uint64_t key = edge_key(s, c);
    uint64_t h = edge_slot(w, key);
    for (;;) {
        Edge *slot = &w->htab[h];
        if (slot->gen != w->hgen) {
            return 0;
        }
        if (slot->key == key) {
            if (slot->to != from) {
                return 0;
            }
            slot->to = to;
            return 1;
        }
        h = (h + 1) & w->hmask;
    }
}

/* Standard online construction over x[lo:hi]; fpos holds ABSOLUTE end indices into x. */
static void
sam_build(Work *w, const int32_t *x, int32_t lo, int32_t hi)
{
    State *st = w->st;
    const size_t cap = pow2_at_least(4 * (size_t)(hi - lo) + 16);
    w->hmask = cap - 1;
    w->hshift = 64 - log2_exact(cap);
    if (w->hgen == 0) {
        for (size_t h = 0; h < w->hcap; h++) {
            w->htab[h].gen = 0;
        }
    }
    w->hgen++; /* at most one automaton per window and < 2^27 windows: never wraps */
    w->nedge = 0;
    st[0] = (State){0, -1, -1, -1};
    int32_t size = 1, last = 0;
    for (int32_t pos = lo; pos < hi; pos++) {
        const int32_t c = x[pos];
        const int32_t cur = size++;
        st[cur] = (State){st[last].len + 1, 0, pos, -1};
        int32_t p = last, q = -1;
        while (p != -1 && (q = sam_next(w, p, c)) < 0) {
            sam_add(w, p, c, cur);
            p = st[p].link;
        }
        if (p == -1) {
            st[cur].link = 0;
        }
        else if (st[p].len + 1 == st[q].len) {
            st[cur].link = q;
        }
        else {
            const int32_t clone = size++;
            st[clone] = (State){st[p].len + 1, st[q].link, st[q].fpos, -1};
            for (int32_t e = st[q].head; e >= 0; e = w->enext[e]) {
                sam_add(w, clone, w->ec[e], sam_next(w, q, w->ec[e]));
            }
            while (p != -1 && sam_redirect(w, p, c, q, clone)) {
                p = st[p].link;
            }
            st[q].link = clone;
            st[cur].link = clone;
        }
        last = cur;
    }
}

/* Undo the root's dense transitions so the next build starts clean without an O(alphabet) clear. */
static void
sam_clear_root(Work *w)
{
    for (int32_t e = w->st[0].head; e >= 0; e = w->enext[e]) {
        w->root[w->ec[e]] = -1;
    }
    w->st[0].head = -1;
}

/* Longest common substring of ma[alo:ahi] and mb[blo:bhi] with difflib's tie-breaking (see the top of
 * the file for why both orientations give the smallest (i, j)). */
static void
sam_search(Work *w, int over_b, int32_t alo, int32_t ahi, int32_t blo, int32_t bhi, int32_t most, Block *res)
{
    const int32_t *y;
    int32_t ylo, yhi;
    if (over_b) {
        sam_build(w, w->mb, blo, bhi);
        y = w->ma;
        ylo = alo;
        yhi = ahi;
    }
    else {
        sam_build(w, w->ma, alo, ahi);
        y = w->mb;
        ylo = blo;
        yhi = bhi;
    }
    const State *st = w->st;
    const int32_t *root = w->root;
    int32_t best = 0, bi = alo, bj = blo;
    int32_t v = 0, l = 0;
    for (int32_t t = ylo; t < yhi; t++) {
        const int32_t c = y[t];
        if (root[c] < 0) {
            /* symbol absent from the built side: no state has a transition on it */
            v = 0;
            l = 0;
            continue;
        }
        for (;;) {
            const int32_t nx = sam_next(w, v, c);
            if (nx >= 0) {
                v = nx;
                l++;
                break;
            }
            v = st[v].link;
            l = st[v].len;
        }
        if (over_b) {
            if (l > best) {
                best = l;
                bi = t - l + 1;
                bj = st[v].fpos - l + 1;
                if (best == most) {
                    break; /* later positions can only tie, and ties keep the earlier i */
                }
            }
        }
        else if (l > best || (l == best && l > 0 && st[v].fpos - l + 1 < bi)) {
            best = l;
            bi = st[v].fpos - l + 1;
            bj = t - l + 1;
            if (best == most && bi == alo) {
                break; /* nothing can beat the smallest possible i at the largest possible size */
            }
        }
    }
    sam_clear_root(w);
    res->i = bi;
    res->j = bj;
    res->k = best;
}

/* ------------------------------------------------------------------------------------------------ */
/* quadratic DP for small windows                                                                   */

/* difflib's own DP (i ascending, j ascending, strict ">") with j2len as a rolling row. */
static void
dp_search(Work *w, int32_t alo, int32_t ahi, int32_t blo, int32_t bhi, int32_t most, Block *res)
{
    const int32_t *ma = w->ma, *bp = w->mb + blo;
    const int32_t wb = bhi - blo;
    const int32_t nsym = w->nsym;
    int32_t *prev = w->row0, *cur = w->row1;
    int32_t best = 0, bi = alo, bj = blo;
    int prev_zero = 1;
    memset(prev, 0, (size_t)(wb + 1) * sizeof(int32_t));
    cur[0] = 0;
    for (int32_t i = alo; i < ahi; i++) {
        const int32_t ai = ma[i];
        if (ai >= nsym) {
            /* a-side sentinel: equals nothing in b, so this row is all zeros */
            if (!prev_zero) {
                memset(prev, 0, (size_t)(wb + 1) * sizeof(int32_t));
                prev_zero = 1;
            }
            continue;
        }
        int32_t rowmax = 0;
        for (int32_t jj = 0; jj < wb; jj++) {
            const int32_t k = (bp[jj] == ai) ? prev[jj] + 1 : 0;
            cur[jj + 1] = k;
            rowmax = k > rowmax ? k : rowmax;
        }
        if (rowmax > best) {
            int32_t jj = 0;
            while (cur[jj + 1] != rowmax) {
                jj++;
            }
            best = rowmax;
            bi = i - rowmax + 1;
            bj = blo + jj - rowmax + 1;
            if (best == most) {
                break;
            }
        }
        int32_t *tmp = prev;
        prev = cur;
        cur = tmp;
        prev_zero = rowmax == 0;
    }
    res->i = bi;
    res->j = bj;
    res->k = best;
}

/* ------------------------------------------------------------------------------------------------ */
/* sparse DP: difflib's algorithm proper, for inputs whose elements rarely repeat (lines)            */

/* First element >= x of the ascending array [p, e), or e.  Most lists are short (lines rarely repeat), and
 * a linear scan beats a binary search there. */
static inline const int32_t *
first_at_least(const int32_t *p, const int32_t *e, int32_t x)
{
    if (e - p <= 8) {
        while (p < e && *p < x) {
            p++;
        }
        return p;
    }
    while (p < e) {
        const int32_t *mid = p + (e - p) / 2;
        if (*mid < x) {
            p = mid + 1;
        }
        else {
            e = mid;
        }
    }
    return p;
}

static void
build_b2j(Work *w)
{
    const int32_t nsym = w->nsym, nb = w->nb;
    const int32_t *mb = w->mb;
    int32_t *off = w->b2j_off, *pos = w->b2j_pos;
    memset(off, 0, (size_t)(nsym + 2) * sizeof(int32_t));
    for (int32_t j = 0; j < nb; j++) {
        if (mb[j] < nsym) {
            off[mb[j] + 2]++;
        }
    }
    for (int32_t s = 0; s < nsym; s++) {
        off[s + 2] += off[s + 1];
    }
    /* now off[s + 1] is where s's list starts; placing advances it to where s's list ends, which leaves
     * off[s] = start and off[s + 1] = end of s's list */
    for (int32_t j = 0; j < nb; j++) {
        if (mb[j] < nsym) {
            pos[off[mb[j] + 1]++] = j;
        }
    }
    memset(w->stamp0, 0, (size_t)(nb + 1) * sizeof(uint32_t));
    memset(w->stamp1, 0, (size_t)(nb + 1) * sizeof(uint32_t));
    w->gen = 1;
    w->b2j_ready = 1;
}

/* Walks, for each i, the positions of a[i] in b[blo:bhi] in ascending order, as difflib does, so the
 * strict ">" gives the same tie-breaking.  difflib's j2len / newj2len dicts become two arrays used
 * alternately (row parity); an entry is valid only if its stamp is the previous row's generation, so
 * nothing is ever cleared.  A fresh generation per row (and a gap between windows) means stale entries
 * from other rows or windows can never be read. */
static void
sparse_search(Work *w, int32_t alo, int32_t ahi, int32_t blo, int32_t bhi, int32_t most, Block *res)
{
    if (!w->b2j_ready) {
        build_b2j(w);
    }
    const int32_t *ma = w->ma, *off = w->b2j_off, *pos = w->b2j_pos;
    const int32_t nsym = w->nsym;
    int32_t best = 0, bi = alo, bj = blo;
    uint32_t g = w->gen + 2;
    if (g > UINT32_MAX - (uint32_t)(ahi - alo) - 4) {
        memset(w->stamp0, 0, (size_t)(w->nb + 1) * sizeof(uint32_t));
        memset(w->stamp1, 0, (size_t)(w->nb + 1) * sizeof(uint32_t));
        g = 2;
    }
    for (int32_t i = alo; i < ahi; i++, g++) {
        const int32_t c = ma[i];
        if (c >= nsym) {
            continue; /* sentinel: not in b2j; the row stays empty */
        }
        /* first position >= blo (difflib skips them one by one; same result) */
        const int32_t *e = pos + off[c + 1];
        const int32_t *p = first_at_least(pos + off[c], e, blo);
        uint32_t *scur = (g & 1) ? w->stamp1 : w->stamp0;
        int32_t *lcur = (g & 1) ? w->len1 : w->len0;
        const uint32_t *sprev = (g & 1) ? w->stamp0 : w->stamp1;
        const int32_t *lprev = (g & 1) ? w->len0 : w->len1;
        const uint32_t gprev = g - 1;
        for (; p < e && *p < bhi; p++) {
            const int32_t j = *p;
            const int32_t k = (j > blo && sprev[j - 1] == gprev) ? lprev[j - 1] + 1 : 1;
            scur[j] = g;
            lcur[j] = k;
            if (k > best) {
                best = k;
                bi = i - k + 1;
                bj = j - k + 1;
                if (best == most) {
                    goto done; /* later candidates can only tie, and ties keep the earlier one */
                }
            }
        }
    }
done:
    w->gen = g + 1;
    res->i = bi;
    res->j = bj;
    res->k = best;
}

/* When no match can be longer than 1 the answer is the first i whose element occurs in b[blo:bhi], with
 * its first occurrence there: O(scanned elements * log) instead of a pass over the whole window.  This
 * keeps long chains of length-1 matches (each window peeling off one element) from going quadratic. */
static void
first_hit_search(Work *w, int32_t alo, int32_t ahi, int32_t blo, int32_t bhi, Block *res)
{
    if (!w->b2j_ready) {
        build_b2j(w);
    }
    const int32_t *ma = w->ma, *off = w->b2j_off, *pos = w->b2j_pos;
    const int32_t nsym = w->nsym;
    for (int32_t i = alo; i < ahi; i++) {
        const int32_t c = ma[i];
        if (c >= nsym) {
            continue;
        }
        const int32_t *p = first_at_least(pos + off[c], pos + off[c + 1], blo);
        if (p < pos + off[c + 1] && *p < bhi) {
            res->i = i;
            res->j = *p;
            res->k = 1;
            return;
        }
    }
    res->i = alo;
    res->j = blo;
    res->k = 0;
}

/* ------------------------------------------------------------------------------------------------ */
/* chains: K-gram index                                                                             */

#define GRAM_MOD (((uint64_t)1 << 61) - 1)
#define GRAM_BASE (0x5bd1e9955bd1e995ULL % GRAM_MOD)
#define GRAM_EMPTY UINT64_MAX
#define COST_GRAM_BUILD 80 /* per element of b, to build one K-gram index (quarter ns) */

/* x * y mod 2^61-1 for x, y < 2^61, in portable C (no 128-bit type needed): with x = xh 2^31 + xl and
 * y = yh 2^31 + yl, x y = xh yh 2^62 + m 2^31 + xl yl where m = xh yl + xl yh = mh 2^30 + ml, and
 * 2^61 = 1 (mod p) turns 2^62 into 2 and m 2^31 into mh + ml 2^31.  Every term is < 2^62, the sum < 2^64. */
static inline uint64_t
mulmod61(uint64_t x, uint64_t y)
{
    const uint64_t low31 = ((uint64_t)1 << 31) - 1, low30 = ((uint64_t)1 << 30) - 1;
    const uint64_t xh = x >> 31, xl = x & low31, yh = y >> 31, yl = y & low31;
    const uint64_t m = xh * yl + xl * yh;
    uint64_t r = ((xh * yh) << 1) + (m >> 30) + ((m & low30) << 31) + xl * yl;
    r = (r & GRAM_MOD) + (r >> 61);
    r = (r & GRAM_MOD) + (r >> 61);
    return r >= GRAM_MOD ? r - GRAM_MOD : r;
}

/* Hash of seq[pos:pos+k] from prefix hashes h (h[n] = h[n-1] * base + seq[n-1] + 1). */
static inline uint64_t
gram_hash(const uint64_t *h, const uint64_t *pw, int32_t pos, int32_t k)
{
    const uint64_t sub = mulmod61(h[pos], pw[k]);
    const uint64_t top = h[pos + k];
    return top >= sub ? top - sub : top + GRAM_MOD - sub;
}

static int
gram_prepare(Work *w)
{
    if (w->gram_arena != NULL) {
        return 0;
    }
    const size_t na = (size_t)w->na, nb = (size_t)w->nb;
    const size_t cap = pow2_at_least(2 * nb + 16);
    const size_t bytes = (na + 1 + 2 * (nb + 1)) * sizeof(uint64_t) + cap * sizeof(uint64_t) +
                         (cap + 3 * (nb + 2)) * sizeof(int32_t);
    char *mem = malloc(bytes);
    if (mem == NULL) {
        w->gram_failed = 1;
        return -1;
    }
    w->gram_arena = mem;
    w->ha = (uint64_t *)mem;
    w->hb = w->ha + na + 1;
    w->pw = w->hb + nb + 1;
    w->gkey = w->pw + nb + 1;
    w->gbucket = (int32_t *)(w->gkey + cap);
    w->goff = w->gbucket + cap;
    w->gpos = w->goff + nb + 2;
    w->gtmp = w->gpos + nb + 2;
    w->gmask = cap - 1;
    w->gram_k = 0;
    const uint64_t base = w->strategy == STRAT_CHAIN_COLLIDE ? 1 : GRAM_BASE;
    w->ha[0] = w->hb[0] = 0;
    w->pw[0] = 1;
    for (size_t i = 0; i < na; i++) {
        w->ha[i + 1] = (mulmod61(w->ha[i], base) + (uint64_t)w->ma[i] + 1) % GRAM_MOD;
    }
    for (size_t j = 0; j < nb; j++) {
        w->hb[j + 1] = (mulmod61(w->hb[j], base) + (uint64_t)w->mb[j] + 1) % GRAM_MOD;
        w->pw[j + 1] = mulmod61(w->pw[j], base);
    }
    return 0;
}

static inline uint64_t
gram_slot(const Work *w, uint64_t g)
{
    return ((g * 0x9E3779B97F4A7C15ULL) >> 17) & w->gmask;
}

/* Buckets every K-gram of b by hash, positions ascending (counting sort, O(nb)). */
static void
gram_build(Work *w, int32_t k)
{
    const int32_t ngram = w->nb - k + 1;
    int32_t nbucket = 0;
    for (uint64_t s = 0; s <= w->gmask; s++) {
        w->gkey[s] = GRAM_EMPTY;
    }
    int32_t *bucket_of = w->gtmp;
    for (int32_t p = 0; p < ngram; p++) {
        const uint64_t g = gram_hash(w->hb, w->pw, p, k);
        uint64_t s = gram_slot(w, g);
        while (w->gkey[s] != GRAM_EMPTY && w->gkey[s] != g) {
            s = (s + 1) & w->gmask;
        }
        if (w->gkey[s] == GRAM_EMPTY) {
            w->gkey[s] = g;
            w->gbucket[s] = nbucket++;
        }
        bucket_of[p] = w->gbucket[s];
    }
    memset(w->goff, 0, (size_t)(nbucket + 2) * sizeof(int32_t));
    for (int32_t p = 0; p < ngram; p++) {
        w->goff[bucket_of[p] + 2]++;
    }
    for (int32_t t = 0; t < nbucket; t++) {
        w->goff[t + 2] += w->goff[t + 1];
    }
    /* as in build_b2j: afterwards goff[t] / goff[t + 1] delimit bucket t */
    for (int32_t p = 0; p < ngram; p++) {
        w->gpos[w->goff[bucket_of[p] + 1]++] = p;
    }
    w->gram_k = k;
}

/* With no match longer than k possible, difflib's answer is the first i whose k-gram occurs in
 * b[blo:bhi], at its first occurrence there.  Every candidate is verified element by element, so hash
 * collisions cost time, never exactness.  Returns 0 when there is no match of size k. */
static int
gram_search(Work *w, int32_t alo, int32_t ahi, int32_t blo, int32_t bhi, int32_t k, Block *res)
{
    const int32_t *ma = w->ma, *mb = w->mb;
    const int32_t nsym = w->nsym;
    const int32_t jmax = bhi - k; /* last start in b */
    for (int32_t i = alo; i + k <= ahi; i++) {
        if (ma[i] >= nsym) {
            continue;
        }
        const uint64_t g = gram_hash(w->ha, w->pw, i, k);
        uint64_t s = gram_slot(w, g);
        while (w->gkey[s] != GRAM_EMPTY && w->gkey[s] != g) {
            s = (s + 1) & w->gmask;
        }
        if (w->gkey[s] == GRAM_EMPTY) {
            continue;
        }
        const int32_t bucket = w->gbucket[s];
        const int32_t *e = w->gpos + w->goff[bucket + 1];
        for (const int32_t *p = first_at_least(w->gpos + w->goff[bucket], e, blo); p < e && *p <= jmax; p++) {
            if (memcmp(ma + i, mb + *p, (size_t)k * sizeof(int32_t)) == 0) {
                res->i = i;
                res->j = *p;
                res->k = k;
                return 1;
            }
        }
    }
    return 0;
}

/* ------------------------------------------------------------------------------------------------ */
/* difflib's find_longest_match and get_matching_blocks                                             */

/* Estimated costs, in quarter nanoseconds, measured on x86-64 (AMD EPYC) with diff text and line lists. */
#define COST_DP_CELL 2     /* per cell of the quadratic DP (vectorised compare + row max) */
#define COST_DP_ROW 16     /* per row of it */
#define COST_SPARSE_ROW 40 /* per element of a: b2j lookup + binary search */
#define COST_SPARSE_HIT 6  /* per occurrence walked */
#define COST_SAM_BUILD 48  /* per element of the side the automaton is built over */
#define COST_SAM_STREAM 16 /* per element streamed through it */
#define COST_SAM_FIXED 400 /* per window: clearing the transition table etc. */

static int
choose_strategy(const Work *w, int32_t alo, int32_t ahi, int32_t blo, int32_t bhi, int64_t *cost)
{
    const int64_t wa = ahi - alo, wb = bhi - blo;
    const int64_t dp = COST_DP_CELL * wa * wb + COST_DP_ROW * wa;
    /* occurrences of a's symbols in ALL of b: an upper bound of the sparse DP's walk in this window */
    const int64_t hits = w->apre[ahi] - w->apre[alo];
    const int64_t sparse = COST_SPARSE_ROW * wa + COST_SPARSE_HIT * hits;
    const int64_t small = wa < wb ? wa : wb, large = wa < wb ? wb : wa;
    const int64_t sam = COST_SAM_BUILD * small + COST_SAM_STREAM * large + COST_SAM_FIXED;
    if (dp <= sparse && dp <= sam) {
        *cost = dp;
        return STRAT_DP;
    }
    *cost = sparse <= sam ? sparse : sam;
    return sparse <= sam ? STRAT_SPARSE : STRAT_SAM;
}

/* find_longest_match on the window.  `bound` is an upper bound of the (masked) longest match: the size
 * found for the parent window, since a sub-window's matches are matches of the parent.  It allows
 * stopping at the first match of that size and the shortcuts for 0 and 1.  The size of the match before
 * the autojunk extension is returned in *core (the bound for the sub-windows).
 *
 * `tight` says the parent's match had the size of the parent's bound.  That is the signature of a chain,
 * e.g. "aaaa..." against "aab aab ...": every window yields a block of the same size near its start and
 * hands the rest to a sub-window that is barely smaller, so a linear engine per window would be quadratic
 * in total.  For such windows, with K the bound:
 *   - after 4 tight windows in a row with the same K (a confirmed chain) that are large enough to pay for
 *     it, b's K-grams are indexed once (gram_build, O(nb)); each window is then answered by gram_search,
 *     which only scans a up to the first K-gram occurring in the window;
 *   - otherwise the DP runs on a few leading rows first (at most a quarter of the chosen engine's
 *     estimated cost): scanning rows in order, the first match of size K it meets IS difflib's answer
 *     (nothing is longer, and any match starting earlier would have ended in an earlier row).
 * When neither finds a match of size K the normal engine runs on the window (wasted work is bounded by a
 * constant factor); outside chains `tight` is rarely set. */
static void
find_longest(Work *w, int32_t alo, int32_t ahi, int32_t blo, int32_t bhi, int32_t bound, int tight,
             Block *res, int32_t *core)
{
    const int64_t wa = ahi - alo, wb = bhi - blo;
    int32_t most = (int32_t)(wa < wb ? wa : wb);
    most = bound < most ? bound : most;
    int strategy = w->strategy;
    if (most <= 0) {
        res->i = alo;
        res->j = blo;
        res->k = 0;
        strategy = -1;
    }
    else if (most == 1) {
        first_hit_search(w, alo, ahi, blo, bhi, res);
        strategy = -1;
    }
    else if (strategy == STRAT_AUTO || strategy >= STRAT_CHAIN_GRAM) {
        const int forced = strategy != STRAT_AUTO; /* tests: take the chain path everywhere */
        int64_t cost = 0;
        strategy = choose_strategy(w, alo, ahi, blo, bhi, &cost);
        if (forced || (tight && strategy != STRAT_DP)) {
            if (most == w->streak_k) {
                w->streak_n++;
            }
            else {
                w->streak_k = most;
                w->streak_n = 1;
            }
            /* a confirmed chain with this K: index b's K-grams once, every window then costs O(log) */
            const int gate = forced ? w->strategy != STRAT_CHAIN_PROBE
                                    : w->streak_n >= 4 && 8 * cost >= COST_GRAM_BUILD * (int64_t)w->nb;
            if (w->gram_k != most && gate && !w->gram_failed && gram_prepare(w) == 0) {
                gram_build(w, most);
            }
            if (w->gram_k == most && w->strategy != STRAT_CHAIN_PROBE) {
                if (gram_search(w, alo, ahi, blo, bhi, most, res)) {
                    strategy = -1;
                }
                else {
                    most--; /* no match of the bound's size: the engine below may stop one earlier */
                }
            }
            else {
                /* a few leading DP rows, at most a quarter of the engine's estimated cost */
                const int64_t rows =
                    forced ? most + (wa - most) / 2 : (cost / 4) / (COST_DP_CELL * wb + COST_DP_ROW);
                if (rows >= most) {
                    dp_search(w, alo, rows < wa ? alo + (int32_t)rows : ahi, blo, bhi, most, res);
                    if (res->k == most) {
                        strategy = -1;
                    }
                }
            }
        }
    }
    if (strategy == STRAT_SAM) {
        strategy = wa <= wb ? STRAT_SAM_OVER_A : STRAT_SAM_OVER_B;
    }
    if (strategy == STRAT_DP) {
        dp_search(w, alo, ahi, blo, bhi, most, res);
    }
    else if (strategy == STRAT_SPARSE) {
        sparse_search(w, alo, ahi, blo, bhi, most, res);
    }
    else if (strategy == STRAT_SAM_OVER_A || strategy == STRAT_SAM_OVER_B) {
        sam_search(w, strategy == STRAT_SAM_OVER_B, alo, ahi, blo, bhi, most, res);
    }
    *core = res->k;
    if (w->has_mask) {
        /* difflib's first pair of extension loops (bjunk is empty so the second pair never runs); they
         * compare the real elements, so they do extend over popular ones, even from a size-0 result. */
        const int32_t *ra = w->ra, *rb = w->rb;
        int32_t i = res->i, j = res->j, k = res->k;
        while (i > alo && j > blo && ra[i - 1] == rb[j - 1]) {
            i--;
            j--;
            k++;
        }
        while (i + k < ahi && j + k < bhi && ra[i + k] == rb[j + k]) {
            k++;
        }
        res->i = i;
        res->j = j;
        res->k = k;
    }
}

/* Windows on the stack are pairwise disjoint and non-empty on both sides, so at most min(na, nb) of
 * them are pending, and there are at most min(na, nb) blocks: both arrays were sized for that. */
static void
run_recursion(Work *w)
{
    Window *stack = w->stack;
    int32_t top = 0;
    w->nblocks = 0;
    stack[top++] = (Window){0, w->na, 0, w->nb, w->na < w->nb ? w->na : w->nb, 0};
    while (top > 0) {
        const Window win = stack[--top];
        Block blk;
        int32_t core;
        find_longest(w, win.alo, win.ahi, win.blo, win.bhi, win.bound, win.tight, &blk, &core);
        const int32_t tight = core == win.bound;
        if (blk.k == 0) {
            continue;
        }
        w->blocks[w->nblocks++] = blk;
        if (win.alo < blk.i && win.blo < blk.j) {
            stack[top++] = (Window){win.alo, blk.i, win.blo, blk.j, core, tight};
        }
        if (blk.i + blk.k < win.ahi && blk.j + blk.k < win.bhi) {
            stack[top++] = (Window){blk.i + blk.k, win.ahi, blk.j + blk.k, win.bhi, core, tight};
        }
    }
}

static int
cmp_block(const void *x, const void *y)
{
    const Block *p = x, *q = y;
    if (p->i != q->i) {
        return p->i < q->i ? -1 : 1;
    }
    if (p->j != q->j) {
        return p->j < q->j ? -1 : 1;
    }
    return (p->k > q->k) - (p->k < q->k);
}

/* Sort, then merge blocks that are adjacent in both sequences, as difflib does. */
static void
sort_and_merge(Work *w)
{
    Block *bl = w->blocks;
    int32_t n = w->nblocks, out = 0;
    if (n == 0) {
        return;
    }
    qsort(bl, (size_t)n, sizeof(Block), cmp_block);
    Block acc = bl[0];
    for (int32_t t = 1; t < n; t++) {
        if (acc.i + acc.k == bl[t].i && acc.j + acc.k == bl[t].j) {
            acc.k += bl[t].k;
        }
        else {
            bl[out++] = acc;
            acc = bl[t];
        }
    }
    bl[out++] = acc;
    w->nblocks = out;
}

/* Everything after the inputs are copied: runs without the GIL. */
static void
prepare_nogil(Work *w, int autojunk)
{
    if (w->need_codemap) {
        remap_codepoints(w);
    }
    for (int32_t s = 0; s < w->nsym + 2; s++) {
        w->root[s] = -1;
    }
    w->st[0].head = -1;
    w->hgen = 0; /* the table itself is cleared by the first sam_build */
    apply_autojunk(w, autojunk);
    /* cost estimate for the sparse DP; popular symbols and a-only ones are never walked */
    const int32_t *ma = w->ma, *count = w->count;
    int64_t acc = 0;
    w->apre[0] = 0;
    for (int32_t i = 0; i < w->na; i++) {
        acc += ma[i] < w->nsym ? count[ma[i]] : 0;
        w->apre[i + 1] = acc;
    }
}

/* ------------------------------------------------------------------------------------------------ */
/* input conversion (GIL held)                                                                      */

static void
read_codepoints(PyObject *s, int32_t *out)
{
    const Py_ssize_t n = PyUnicode_GET_LENGTH(s);
    const void *data = PyUnicode_DATA(s);
    switch (PyUnicode_KIND(s)) {
    case PyUnicode_1BYTE_KIND: {
        const Py_UCS1 *p = data;
        for (Py_ssize_t i = 0; i < n; i++) {
            out[i] = (int32_t)p[i];
        }
        break;
    }
    case PyUnicode_2BYTE_KIND: {
        const Py_UCS2 *p = data;
        for (Py_ssize_t i = 0; i < n; i++) {
            out[i] = (int32_t)p[i];
        }
        break;
    }
    default: {
        const Py_UCS4 *p = data;
        for (Py_ssize_t i = 0; i < n; i++) {
            out[i] = (int32_t)p[i];
        }
        break;
    }
    }
}

typedef struct {
    PyObject *obj; /* borrowed from the tuple of b's items; NULL = empty slot */
    Py_hash_t hash;
    int32_t id;
} ObjSlot;

/* Finds x in the table; inserts it with a fresh id when `insert` is set.  Same semantics as difflib's
 * b2j dict: identity first, then hash equality plus ==.  Returns the id, -1 if absent, -2 on error. */
static int32_t
objmap_find(ObjSlot *tab, size_t mask, PyObject *x, int insert, int32_t *nsym)
{
    const Py_hash_t h = PyObject_Hash(x);
    if (h == -1 && PyErr_Occurred()) {
        return -2;
    }
    size_t s = (size_t)(((uint64_t)h * 0x9E3779B97F4A7C15ULL) >> 20) & mask;
    for (;;) {
        ObjSlot *slot = &tab[s];
        if (slot->obj == NULL) {
            if (!insert) {
                return -1;
            }
            slot->obj = x;
            slot->hash = h;
            slot->id = (*nsym)++;
            return slot->id;
        }
        if (slot->obj == x) {
            return slot->id;
        }
        if (slot->hash == h) {
            if (PyUnicode_CheckExact(x) && PyUnicode_CheckExact(slot->obj)) {
                /* what dict lookups do for str keys (no Python-level __eq__ can be involved) */
                const Py_ssize_t len = PyUnicode_GET_LENGTH(x);
                const int kind = PyUnicode_KIND(x);
                if (PyUnicode_GET_LENGTH(slot->obj) == len && PyUnicode_KIND(slot->obj) == kind &&
                    memcmp(PyUnicode_DATA(slot->obj), PyUnicode_DATA(x), (size_t)len * (size_t)kind) == 0) {
                    return slot->id;
                }
                s = (s + 1) & mask;
                continue;
            }
            const int r = PyObject_RichCompareBool(slot->obj, x, Py_EQ);
            if (r < 0) {
                return -2;
            }
            if (r) {
                return slot->id;
            }
        }
        s = (s + 1) & mask;
    }
}

/* Generic sequences: ids through a hash of the objects themselves (GIL needed for hash / ==). */
static int
map_objects(Work *w, PyObject *ta, PyObject *tb)
{
    const size_t cap = pow2_at_least(2 * (size_t)w->nb + 16);
    ObjSlot *tab = PyMem_Calloc(cap, sizeof(ObjSlot));
    if (tab == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    int32_t nsym = 0;
    for (int32_t j = 0; j < w->nb; j++) {
        const int32_t id = objmap_find(tab, cap - 1, PyTuple_GET_ITEM(tb, j), 1, &nsym);
        if (id < 0) {
            PyMem_Free(tab);
            return -1;
        }
        w->rb[j] = id;
    }
    memset(w->count, 0, (size_t)nsym * sizeof(int32_t));
    for (int32_t j = 0; j < w->nb; j++) {
        w->count[w->rb[j]]++;
    }
    for (int32_t i = 0; i < w->na; i++) {
        const int32_t id = objmap_find(tab, cap - 1, PyTuple_GET_ITEM(ta, i), 0, &nsym);
        if (id == -2) {
            PyMem_Free(tab);
            return -1;
        }
        w->ra[i] = id;  /* -1 for now: nsym is only final after the loop, fixed below */
    }
    for (int32_t i = 0; i < w->na; i++) {
        if (w->ra[i] < 0) {
            w->ra[i] = nsym;
        }
    }
    w->nsym = nsym;
    PyMem_Free(tab);
    return 0;
}

/* Copies a and b into a fresh Work.  Strings are read as code points (fast path); anything else is
 * taken as a sequence of hashable items.  Returns -1 with an exception set on failure. */
static int
setup_work(Work *w, PyObject *a, PyObject *b, int autojunk, int strategy)
{
    const int both_str = PyUnicode_Check(a) && PyUnicode_Check(b);
    PyObject *ta = NULL, *tb = NULL;
    Py_ssize_t na, nb;
    if (both_str) {
        na = PyUnicode_GET_LENGTH(a);
        nb = PyUnicode_GET_LENGTH(b);
    }
    else {
        ta = PySequence_Tuple(a);
        if (ta == NULL) {
            return -1;
        }
        tb = PySequence_Tuple(b);
        if (tb == NULL) {
            Py_DECREF(ta);
            return -1;
        }
        na = PyTuple_GET_SIZE(ta);
        nb = PyTuple_GET_SIZE(tb);
    }
    if (na > MAX_INPUT_LEN || nb > MAX_INPUT_LEN) {
        Py_XDECREF(ta);
        Py_XDECREF(tb);
        PyErr_SetString(PyExc_OverflowError, "fastdiff: input sequence too long (limit 2**27 elements)");
        return -1;
    }
    if (work_alloc(w, na, nb, both_str, autojunk && nb >= 200, strategy) < 0) {
        Py_XDECREF(ta);
        Py_XDECREF(tb);
        PyErr_NoMemory();
        return -1;
    }
    if (both_str) {
        read_codepoints(a, w->ra);
        read_codepoints(b, w->rb);
        w->need_codemap = 1;
        return 0;
    }
    const int rc = map_objects(w, ta, tb);
    Py_DECREF(ta);
    Py_DECREF(tb);
    if (rc < 0) {
        work_free(w);
        return -1;
    }
    return 0;
}

static int
check_strategy(int strategy)
{
    if (strategy < STRAT_AUTO || strategy > STRAT_LAST) {
        PyErr_SetString(PyExc_ValueError, "strategy must be in 0..8");
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------------------------------------ */
/* module functions                                                                                 */

PyDoc_STRVAR(matching_characters_doc,
             "matching_characters(a, b, *, strategy=0) -> int\n\n"
             "Sum of the block sizes of SequenceMatcher(None, a, b, autojunk=False).get_matching_blocks()\n"
             "for two str.  `strategy` forces an engine (tests only): 0 auto, 1 DP, 2 automaton over the\n"
             "smaller side, 3 over b, 4 over a, 5 sparse DP over b2j (difflib's own walk), 6 / 7 the chain\n"
             "path (K-gram index / DP probe) on every window, 8 as 6 with a colliding hash.");

static PyObject *
py_matching_characters(PyObject *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"a", "b", "strategy", NULL};
    PyObject *a, *b;
    int strategy = STRAT_AUTO;
    Work w;
    (void)self;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "UU|$i:matching_characters", kwlist, &a, &b,
                                     &strategy)) {
        return NULL;
    }
    if (check_strategy(strategy) < 0) {
        return NULL;
    }
    if (PyUnicode_GET_LENGTH(a) == 0 || PyUnicode_GET_LENGTH(b) == 0) {
        return PyLong_FromLong(0);
    }
    if (setup_work(&w, a, b, 0, strategy) < 0) {
        return NULL;
    }
    int64_t total = 0;
    Py_BEGIN_ALLOW_THREADS
    prepare_nogil(&w, 0);
    run_recursion(&w);
    for (int32_t t = 0; t < w.nblocks; t++) {
        total += w.blocks[t].k;
    }
    Py_END_ALLOW_THREADS
    work_free(&w);
    return PyLong_FromLongLong((long long)total);
}

PyDoc_STRVAR(matching_blocks_doc,
             "matching_blocks(a, b, autojunk=True, *, strategy=0) -> list[tuple[int, int, int]]\n\n"
             "SequenceMatcher(None, a, b, autojunk=autojunk).get_matching_blocks() as plain tuples,\n"
             "including the final (len(a), len(b), 0).  a and b are two str or two sequences of\n"
             "hashable items.");

static PyObject *
py_matching_blocks(PyObject *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"a", "b", "autojunk", "strategy", NULL};
    PyObject *a, *b, *result = NULL;
    int autojunk = 1, strategy = STRAT_AUTO;
    Work w;
    (void)self;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO|p$i:matching_blocks", kwlist, &a, &b, &autojunk,
                                     &strategy)) {
        return NULL;
    }
    if (check_strategy(strategy) < 0 || setup_work(&w, a, b, autojunk, strategy) < 0) {
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    prepare_nogil(&w, autojunk);
    run_recursion(&w);
    sort_and_merge(&w);
    Py_END_ALLOW_THREADS
    result = PyList_New(w.nblocks + 1);
    if (result == NULL) {
        goto done;
    }
    for (int32_t t = 0; t <= w.nblocks; t++) {
        const Block blk = t < w.nblocks ? w.blocks[t] : (Block){w.na, w.nb, 0};
        PyObject *item = Py_BuildValue("(iii)", blk.i, blk.j, blk.k);
        if (item == NULL) {
            Py_CLEAR(result);
            goto done;
        }
        PyList_SET_ITEM(result, t, item);
    }
done:
    work_free(&w);
    return result;
}

PyDoc_STRVAR(find_longest_match_doc,
             "find_longest_match(a, b, alo, ahi, blo, bhi, autojunk=False, *, strategy=0)\n"
             "    -> tuple[int, int, int]\n\n"
             "SequenceMatcher(None, a, b, autojunk=autojunk).find_longest_match(alo, ahi, blo, bhi) as a\n"
             "plain tuple (the popular set is computed over all of b, as difflib does).");

static PyObject *
py_find_longest_match(PyObject *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"a", "b", "alo", "ahi", "blo", "bhi", "autojunk", "strategy", NULL};
    PyObject *a, *b;
    Py_ssize_t alo, ahi, blo, bhi;
    int autojunk = 0, strategy = STRAT_AUTO;
    Work w;
    Block blk;
    int32_t core;
    (void)self;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOnnnn|p$i:find_longest_match", kwlist, &a, &b, &alo,
                                     &ahi, &blo, &bhi, &autojunk, &strategy)) {
        return NULL;
    }
    if (check_strategy(strategy) < 0 || setup_work(&w, a, b, autojunk, strategy) < 0) {
        return NULL;
    }
    if (alo < 0 || alo > ahi || ahi > w.na || blo < 0 || blo > bhi || bhi > w.nb) {
        work_free(&w);
        PyErr_SetString(PyExc_ValueError, "find_longest_match: window out of range");
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    prepare_nogil(&w, autojunk);
    find_longest(&w, (int32_t)alo, (int32_t)ahi, (int32_t)blo, (int32_t)bhi, INT32_MAX, 0, &blk, &core);
    Py_END_ALLOW_THREADS
    work_free(&w);
    return Py_BuildValue("(iii)", blk.i, blk.j, blk.k);
}

static PyMethodDef matcher_methods[] = {
    {"matching_characters", (PyCFunction)(void (*)(void))py_matching_characters, METH_VARARGS | METH_KEYWORDS,
     matching_characters_doc},
    {"matching_blocks", (PyCFunction)(void (*)(void))py_matching_blocks, METH_VARARGS | METH_KEYWORDS,
     matching_blocks_doc},
    {"find_longest_match", (PyCFunction)(void (*)(void))py_find_longest_match, METH_VARARGS | METH_KEYWORDS,
     find_longest_match_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef matcher_module = {
    PyModuleDef_HEAD_INIT,
    "swerl.fastdiff._matcher",
    "Compiled, bit-exact core of difflib.SequenceMatcher (isjunk=None) used by swerl.fastdiff.",
    -1,
    matcher_methods,
    NULL,
    NULL,
    NULL,
    NULL,
};

PyMODINIT_FUNC
PyInit__matcher(void)
{
    return PyModule_Create(&matcher_module);
}
