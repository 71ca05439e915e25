/* What kwire's two optional extensions share (kwire_cli/codec/_speedups.c, the plan interpreter,
 * and kwire_cli/records/_native.c, the records fast path): a presized dict, and the on/off switch
 * each module keeps (set_enabled / is_enabled; kwire_cli.codec.native.use_speedups calls both). */
#ifndef KWIRE_NATIVE_COMMON_H
#define KWIRE_NATIVE_COMMON_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

static inline PyObject *kw_new_dict(Py_ssize_t n) {
#if PY_VERSION_HEX < 0x030D0000
    return _PyDict_NewPresized(n);
#else
    (void)n;
    return PyDict_New();
#endif
}

/* The module's switch: when off, its entry points hand every input back to the Python code. */
static int g_enabled = 1;

static PyObject *kw_set_enabled(PyObject *mod, PyObject *arg) {
    (void)mod;
    int v = PyObject_IsTrue(arg);
    if (v < 0)
        return NULL;
    int old = g_enabled;
    g_enabled = v;
    return PyBool_FromLong(old);
}

static PyObject *kw_is_enabled(PyObject *mod, PyObject *unused) {
    (void)mod;
    (void)unused;
    return PyBool_FromLong(g_enabled);
}

#define KW_SWITCH_METHODS(what)                                                                   \
    {"set_enabled", kw_set_enabled, METH_O,                                                       \
     "set_enabled(flag) -> previous flag: when false, " what},                                    \
    {"is_enabled", kw_is_enabled, METH_NOARGS, "is_enabled() -> bool"}

#endif
