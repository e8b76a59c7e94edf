/*
 * swerl._textscan -- passes over whole files for the edit format: whether a str holds any of several
 * substrings, and where its lines end.
 *
 * Why this exists: before a mined row is kept, the edit format checks that the base and merged contents
 * of every changed file hold none of its tags and markers (`think>`, `<<<<<<< SEARCH`, a `=======` line,
 * ...; `inverse._plain`).  That is five substring searches over two whole files per file per row.
 * CPython's `str.__contains__` runs its own search loop at 2-5 GB/s for these needles (~145 us over a
 * 100 kB file for all five); the C library's memmem (glibc's is tuned for short needles) does the same
 * five in ~55 us.
 *
 * Only text stored one byte per character (ASCII and Latin-1, nearly every source file) is searched
 * here: a needle holding a character past U+00FF cannot occur in it, and any other needle is compared
 * byte for byte in the same one-byte form.  For wider text None is returned and the caller searches with
 * `in`, so the answer is always exactly `any(needle in text for needle in needles)`.
 *
 * Applying a patch to a file in memory needs the offset where each line ends (`patch._line_ends`):
 * memchr finds the newlines at memory speed, ~3x faster than numpy's compare-then-nonzero over the
 * bytes; the offsets come back packed as native 64-bit integers in a bytes object, which Python reads
 * through a memoryview without making an int of each.
 *
 * memmem is a GNU and BSD extension (glibc, musl, macOS); where the C library lacks it, this optional
 * extension does not build and the pure-Python search is used.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memmem */
#endif
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <string.h>

/* 0 when `value` is a str ready to be read in place, else -1 with TypeError (naming `what`) set. */
static int
readable_str(PyObject *value, const char *what)
{
    if (!PyUnicode_Check(value)) {
        PyErr_Format(PyExc_TypeError, "%s must be str, not %.200s", what, Py_TYPE(value)->tp_name);
        return -1;
    }
#if PY_VERSION_HEX < 0x030C0000
    if (PyUnicode_READY(value) < 0)
        return -1;
#endif
    return 0;
}

PyDoc_STRVAR(contains_any_doc,
             "contains_any(text, needles, /)\n--\n\n"
             "any(needle in text for needle in needles) for a str stored one byte per character (a tuple of\n"
             "str needles); None for wider text, which the caller searches itself.");

static PyObject *
contains_any(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "contains_any() takes 2 arguments (%zd given)", nargs);
        return NULL;
    }
    PyObject *text = args[0], *needles = args[1];
    if (readable_str(text, "contains_any() text") < 0)
        return NULL;
    if (!PyTuple_Check(needles)) {
        PyErr_SetString(PyExc_TypeError, "contains_any() needles must be a tuple of str");
        return NULL;
    }
    Py_ssize_t count = PyTuple_GET_SIZE(needles);
    for (Py_ssize_t i = 0; i < count; i++) {
        if (readable_str(PyTuple_GET_ITEM(needles, i), "contains_any() needles") < 0)
            return NULL;
    }
    if (PyUnicode_KIND(text) != PyUnicode_1BYTE_KIND)
        Py_RETURN_NONE;
    const void *haystack = PyUnicode_1BYTE_DATA(text);
    size_t length = (size_t)PyUnicode_GET_LENGTH(text);
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *needle = PyTuple_GET_ITEM(needles, i);
        if (PyUnicode_KIND(needle) != PyUnicode_1BYTE_KIND)
            continue; /* holds a character no one-byte text can hold */
        size_t size = (size_t)PyUnicode_GET_LENGTH(needle);
        if (size == 0 || memmem(haystack, length, PyUnicode_1BYTE_DATA(needle), size) != NULL)
            Py_RETURN_TRUE;
    }
    Py_RETURN_FALSE;
}

PyDoc_STRVAR(line_ends_doc,
             "line_ends(text, /)\n--\n\n"
             "The offset after each line of a str stored one byte per character (lines end at \"\\n\"; a last\n"
             "line without one ends at len(text)), packed as native int64 in bytes; None for wider text.");

static PyObject *
line_ends(PyObject *module, PyObject *text)
{
    (void)module;
    if (readable_str(text, "line_ends() argument") < 0)
        return NULL;
    if (PyUnicode_KIND(text) != PyUnicode_1BYTE_KIND)
        Py_RETURN_NONE;
    const char *data = (const char *)PyUnicode_1BYTE_DATA(text);
    Py_ssize_t length = PyUnicode_GET_LENGTH(text);
    Py_ssize_t count = 0;
    for (Py_ssize_t i = 0; i < length; i++) /* vectorised by the compiler */
        count += data[i] == '\n';
    int open_end = length > 0 && data[length - 1] != '\n';
    PyObject *out = PyBytes_FromStringAndSize(NULL, (count + open_end) * (Py_ssize_t)sizeof(int64_t));
    if (out == NULL)
        return NULL;
    char *slots = PyBytes_AS_STRING(out);
    const char *at = data, *end = data + length;
    Py_ssize_t k = 0;
    while ((at = memchr(at, '\n', (size_t)(end - at))) != NULL) {
        int64_t offset = (int64_t)(at - data) + 1;
        memcpy(slots + k++ * sizeof(int64_t), &offset, sizeof offset);
        at++;
    }
    if (open_end) {
        int64_t offset = (int64_t)length;
        memcpy(slots + k * sizeof(int64_t), &offset, sizeof offset);
    }
    return out;
}

static PyMethodDef textscan_methods[] = {
    {"contains_any", (PyCFunction)(void (*)(void))contains_any, METH_FASTCALL, contains_any_doc},
    {"line_ends", (PyCFunction)line_ends, METH_O, line_ends_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef textscan_module = {
    PyModuleDef_HEAD_INIT,
    "swerl._textscan",
    "Passes over whole files for the edit format: substring search, line ends.",
    -1,
    textscan_methods,
    NULL,
    NULL,
    NULL,
    NULL,
};

PyMODINIT_FUNC
PyInit__textscan(void)
{
    return PyModule_Create(&textscan_module);
}
