/* kwire proxy --write-pcap: the ones' complement sum of a payload's 16-bit words (RFC 1071), the
 * part of the TCP checksum that reads every byte. Optional: pcapout.py computes the same in Python
 * (one big-integer conversion and a modulo) when this is not built. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

static PyObject *word_sum(PyObject *self, PyObject *arg) {
    (void)self;
    Py_buffer b;
    if (PyObject_GetBuffer(arg, &b, PyBUF_SIMPLE) < 0)
        return NULL;
    const unsigned char *p = (const unsigned char *)b.buf;
    Py_ssize_t n = b.len, i = 0;
    uint64_t s = 0;
    /* 32-bit big-endian words in a 64-bit sum: 2**32 is 1 modulo 0xFFFF as 2**16 is; no overflow
       below 2**32 words */
    for (; i + 4 <= n; i += 4)
        s += ((uint64_t)p[i] << 24) | ((uint64_t)p[i + 1] << 16) | ((uint64_t)p[i + 2] << 8) | p[i + 3];
    for (; i + 2 <= n; i += 2)
        s += ((uint64_t)p[i] << 8) | p[i + 1];
    if (i < n)
        s += (uint64_t)p[i] << 8;
    PyBuffer_Release(&b);
    return Py_BuildValue("(KO)", (unsigned long long)(s % 0xFFFF), s ? Py_True : Py_False);
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
