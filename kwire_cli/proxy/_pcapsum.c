/* kwire proxy --write-pcap: the ones' complement sum of a payload's 16-bit words (RFC 1071), the
 * part of the TCP checksum that reads every byte. Optional: pcapout.py computes the same in Python
 * (one big-integer conversion and a modulo) when this is not built. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

static PyObject *word_sum(PyObject *self, PyObject *arg) {
    (void)self;
    Py_buffer b;
    if (PyObject_GetBuffer(arg, &b, PyBUF_SIMPLE) < 0)
        return NULL;
    const unsigned char *p = (const unsigned char *)b.buf;
    Py_ssize_t n = b.len, i = 0;
    uint64_t s = 0;
    /* RFC 1071's byte order independence: the words are summed as the machine reads them (32 bits
       at a time into 64: no overflow below 2**32 words), folded with end-around carries, and the
       folded sum's two bytes swapped back on a little-endian machine */
    for (; i + 4 <= n; i += 4) {
        uint32_t w;
        memcpy(&w, p + i, 4);
        s += w;
    }
    if (i + 2 <= n) {
        uint16_t w;
        memcpy(&w, p + i, 2);
        s += w;
        i += 2;
    }
    if (i < n) /* the last byte, padded with a zero byte */
#if PY_BIG_ENDIAN
        s += (uint64_t)p[i] << 8;
#else
        s += p[i];
#endif
    int nonzero = s != 0;
    while (s >> 16)
        s = (s & 0xFFFF) + (s >> 16);
#if !PY_BIG_ENDIAN
    s = ((s & 0xFF) << 8) | (s >> 8);
#endif
    PyBuffer_Release(&b);
    return Py_BuildValue("(KO)", (unsigned long long)(s % 0xFFFF), nonzero ? Py_True : Py_False);
}

static PyMethodDef methods[] = {
    {"word_sum", word_sum, METH_O,
     "word_sum(bytes-like) -> (sum of the 16-bit big-endian words modulo 0xFFFF, any word not 0); "
     "an odd length is padded with a zero byte."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_pcapsum", "Optional native checksum sum for kwire proxy --write-pcap.", -1, methods,
};

PyMODINIT_FUNC PyInit__pcapsum(void) { return PyModule_Create(&module_def); }
