/*
 * data_pipeline.context._tokencount -- the token estimate of data_pipeline.context.tokens in one C pass.
 *
 * Why this exists: the estimate, len(_PIECES.findall(text)) with
 *     _PIECES = r"[A-Za-z]{1,8}|\d{1,8}|[ \t]{1,8}|\n|[^\sA-Za-z\d]|\s",
 * is computed for every file shown while mining (thousands of texts of 10-40 kB).  One pass over the
 * characters here is about thirty times faster than the regular expression, and without it mining a
 * real repository takes about twice as long.  The extension is optional: without it tokens.py counts
 * with the regular expression.
 *
 * The text is read in place, in whichever width the str stores it (1, 2 or 4 bytes per character).  For
 * ASCII the classes are: letters (A-Za-z, the ASCII characters for which
 * str.isalpha() is true), digits (0-9, str.isdigit()), space/tab, each in runs of up to 8 characters per
 * piece, and everything else (newline, punctuation, other whitespace such as \r \x0b \x0c \x1c-\x1f,
 * control characters): one piece per character.  Past ASCII the regular expression's own rules decide:
 * [A-Za-z] and [ \t] are ASCII only, \d is any Unicode decimal digit (category Nd, the test sre itself
 * makes: Py_UNICODE_ISDECIMAL), and every other character (a letter such as e-acute, Unicode whitespace,
 * a symbol) matches [^\sA-Za-z\d] or \s, one piece each.  So a non-ASCII character is a digit or OTHER;
 * no character of 128-255 is in Nd, so one-byte (Latin-1) text needs only the ASCII rule.  Files with a
 * single accented name in a comment are common in real repositories: the regex costs ~30x this pass.
 *
 * How: a piece starts at character i when its class differs from that of character i-1 (a new run),
 * when it is of class OTHER, or at a cut inside a long run.  A cut is at i exactly when characters
 * i-8..i are all of one class other than OTHER and a piece starts at i-8 (the run's start or the
 * previous cut).  A plain loop that keeps the current run's length is branchy (about one branch per
 * piece, mispredicted often in source code); instead the text is done in chunks that stay in L1, each
 * with a few branch-free loops over bytes that the compiler vectorises, plus one loop over 8-byte words
 * for the cuts (their dependency reaches back exactly 8 characters, i.e. one word).  That is about twice
 * as fast as the plain loop.  Everything is plain, portable C: only byte-wise AND/OR on the words, and
 * the bytes of a word are summed by one multiplication (each is 0 or 1, so no carries: any byte order).
 *
 * PyUnicode_KIND / PyUnicode_DATA are not part of the limited API, so this module is built
 * against the full (but stable and documented) API; nothing else beyond METH_O and PyLong is used.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <string.h>

#define RUN 8      /* longest run of one class in one piece; the cut logic below assumes 8 (one word) */
#define CHUNK 1024 /* characters per chunk, a multiple of RUN */
#define OTHER 3    /* class of the characters that are a piece each */
#define NONE 4     /* class of the (absent) character before the text: differs from every class */

/* 0 letters, 1 digits, 2 space/tab, 3 anything else: the regular expression's classes for one ASCII
   character, as arithmetic the compiler can vectorise (the three tests are mutually exclusive). */
static inline unsigned char
char_class(unsigned char c)
{
    unsigned char letter = (unsigned char)((c | 0x20) - 'a') < 26; /* A-Z, a-z; not @ [ ` { */
    unsigned char digit = (unsigned char)(c - '0') < 10;
    unsigned char blank = (c == ' ') | (c == '\t');
    return (unsigned char)(OTHER - 3 * letter - 2 * digit - blank);
}

/* The class of any character: the ASCII rule, or digit / OTHER past it (see the top of the file). */
static inline unsigned char
wide_class(Py_UCS4 c)
{
    if (c < 128)
        return char_class((unsigned char)c);
    return Py_UNICODE_ISDECIMAL(c) ? 1 : OTHER;
}

static Py_ssize_t
count_pieces(int kind, const void *text, Py_ssize_t n)
{
    /* Per chunk, one byte (0/1 unless a class) per character.  The 8 entries before index 0 of `cls`
       and `change` hold the previous chunk's last 8 (before the first chunk: a character of no class,
       which changes class at every position). */
    unsigned char cls_buf[RUN + CHUNK], change_buf[RUN + CHUNK];
    unsigned char piece[CHUNK + RUN], run9[CHUNK + RUN]; /* + RUN: the last word, zero-padded */
    unsigned char *cls = cls_buf + RUN, *change = change_buf + RUN;
    uint64_t prev_starts = 0; /* piece starts (run starts and cuts) at the 8 characters before the word */
    Py_ssize_t count = 0;
    memset(cls_buf, NONE, RUN);
    memset(change_buf, 1, RUN);
    for (Py_ssize_t base = 0; base < n; base += CHUNK) {
        Py_ssize_t m = n - base < CHUNK ? n - base : CHUNK;
        Py_ssize_t padded = (m + RUN - 1) / RUN * RUN;
        Py_ssize_t i;
        if (kind == PyUnicode_1BYTE_KIND) {
            const Py_UCS1 *s = (const Py_UCS1 *)text + base;
            for (i = 0; i < m; i++)
                cls[i] = char_class(s[i]);
        }
        else if (kind == PyUnicode_2BYTE_KIND) {
            const Py_UCS2 *s = (const Py_UCS2 *)text + base;
            for (i = 0; i < m; i++)
                cls[i] = wide_class(s[i]);
        }
        else {
            const Py_UCS4 *s = (const Py_UCS4 *)text + base;
            for (i = 0; i < m; i++)
                cls[i] = wide_class(s[i]);
        }
        for (i = 0; i < m; i++) {
            unsigned char changed = cls[i] != cls[i - 1];
            change[i] = changed;
            piece[i] = changed | (cls[i] == OTHER); /* every piece start except cuts */
        }
        /* run9[i]: characters i-8..i are all of one class, not OTHER (a cut is possible at i) */
        for (i = 0; i < m; i++) {
            unsigned char any = change[i] | change[i - 1] | change[i - 2] | change[i - 3] | change[i - 4] |
                                change[i - 5] | change[i - 6] | change[i - 7];
            run9[i] = (unsigned char)(any == 0) & (cls[i] != OTHER);
        }
        for (i = m; i < padded; i++)
            change[i] = piece[i] = run9[i] = 0;
        for (i = 0; i < padded; i += RUN) {
            uint64_t run9_word, change_word, piece_word;
            memcpy(&run9_word, run9 + i, RUN);
            memcpy(&change_word, change + i, RUN);
            memcpy(&piece_word, piece + i, RUN);
            uint64_t cuts = run9_word & prev_starts;
            prev_starts = change_word | cuts;
            count += (Py_ssize_t)(((piece_word | cuts) * UINT64_C(0x0101010101010101)) >> 56);
        }
        if (m == CHUNK) {
            memcpy(cls_buf, cls + CHUNK - RUN, RUN);
            memcpy(change_buf, change + CHUNK - RUN, RUN);
        }
    }
    return count;
}

PyDoc_STRVAR(estimate_doc,
             "estimate(text, /)\n--\n\n"
             "len(_PIECES.findall(text)) for any str.");

static PyObject *
estimate(PyObject *module, PyObject *text)
{
    (void)module;
    if (!PyUnicode_Check(text)) {
        PyErr_Format(PyExc_TypeError, "estimate() argument must be str, not %.200s",
                     Py_TYPE(text)->tp_name);
        return NULL;
    }
#if PY_VERSION_HEX < 0x030C0000
    if (PyUnicode_READY(text) < 0)
        return NULL;
#endif
    return PyLong_FromSsize_t(
        count_pieces(PyUnicode_KIND(text), PyUnicode_DATA(text), PyUnicode_GET_LENGTH(text)));
}

static PyMethodDef tokencount_methods[] = {
    {"estimate", (PyCFunction)estimate, METH_O, estimate_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef tokencount_module = {
    PyModuleDef_HEAD_INIT,
    "data_pipeline.context._tokencount",
    "Compiled token estimate, used by data_pipeline.context.tokens.",
    -1,
    tokencount_methods,
    NULL,
    NULL,
    NULL,
    NULL,
};

PyMODINIT_FUNC
PyInit__tokencount(void)
{
    return PyModule_Create(&tokencount_module);
}
