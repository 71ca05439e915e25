/* kwire: a process keeps the memory it frees for reuse instead of giving it back (the proxy's
 * decoding process, spark-decode's Python workers).
 *
 * CPython takes its small objects from arenas it maps from the system and unmaps each arena as soon
 * as it is empty. The proxy's decoding process builds and drops a frame's worth of objects at a time (a
 * Produce request of 7,000 records is a tree of some MB), so arenas come and go all the time, and
 * every page of a fresh mapping is a page fault (on a VM, memory given back may have to come back
 * from the host). keep(n) installs an arena allocator that keeps up to n freed arenas and hands them
 * out again before mapping new ones: the process keeps the memory it needed at its peak, no more.
 * keep_malloc(mmap, trim, top_pad) does the same for glibc's malloc (large buffers: a file's read
 * chunk, a Kafka frame's bytes, output text): blocks under `mmap` bytes from the heap (no mapping
 * of their own), the heap's top given back only past `trim` bytes free, `top_pad` bytes more taken
 * at each growth (a negative value leaves a setting as it is; mallopt; does nothing with another
 * C library).
 * Optional: without it kwire runs the same, with the faults. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <sys/mman.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#define MAX_KEEP 4096

static PyObjectArenaAllocator base;  /* the interpreter's own (mmap and munmap) */
static void *kept[MAX_KEEP];
static size_t kept_size = 0;        /* every arena has the same size: the first one freed sets it */
static int n_kept = 0, keep_max = 0;
static unsigned long long reused = 0, mapped = 0;

static void *arena_alloc(void *ctx, size_t size) {
    (void)ctx;
    if (n_kept && size == kept_size) {
        reused++;
        return kept[--n_kept];
    }
    mapped++;
    return base.alloc(base.ctx, size);
}

static void arena_free(void *ctx, void *ptr, size_t size) {
    (void)ctx;
    if (ptr == NULL)
        return;
    if (n_kept < keep_max && (kept_size == 0 || size == kept_size)) {
        kept_size = size;
        kept[n_kept++] = ptr;
        return;
    }
    base.free(base.ctx, ptr, size);
}

static PyObject *keep(PyObject *self, PyObject *arg) {
    (void)self;
    long n = PyLong_AsLong(arg);
    if (n == -1 && PyErr_Occurred())
        return NULL;
    if (n < 0 || n > MAX_KEEP) {
        PyErr_Format(PyExc_ValueError, "keep: 0 to %d arenas", MAX_KEEP);
        return NULL;
    }
    if (base.alloc == NULL) {
        PyObject_GetArenaAllocator(&base);
        PyObjectArenaAllocator mine = {NULL, arena_alloc, arena_free};
        PyObject_SetArenaAllocator(&mine);
    }
    keep_max = (int)n;
    while (n_kept > keep_max) { /* fewer kept now: the rest given back */
        n_kept--;
        base.free(base.ctx, kept[n_kept], kept_size);
    }
    Py_RETURN_NONE;
}

static PyObject *keep_malloc(PyObject *self, PyObject *args) {
    int mmap_max, trim, top_pad;
    (void)self;
    if (!PyArg_ParseTuple(args, "iii", &mmap_max, &trim, &top_pad))
        return NULL;
#ifdef __GLIBC__
    /* fixed thresholds (glibc's own grow only after a large block was freed, one at a time) */
    if ((mmap_max < 0 || mallopt(M_MMAP_THRESHOLD, mmap_max)) && (trim < 0 || mallopt(M_TRIM_THRESHOLD, trim)) &&
        (top_pad < 0 || mallopt(M_TOP_PAD, top_pad)))
        Py_RETURN_TRUE;
#else
    (void)mmap_max;
    (void)trim;
    (void)top_pad;
#endif
    Py_RETURN_FALSE;
}

static PyObject *stats(PyObject *self, PyObject *noargs) {
    (void)self;
    (void)noargs;
    return Py_BuildValue("(iKK)", n_kept, reused, mapped);
}

static PyMethodDef methods[] = {
    {"keep", keep, METH_O, "keep(n): up to n freed arenas kept for reuse (0: none; the allocator stays)."},
    {"keep_malloc", keep_malloc, METH_VARARGS,
     "keep_malloc(mmap, trim, top_pad) -> bool: glibc's malloc keeps freed blocks and the heap's top for reuse "
     "(False: not glibc)."},
    {"stats", stats, METH_NOARGS, "stats() -> (arenas kept now, arenas handed out again, arenas mapped)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_arenas", "kwire: freed memory kept for reuse.", -1, methods,
};

PyMODINIT_FUNC PyInit__arenas(void) { return PyModule_Create(&module_def); }
