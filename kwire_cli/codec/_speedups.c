/* kwire_cli.codec._speedups: an optional native decoder for compiled plans.
 *
 * compiler.py describes a plan (message spec at one version) as nested tuples and wraps its
 * generated Python decoder in a `Program` built from that description. Calling the Program with
 * (buf, pos, end) decodes the whole value in C and returns (dict, pos), exactly what the Python
 * decoder returns. It never reports a problem itself: on anything it does not handle, or any
 * input the Python decoder would reject (short input, bad lengths, bad UTF-8, a non-bytes buffer,
 * nesting too deep, ...), it drops what it built and calls the Python decoder, which stays the
 * reference and raises kwire's own errors with their paths and offsets.
 *
 * The value tree is the one the generated code builds: dicts in spec order (tagged fields hold
 * their defaults there until the tag section replaces them), then `_unknown_tags` and
 * `_explicit_tags` when the tag section had some.
 *
 * It also holds `v2_records`, the native twin of kwire_cli/records/decode.py's _v2_records_fast
 * (a record batch's records section -> the list of record dicts); see its own comment below.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

enum {
    K_BOOL = 1, K_INT8, K_INT16, K_UINT16, K_INT32, K_UINT32, K_INT64, K_FLOAT64, K_UUID,
    K_STRING, K_BYTES, K_RECORDS, K_STRUCT, K_ARRAY
};

enum { REC_BYTES = 0, REC_HEX = 1 };

typedef struct TypeOp {
    int kind;
    int nullable;
    int compact;
    int sid;               /* K_STRUCT: index of the struct */
    int inline_elems;      /* K_ARRAY of structs: elements decoded inline (no depth check) */
    Py_ssize_t minsize;    /* K_ARRAY: bytes each element needs at least */
    struct TypeOp *elem;   /* K_ARRAY: the element type (owned) */
} TypeOp;

typedef struct {
    PyObject *key;         /* interned field name */
    int tagged;
    TypeOp type;
    uint32_t tag;
    PyObject *dvalue;      /* tagged: the default (immutable) */
    PyObject *dfactory;    /* tagged: called for a fresh default (lists, structs), or NULL */
    PyObject *tagdef;      /* tagged: bytes of the default's encoding */
} FieldOp;

typedef struct {
    Py_ssize_t nfields;
    FieldOp *fields;
    Py_ssize_t ntagged;
    FieldOp **tagged;
} StructOp;

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    int flexible;
    int max_depth;
    int records_mode;
    Py_ssize_t nstructs;
    StructOp *structs;
    PyObject *fallback;
    PyObject *description;
} ProgramObject;

static int g_enabled = 1;
static PyObject *s_unknown_tags;
static PyObject *s_explicit_tags;

/* ------------------------------------------------------------------------- reading */

typedef struct {
    const unsigned char *b;
    ProgramObject *prog;
} Ctx;

static inline uint16_t be16(const unsigned char *p) { return (uint16_t)((p[0] << 8) | p[1]); }
static inline uint32_t be32(const unsigned char *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}
static inline uint64_t be64(const unsigned char *p) {
    return ((uint64_t)be32(p) << 32) | be32(p + 4);
}

/* An unsigned varint of at most 5 bytes whose value fits 32 bits (primitives.read_uvarint). */
static inline int read_uvarint(const unsigned char *b, Py_ssize_t *pos, Py_ssize_t end, uint64_t *out) {
    Py_ssize_t p = *pos, start = p;
    uint64_t r = 0;
    int shift = 0;
    for (;;) {
        if (p >= end)
            return -1;
        unsigned char c = b[p++];
        r |= (uint64_t)(c & 0x7F) << shift;
        if (c < 0x80) {
            if (r > 0xFFFFFFFFu)
                return -1;
            *pos = p;
            *out = r;
            return 0;
        }
        shift += 7;
        if (p - start >= 5)
            return -1;
    }
}

static const char HEXDIGITS[] = "0123456789abcdef";
static char HEXPAIRS[512];  /* byte -> its two lowercase hex digits */

/* bytes.hex(): lowercase, no separators */
static PyObject *hex_str(const unsigned char *p, Py_ssize_t n) {
    PyObject *s = PyUnicode_New(2 * n, 127);
    if (s == NULL)
        return NULL;
    char *d = (char *)PyUnicode_1BYTE_DATA(s);
    for (Py_ssize_t i = 0; i < n; i++)
        memcpy(d + 2 * i, HEXPAIRS + 2 * p[i], 2);
    return s;
}

static const char B64URL[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/* Kafka's Uuid.toString(): 22 characters of URL-safe base64, no padding. */
static PyObject *uuid_text(const unsigned char *p) {
    PyObject *s = PyUnicode_New(22, 127);
    if (s == NULL)
        return NULL;
    Py_UCS1 *d = PyUnicode_1BYTE_DATA(s);
    int j = 0;
    for (int i = 0; i < 15; i += 3) {
        uint32_t v = ((uint32_t)p[i] << 16) | ((uint32_t)p[i + 1] << 8) | p[i + 2];
        d[j++] = B64URL[(v >> 18) & 63];
        d[j++] = B64URL[(v >> 12) & 63];
        d[j++] = B64URL[(v >> 6) & 63];
        d[j++] = B64URL[v & 63];
    }
    d[j++] = B64URL[p[15] >> 2];
    d[j++] = B64URL[(p[15] & 3) << 4];
    return s;
}

static PyObject *new_dict(Py_ssize_t n) {
#if PY_VERSION_HEX < 0x030D0000
    return _PyDict_NewPresized(n);
#else
    (void)n;
    return PyDict_New();
#endif
}

static PyObject *decode_struct(Ctx *c, int sid, Py_ssize_t *pos, Py_ssize_t end, int depth, int check);

/* Length of a string/bytes/records/array: -1 means null (already known to be allowed);
 * -2 means the Python decoder would reject it. */
static inline int64_t read_len(Ctx *c, const TypeOp *t, Py_ssize_t *pos, Py_ssize_t end, int width) {
    int64_t n;
    if (t->compact) {
        uint64_t u;
        if (read_uvarint(c->b, pos, end, &u) < 0)
            return -2;
        n = (int64_t)u - 1;
        if (n < 0 && !t->nullable)
            return -2;
        return n;
    }
    if (*pos + width > end)
        return -2;
    n = width == 2 ? (int64_t)(int16_t)be16(c->b + *pos) : (int64_t)(int32_t)be32(c->b + *pos);
    *pos += width;
    if (n < 0) {
        if (n == -1 && t->nullable)
            return -1;
        return -2;
    }
    return n;
}

/* One value of type t at *pos; NULL means "let the Python decoder do it" (an exception may be set). */
static PyObject *decode_value(Ctx *c, const TypeOp *t, Py_ssize_t *pos, Py_ssize_t end, int depth) {
    const unsigned char *b = c->b;
    Py_ssize_t p = *pos;
    PyObject *v;
    switch (t->kind) {
    case K_BOOL:
        if (p + 1 > end) return NULL;
        *pos = p + 1;
        return Py_NewRef(b[p] ? Py_True : Py_False);
    case K_INT8:
        if (p + 1 > end) return NULL;
        *pos = p + 1;
        return PyLong_FromLong((int8_t)b[p]);
    case K_INT16:
        if (p + 2 > end) return NULL;
        *pos = p + 2;
        return PyLong_FromLong((int16_t)be16(b + p));
    case K_UINT16:
        if (p + 2 > end) return NULL;
        *pos = p + 2;
        return PyLong_FromLong(be16(b + p));
    case K_INT32:
        if (p + 4 > end) return NULL;
        *pos = p + 4;
        return PyLong_FromLong((int32_t)be32(b + p));
    case K_UINT32:
        if (p + 4 > end) return NULL;
        *pos = p + 4;
        return PyLong_FromUnsignedLong(be32(b + p));
    case K_INT64:
        if (p + 8 > end) return NULL;
        *pos = p + 8;
        return PyLong_FromLongLong((long long)(int64_t)be64(b + p));
    case K_FLOAT64: {
        if (p + 8 > end) return NULL;
#if PY_VERSION_HEX >= 0x030B0000
        double x = PyFloat_Unpack8((const char *)(b + p), 0);
#else
        double x = _PyFloat_Unpack8(b + p, 0);
#endif
        if (x == -1.0 && PyErr_Occurred()) return NULL;
        *pos = p + 8;
        return PyFloat_FromDouble(x);
    }
    case K_UUID:
        if (p + 16 > end) return NULL;
        *pos = p + 16;
        return uuid_text(b + p);
    case K_STRING:
    case K_BYTES:
    case K_RECORDS: {
        int64_t n = read_len(c, t, &p, end, t->kind == K_STRING ? 2 : 4);
        if (n == -2) return NULL;
        if (n == -1) {
            *pos = p;
            Py_RETURN_NONE;
        }
        if (n > end - p) return NULL;
        if (t->kind == K_STRING)
            v = PyUnicode_DecodeUTF8((const char *)(b + p), (Py_ssize_t)n, NULL);
        else if (t->kind == K_RECORDS && c->prog->records_mode == REC_BYTES)
            v = PyBytes_FromStringAndSize((const char *)(b + p), (Py_ssize_t)n);
        else
            v = hex_str(b + p, (Py_ssize_t)n);
        if (v != NULL)
            *pos = p + (Py_ssize_t)n;
        return v;
    }
    case K_STRUCT:
        if (t->nullable) {
            if (p >= end) return NULL;
            *pos = p + 1;
            if (b[p] >= 128)
                Py_RETURN_NONE;
        }
        return decode_struct(c, t->sid, pos, end, depth + 1, 1);
    case K_ARRAY: {
        int64_t cnt = read_len(c, t, &p, end, 4);
        if (cnt == -2) return NULL;
        if (cnt == -1) {
            *pos = p;
            Py_RETURN_NONE;
        }
        if (cnt * t->minsize > end - p) return NULL;
        PyObject *list = PyList_New((Py_ssize_t)cnt);
        if (list == NULL) return NULL;
        const TypeOp *el = t->elem;
        for (Py_ssize_t i = 0; i < (Py_ssize_t)cnt; i++) {
            PyObject *x;
            if (el->kind == K_STRUCT && t->inline_elems)
                x = decode_struct(c, el->sid, &p, end, depth, 0);
            else
                x = decode_value(c, el, &p, end, depth);
            if (x == NULL) {
                Py_DECREF(list);
                return NULL;
            }
            PyList_SET_ITEM(list, i, x);
        }
        *pos = p;
        return list;
    }
    default:
        return NULL;
    }
}

static PyObject *decode_struct(Ctx *c, int sid, Py_ssize_t *pos, Py_ssize_t end, int depth, int check) {
    ProgramObject *prog = c->prog;
    if (check && sid != 0 && depth > prog->max_depth)
        return NULL;
    const StructOp *s = &prog->structs[sid];
    PyObject *d = new_dict(s->nfields);
    if (d == NULL)
        return NULL;
    Py_ssize_t p = *pos;
    for (Py_ssize_t i = 0; i < s->nfields; i++) {
        const FieldOp *f = &s->fields[i];
        PyObject *v;
        if (!f->tagged)
            v = decode_value(c, &f->type, &p, end, depth);
        else if (f->dfactory == NULL)
            v = Py_NewRef(f->dvalue);
        else if (f->dfactory == (PyObject *)&PyList_Type)
            v = PyList_New(0);
        else
            v = PyObject_CallNoArgs(f->dfactory);
        if (v == NULL) goto fail;
        int r = PyDict_SetItem(d, f->key, v);
        Py_DECREF(v);
        if (r < 0) goto fail;
    }
    if (prog->flexible) {
        uint64_t nt;
        if (read_uvarint(c->b, &p, end, &nt) < 0) goto fail;
        if (nt) {
            PyObject *unk = NULL, *expl = NULL;
            if ((int64_t)nt * 2 > end - p) goto fail;
            for (uint64_t k = 0; k < nt; k++) {
                uint64_t tag, sz;
                if (read_uvarint(c->b, &p, end, &tag) < 0) goto tagfail;
                if (read_uvarint(c->b, &p, end, &sz) < 0) goto tagfail;
                Py_ssize_t e2 = p + (Py_ssize_t)sz;
                if (e2 > end) goto tagfail;
                const FieldOp *f = NULL;
                for (Py_ssize_t j = 0; j < s->ntagged; j++) {
                    if (s->tagged[j]->tag == tag) {
                        f = s->tagged[j];
                        break;
                    }
                }
                if (f != NULL) {
                    Py_ssize_t start = p;
                    PyObject *v = decode_value(c, &f->type, &p, e2, depth);
                    if (v == NULL) goto tagfail;
                    if (p != e2) {
                        Py_DECREF(v);
                        goto tagfail;
                    }
                    int r = PyDict_SetItem(d, f->key, v);
                    Py_DECREF(v);
                    if (r < 0) goto tagfail;
                    if (PyBytes_GET_SIZE(f->tagdef) == e2 - start
                            && memcmp(PyBytes_AS_STRING(f->tagdef), c->b + start, (size_t)(e2 - start)) == 0) {
                        if (expl == NULL && (expl = PyList_New(0)) == NULL) goto tagfail;
                        PyObject *t = PyLong_FromUnsignedLong((unsigned long)tag);
                        if (t == NULL) goto tagfail;
                        r = PyList_Append(expl, t);
                        Py_DECREF(t);
                        if (r < 0) goto tagfail;
                    }
                } else {
                    if (unk == NULL && (unk = PyDict_New()) == NULL) goto tagfail;
                    PyObject *key = PyUnicode_FromFormat("%lu", (unsigned long)tag);
                    if (key == NULL) goto tagfail;
                    PyObject *h = hex_str(c->b + p, (Py_ssize_t)sz);
                    if (h == NULL) {
                        Py_DECREF(key);
                        goto tagfail;
                    }
                    int r = PyDict_SetItem(unk, key, h);
                    Py_DECREF(key);
                    Py_DECREF(h);
                    if (r < 0) goto tagfail;
                    p = e2;
                }
            }
            if (unk != NULL && PyDict_SetItem(d, s_unknown_tags, unk) < 0) goto tagfail;
            if (expl != NULL && PyDict_SetItem(d, s_explicit_tags, expl) < 0) goto tagfail;
            Py_XDECREF(unk);
            Py_XDECREF(expl);
            goto done;
        tagfail:
            Py_XDECREF(unk);
            Py_XDECREF(expl);
            goto fail;
        }
    }
done:
    *pos = p;
    return d;
fail:
    Py_DECREF(d);
    return NULL;
}

/* ------------------------------------------------------------------------- the Program type */

static void free_type(TypeOp *t) {
    if (t->elem != NULL) {
        free_type(t->elem);
        PyMem_Free(t->elem);
        t->elem = NULL;
    }
}

static void program_free_structs(ProgramObject *self) {
    if (self->structs == NULL)
        return;
    for (Py_ssize_t i = 0; i < self->nstructs; i++) {
        StructOp *s = &self->structs[i];
        for (Py_ssize_t j = 0; j < s->nfields; j++) {
            FieldOp *f = &s->fields[j];
            Py_XDECREF(f->key);
            Py_XDECREF(f->dvalue);
            Py_XDECREF(f->dfactory);
            Py_XDECREF(f->tagdef);
            free_type(&f->type);
        }
        PyMem_Free(s->fields);
        PyMem_Free(s->tagged);
    }
    PyMem_Free(self->structs);
    self->structs = NULL;
}

static int parse_type(PyObject *desc, TypeOp *t, Py_ssize_t nstructs, int level) {
    /* (kind, nullable, compact, sid, minsize, element or None, inline) */
    int kind, nullable, compact, sid, inl;
    Py_ssize_t minsize;
    PyObject *elem;
    if (level > 8) {
        PyErr_SetString(PyExc_ValueError, "type nested too deep");
        return -1;
    }
    if (!PyArg_ParseTuple(desc, "ipiinOp;type description", &kind, &nullable, &compact, &sid, &minsize,
                          &elem, &inl))
        return -1;
    t->kind = kind;
    t->nullable = nullable;
    t->compact = compact;
    t->sid = sid;
    t->minsize = minsize;
    t->inline_elems = inl;
    t->elem = NULL;
    if (kind < K_BOOL || kind > K_ARRAY) {
        PyErr_Format(PyExc_ValueError, "unknown kind %d", kind);
        return -1;
    }
    if (kind == K_STRUCT && (sid < 0 || sid >= nstructs)) {
        PyErr_Format(PyExc_ValueError, "struct index %d out of range", sid);
        return -1;
    }
    if (kind == K_ARRAY) {
        if (minsize < 1) {
            PyErr_SetString(PyExc_ValueError, "array element size must be at least 1");
            return -1;
        }
        t->elem = PyMem_Calloc(1, sizeof(TypeOp));
        if (t->elem == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        if (parse_type(elem, t->elem, nstructs, level + 1) < 0)
            return -1;
        if (t->elem->kind == K_ARRAY || t->elem->nullable) {
            PyErr_SetString(PyExc_ValueError, "unsupported array element");
            return -1;
        }
    }
    return 0;
}

static int parse_struct(PyObject *desc, StructOp *s, Py_ssize_t nstructs) {
    /* tuple of (key, type, tagged, tag, default value, default factory or None, tagdef bytes or None) */
    if (!PyTuple_Check(desc)) {
        PyErr_SetString(PyExc_TypeError, "a struct description is a tuple of fields");
        return -1;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(desc);
    s->fields = PyMem_Calloc(n ? n : 1, sizeof(FieldOp));
    s->tagged = PyMem_Calloc(n ? n : 1, sizeof(FieldOp *));
    if (s->fields == NULL || s->tagged == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    s->nfields = n;
    s->ntagged = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        FieldOp *f = &s->fields[i];
        PyObject *key, *type, *dvalue, *dfactory, *tagdef;
        int tagged;
        unsigned long tag;
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(desc, i), "UOpkOOO;field description", &key, &type, &tagged,
                              &tag, &dvalue, &dfactory, &tagdef))
            return -1;
        Py_INCREF(key);
        PyUnicode_InternInPlace(&key);
        f->key = key;
        f->tagged = tagged;
        f->tag = (uint32_t)tag;
        if (parse_type(type, &f->type, nstructs, 0) < 0)
            return -1;
        if (tagged) {
            if (!PyBytes_Check(tagdef)) {
                PyErr_SetString(PyExc_TypeError, "a tagged field needs its default's bytes");
                return -1;
            }
            f->dvalue = Py_NewRef(dvalue);
            f->dfactory = dfactory == Py_None ? NULL : Py_NewRef(dfactory);
            f->tagdef = Py_NewRef(tagdef);
            s->tagged[s->ntagged++] = f;
        }
    }
    return 0;
}

static PyObject *program_vectorcall(PyObject *obj, PyObject *const *args, size_t nargsf, PyObject *kwnames);

static PyObject *program_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"description", "fallback", NULL};
    PyObject *desc, *fallback;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO:Program", kwlist, &desc, &fallback))
        return NULL;
    int flexible, max_depth, records_mode;
    PyObject *structs;
    if (!PyArg_ParseTuple(desc, "piiO!;program description", &flexible, &max_depth, &records_mode,
                          &PyTuple_Type, &structs))
        return NULL;
    if (records_mode != REC_BYTES && records_mode != REC_HEX) {
        PyErr_SetString(PyExc_ValueError, "records mode must be 0 (bytes) or 1 (hex)");
        return NULL;
    }
    if (!PyCallable_Check(fallback)) {
        PyErr_SetString(PyExc_TypeError, "fallback must be callable");
        return NULL;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(structs);
    if (n < 1) {
        PyErr_SetString(PyExc_ValueError, "a program needs at least one struct");
        return NULL;
    }
    ProgramObject *self = (ProgramObject *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->vectorcall = program_vectorcall;
    self->flexible = flexible;
    self->max_depth = max_depth;
    self->records_mode = records_mode;
    self->fallback = Py_NewRef(fallback);
    self->description = Py_NewRef(desc);
    self->structs = PyMem_Calloc(n, sizeof(StructOp));
    if (self->structs == NULL) {
        Py_DECREF(self);
        return PyErr_NoMemory();
    }
    self->nstructs = n;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (parse_struct(PyTuple_GET_ITEM(structs, i), &self->structs[i], n) < 0) {
            Py_DECREF(self);
            return NULL;
        }
    }
    return (PyObject *)self;
}

static void program_dealloc(ProgramObject *self) {
    program_free_structs(self);
    Py_XDECREF(self->fallback);
    Py_XDECREF(self->description);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *program_vectorcall(PyObject *obj, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    ProgramObject *self = (ProgramObject *)obj;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (!g_enabled || kwnames != NULL || nargs != 3 || !PyBytes_CheckExact(args[0])
            || !PyLong_CheckExact(args[1]) || !PyLong_CheckExact(args[2]))
        goto fallback;
    {
        Py_ssize_t pos = PyLong_AsSsize_t(args[1]);
        Py_ssize_t end = PyLong_AsSsize_t(args[2]);
        if ((pos == -1 || end == -1) && PyErr_Occurred()) {
            PyErr_Clear();
            goto fallback;
        }
        if (pos < 0 || end < pos || end > PyBytes_GET_SIZE(args[0]))
            goto fallback;
        Ctx c = {(const unsigned char *)PyBytes_AS_STRING(args[0]), self};
        PyObject *d = decode_struct(&c, 0, &pos, end, 0, 0);
        if (d == NULL) {
            if (PyErr_Occurred()) {
                if (!PyErr_ExceptionMatches(PyExc_Exception))
                    return NULL;  /* KeyboardInterrupt and the like go through */
                PyErr_Clear();
            }
            goto fallback;
        }
        PyObject *p = PyLong_FromSsize_t(pos);
        if (p == NULL) {
            Py_DECREF(d);
            return NULL;
        }
        PyObject *r = PyTuple_New(2);
        if (r == NULL) {
            Py_DECREF(d);
            Py_DECREF(p);
            return NULL;
        }
        PyTuple_SET_ITEM(r, 0, d);
        PyTuple_SET_ITEM(r, 1, p);
        return r;
    }
fallback:
    return PyObject_Vectorcall(self->fallback, args, nargsf, kwnames);
}

static PyObject *program_get_fallback(ProgramObject *self, void *closure) {
    return Py_NewRef(self->fallback);
}

static PyObject *program_get_description(ProgramObject *self, void *closure) {
    return Py_NewRef(self->description);
}

static PyGetSetDef program_getset[] = {
    {"fallback", (getter)program_get_fallback, NULL, "the generated Python decoder", NULL},
    {"description", (getter)program_get_description, NULL, "what the Program was built from", NULL},
    {NULL},
};

static PyTypeObject ProgramType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "kwire_cli.codec._speedups.Program",
    .tp_basicsize = sizeof(ProgramObject),
    .tp_dealloc = (destructor)program_dealloc,
    .tp_vectorcall_offset = offsetof(ProgramObject, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "Program(description, fallback): call with (buf, pos, end) -> (dict, pos)",
    .tp_new = program_new,
    .tp_getset = program_getset,
};

/* ------------------------------------------------------------------------- records (batch v2) */

/* v2_records(rb, count, base_offset, base_ts, room, show_bytes, header_key): the native twin of
 * kwire_cli/records/decode.py's _v2_records_fast, the fast path of a record batch's records
 * section (rb: exactly that section, as bytes). Same contract, same result:
 *
 *   - the list of record dicts, built exactly as the Python function builds them (keys in the
 *     same order, {"text": s} for an all-printable-ASCII key/value (tab, CR, LF allowed), anything
 *     else through the Python show_bytes / header_key callables passed in);
 *   - None whenever the Python function returns None (a read past rb, a varint too long, a
 *     negative length or header count, a record whose fields do not end where its length says,
 *     the last record not ending at the end of rb, more headers than `room`);
 *   - NotImplemented for what it leaves to the Python function: the native decoders turned off
 *     (set_enabled(False)), arguments that are not bytes / int64s, a TimestampDelta varlong or a
 *     Timestamp / Offset sum outside int64. The caller then runs _v2_records_fast itself.
 *
 * Every read is checked against the end of rb. Positions only move forward (lengths are -1 or
 * >= 0), and one past the end of rb can never give a result in the Python function (it ends with
 * an IndexError or with "p != len(rb)"), so a length that runs past the end is None here at once.
 */

enum { RB_OK = 0, RB_BAD, RB_DEFER };

static PyObject *s_Length, *s_Attributes, *s_TimestampDelta, *s_Timestamp, *s_OffsetDelta, *s_Offset,
    *s_Key, *s_Value, *s_Headers, *s_text;
static unsigned char PLAIN[256];  /* 1: the byte stands for itself in the text form (_PLAIN) */

/* Zig-zag varint of at most `limit` bytes at *pos, as _varint_slow(buf, pos, 0, limit). */
static inline int rb_varint(const unsigned char *b, Py_ssize_t n, Py_ssize_t *pos, int limit, int64_t *out) {
    Py_ssize_t p = *pos;
    if (p >= n)
        return RB_BAD;
    unsigned int c = b[p];
    if (c < 0x80) {
        *out = (int64_t)(c >> 1) ^ -(int64_t)(c & 1);
        *pos = p + 1;
        return RB_OK;
    }
    uint64_t r = c & 0x7F;
    int shift = 7;
    p++;
    for (int i = 1;; i++) {
        if (p >= n)
            return RB_BAD;
        c = b[p++];
        if (c >= 0x80 && i == limit - 1)
            return RB_BAD;                     /* "varint longer than N bytes" */
        if (shift == 63 && (c & 0x7F) > 1)
            return RB_DEFER;                   /* a varlong past 64 bits: Python ints */
        r |= (uint64_t)(c & 0x7F) << shift;
        if (c < 0x80)
            break;
        shift += 7;
    }
    *out = (int64_t)(r >> 1) ^ -(int64_t)(r & 1);
    *pos = p;
    return RB_OK;
}

/* All of s[0:n] printable ASCII, tab, CR or LF. */
static inline int rb_plain(const unsigned char *s, Py_ssize_t n) {
    Py_ssize_t i = 0;
    /* eight bytes at a time: no byte >= 0x7f and none < 0x20; else a byte-wise look */
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, s + i, 8);
        uint64_t hi = w & 0x8080808080808080ULL;
        uint64_t lo = (w - 0x2020202020202020ULL) & ~w & 0x8080808080808080ULL;
        uint64_t x = w ^ 0x7F7F7F7F7F7F7F7FULL;
        uint64_t del = (x - 0x0101010101010101ULL) & ~x & 0x8080808080808080ULL;
        if (hi | lo | del) {
            for (int j = 0; j < 8; j++)
                if (!PLAIN[s[i + j]])
                    return 0;
        }
    }
    for (; i < n; i++)
        if (!PLAIN[s[i]])
            return 0;
    return 1;
}

static inline PyObject *rb_ascii(const unsigned char *s, Py_ssize_t n) {
    PyObject *t = PyUnicode_New(n, 127);
    if (t != NULL && n)
        memcpy(PyUnicode_1BYTE_DATA(t), s, (size_t)n);
    return t;
}

/* A key/value's form: {"text": s} when plain, else show_bytes(bytes). */
static PyObject *rb_form(const unsigned char *s, Py_ssize_t n, PyObject *show) {
    if (rb_plain(s, n)) {
        PyObject *t = rb_ascii(s, n);
        if (t == NULL)
            return NULL;
        PyObject *d = new_dict(1);
        if (d == NULL || PyDict_SetItem(d, s_text, t) < 0) {
            Py_XDECREF(d);
            Py_DECREF(t);
            return NULL;
        }
        Py_DECREF(t);
        return d;
    }
    PyObject *raw = PyBytes_FromStringAndSize((const char *)s, n);
    if (raw == NULL)
        return NULL;
    PyObject *r = PyObject_CallOneArg(show, raw);
    Py_DECREF(raw);
    return r;
}

/* A header key: the str when plain, else header_key(bytes). */
static PyObject *rb_hkey(const unsigned char *s, Py_ssize_t n, PyObject *header_key) {
    if (rb_plain(s, n))
        return rb_ascii(s, n);
    PyObject *raw = PyBytes_FromStringAndSize((const char *)s, n);
    if (raw == NULL)
        return NULL;
    PyObject *r = PyObject_CallOneArg(header_key, raw);
    Py_DECREF(raw);
    return r;
}

/* A key or value (length varint, then bytes) at *pos into *out (a new reference, or None for
 * length -1). */
static int rb_field(const unsigned char *b, Py_ssize_t n, Py_ssize_t *pos, PyObject *show, PyObject **out) {
    int64_t len;
    int r = rb_varint(b, n, pos, 5, &len);
    if (r != RB_OK)
        return r;
    if (len == -1) {
        *out = Py_NewRef(Py_None);
        return RB_OK;
    }
    if (len < 0 || len > n - *pos)
        return RB_BAD;
    *out = rb_form(b + *pos, (Py_ssize_t)len, show);
    if (*out == NULL)
        return -1;
    *pos += (Py_ssize_t)len;
    return RB_OK;
}

static inline int rb_set(PyObject *d, PyObject *key, PyObject *v) {
    /* steals v */
    if (v == NULL)
        return -1;
    int r = PyDict_SetItem(d, key, v);
    Py_DECREF(v);
    return r;
}

/* The headers from the header count at *pos on into *out (a new list). `room` is what the
 * frame's item budget leaves. */
static int rb_headers(const unsigned char *b, Py_ssize_t n, Py_ssize_t *pos, int64_t *room, PyObject *show,
                      PyObject *header_key, PyObject **out) {
    int64_t hc;
    int r = rb_varint(b, n, pos, 5, &hc);
    if (r != RB_OK)
        return r;
    if (hc < 0 || hc > *room)
        return RB_BAD;
    *room -= hc;
    if (hc > (n - *pos) / 2)  /* each header takes two bytes at least: it would run past rb */
        return RB_BAD;
    PyObject *list = PyList_New((Py_ssize_t)hc);
    if (list == NULL)
        return -1;
    Py_ssize_t p = *pos;
    for (Py_ssize_t h = 0; h < (Py_ssize_t)hc; h++) {
        int64_t len;
        if ((r = rb_varint(b, n, &p, 5, &len)) != RB_OK)
            goto fail;
        if (len < 0 || len > n - p) {
            r = RB_BAD;
            goto fail;
        }
        PyObject *hk = rb_hkey(b + p, (Py_ssize_t)len, header_key);
        if (hk == NULL) {
            r = -1;
            goto fail;
        }
        p += (Py_ssize_t)len;
        PyObject *hv = NULL;
        if ((r = rb_field(b, n, &p, show, &hv)) != RB_OK) {
            Py_DECREF(hk);
            goto fail;
        }
        PyObject *d = new_dict(2);
        if (d == NULL) {
            Py_DECREF(hk);
            Py_DECREF(hv);
            r = -1;
            goto fail;
        }
        PyList_SET_ITEM(list, h, d);
        if (rb_set(d, s_Key, hk) < 0) {
            Py_DECREF(hv);
            r = -1;
            goto fail;
        }
        if (rb_set(d, s_Value, hv) < 0) {
            r = -1;
            goto fail;
        }
    }
    *pos = p;
    *out = list;
    return RB_OK;
fail:
    Py_DECREF(list);  /* items not yet set are NULL, which list_dealloc skips */
    return r;
}

/* a + b, or -1 when that is outside int64 */
static inline int rb_add(int64_t a, int64_t b, int64_t *out) {
    if ((b > 0 && a > INT64_MAX - b) || (b < 0 && a < INT64_MIN - b))
        return -1;
    *out = a + b;
    return 0;
}

static int rb_int64(PyObject *o, int64_t *out) {
    if (!PyLong_Check(o))
        return -1;
    int overflow;
    long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (v == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        return -1;
    }
    if (overflow)
        return overflow;  /* 1 or -1 with *out untouched */
    *out = (int64_t)v;
    return 0;
}

static PyObject *v2_records(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError,
                         "v2_records(rb, count, base_offset, base_ts, room, show_bytes, header_key)");
        return NULL;
    }
    PyObject *rbo = args[0], *show = args[5], *header_key = args[6];
    int64_t count, base_offset, base_ts, room;
    if (!g_enabled || !PyBytes_CheckExact(rbo) || rb_int64(args[1], &count) != 0
            || rb_int64(args[2], &base_offset) != 0 || rb_int64(args[3], &base_ts) != 0)
        Py_RETURN_NOTIMPLEMENTED;
    int ro = rb_int64(args[4], &room);
    if (ro == 1)
        room = INT64_MAX;    /* more than any rb can use up */
    else if (ro != 0)
        Py_RETURN_NOTIMPLEMENTED;
    if (room < 0)
        Py_RETURN_NONE;      /* the Python function ends with "room < 0": None */
    const unsigned char *b = (const unsigned char *)PyBytes_AS_STRING(rbo);
    Py_ssize_t n = PyBytes_GET_SIZE(rbo);
    if (count < 0)
        count = 0;           /* range(count) */
    if (count > n / 7)       /* a record takes seven bytes at least */
        Py_RETURN_NONE;
    PyObject *recs = PyList_New((Py_ssize_t)count);
    if (recs == NULL)
        return NULL;
    Py_ssize_t p = 0;
    int r = RB_OK;
    for (Py_ssize_t i = 0; i < (Py_ssize_t)count; i++) {
        int64_t ln, tsd, od, ts, off;
        PyObject *key = NULL, *value = NULL, *headers = NULL;
        if ((r = rb_varint(b, n, &p, 5, &ln)) != RB_OK)
            goto out;
        int64_t rec_end = (int64_t)p + ln;
        if (p >= n) {
            r = RB_BAD;
            goto out;
        }
        int rattr = (int8_t)b[p++];
        if ((r = rb_varint(b, n, &p, 10, &tsd)) != RB_OK)
            goto out;
        if ((r = rb_varint(b, n, &p, 5, &od)) != RB_OK)
            goto out;
        if ((r = rb_field(b, n, &p, show, &key)) != RB_OK)
            goto out;
        if ((r = rb_field(b, n, &p, show, &value)) != RB_OK)
            goto rec_fail;
        if (p < n && b[p] == 0) {
            p++;
            headers = PyList_New(0);
            if (headers == NULL) {
                r = -1;
                goto rec_fail;
            }
        } else if ((r = rb_headers(b, n, &p, &room, show, header_key, &headers)) != RB_OK)
            goto rec_fail;
        if ((int64_t)p != rec_end) {
            r = RB_BAD;
            goto rec_fail;
        }
        if (rb_add(base_ts, tsd, &ts) < 0 || rb_add(base_offset, od, &off) < 0) {
            r = RB_DEFER;
            goto rec_fail;
        }
        PyObject *d = new_dict(9);
        if (d == NULL) {
            r = -1;
            goto rec_fail;
        }
        PyList_SET_ITEM(recs, i, d);
        if (rb_set(d, s_Length, PyLong_FromLongLong(ln)) < 0
                || rb_set(d, s_Attributes, PyLong_FromLong(rattr)) < 0
                || rb_set(d, s_TimestampDelta, PyLong_FromLongLong(tsd)) < 0
                || rb_set(d, s_Timestamp, PyLong_FromLongLong(ts)) < 0
                || rb_set(d, s_OffsetDelta, PyLong_FromLongLong(od)) < 0
                || rb_set(d, s_Offset, PyLong_FromLongLong(off)) < 0) {
            r = -1;
            goto rec_fail;
        }
        /* rb_set steals: hand key, value, headers over one by one */
        PyObject *k = key, *v = value, *h = headers;
        key = value = headers = NULL;
        if (rb_set(d, s_Key, k) < 0) {
            Py_DECREF(v);
            Py_DECREF(h);
            r = -1;
            goto out;
        }
        if (rb_set(d, s_Value, v) < 0) {
            Py_DECREF(h);
            r = -1;
            goto out;
        }
        if (rb_set(d, s_Headers, h) < 0) {
            r = -1;
            goto out;
        }
        continue;
    rec_fail:
        Py_XDECREF(key);
        Py_XDECREF(value);
        Py_XDECREF(headers);
        goto out;
    }
    if (p != n)
        r = RB_BAD;
out:
    if (r == RB_OK)
        return recs;
    Py_DECREF(recs);  /* records not yet set are NULL, which list_dealloc skips */
    if (r == RB_BAD)
        Py_RETURN_NONE;
    if (r == RB_DEFER)
        Py_RETURN_NOTIMPLEMENTED;
    return NULL;      /* an exception is set (no memory, or one raised by show_bytes / header_key) */
}

/* ------------------------------------------------------------------------- module */

static PyObject *set_enabled(PyObject *mod, PyObject *arg) {
    int v = PyObject_IsTrue(arg);
    if (v < 0)
        return NULL;
    int old = g_enabled;
    g_enabled = v;
    return PyBool_FromLong(old);
}

static PyObject *is_enabled(PyObject *mod, PyObject *unused) {
    return PyBool_FromLong(g_enabled);
}

static PyMethodDef module_methods[] = {
    {"set_enabled", set_enabled, METH_O,
     "set_enabled(flag) -> previous flag: when false, every Program calls its Python fallback."},
    {"is_enabled", is_enabled, METH_NOARGS, "is_enabled() -> bool"},
    {"v2_records", (PyCFunction)(void (*)(void))v2_records, METH_FASTCALL,
     "v2_records(rb, count, base_offset, base_ts, room, show_bytes, header_key) -> list, None or "
     "NotImplemented: records/decode.py's _v2_records_fast in C (NotImplemented: run that instead)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_speedups",
    "Optional native decoder for kwire's compiled plans (see compiler.py).", -1, module_methods,
};

PyMODINIT_FUNC PyInit__speedups(void) {
    for (int i = 0; i < 256; i++) {
        HEXPAIRS[2 * i] = HEXDIGITS[i >> 4];
        HEXPAIRS[2 * i + 1] = HEXDIGITS[i & 15];
    }
    if (PyType_Ready(&ProgramType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module_def);
    if (m == NULL)
        return NULL;
    s_unknown_tags = PyUnicode_InternFromString("_unknown_tags");
    s_explicit_tags = PyUnicode_InternFromString("_explicit_tags");
    for (int i = 0; i < 256; i++)
        PLAIN[i] = (i >= 32 && i < 127) || i == 9 || i == 10 || i == 13;
    s_Length = PyUnicode_InternFromString("Length");
    s_Attributes = PyUnicode_InternFromString("Attributes");
    s_TimestampDelta = PyUnicode_InternFromString("TimestampDelta");
    s_Timestamp = PyUnicode_InternFromString("Timestamp");
    s_OffsetDelta = PyUnicode_InternFromString("OffsetDelta");
    s_Offset = PyUnicode_InternFromString("Offset");
    s_Key = PyUnicode_InternFromString("Key");
    s_Value = PyUnicode_InternFromString("Value");
    s_Headers = PyUnicode_InternFromString("Headers");
    s_text = PyUnicode_InternFromString("text");
    if (s_unknown_tags == NULL || s_explicit_tags == NULL || s_Length == NULL || s_Attributes == NULL
            || s_TimestampDelta == NULL || s_Timestamp == NULL || s_OffsetDelta == NULL || s_Offset == NULL
            || s_Key == NULL || s_Value == NULL || s_Headers == NULL || s_text == NULL) {
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(&ProgramType);
    if (PyModule_AddObject(m, "Program", (PyObject *)&ProgramType) < 0) {
        Py_DECREF(&ProgramType);
        Py_DECREF(m);
        return NULL;
    }
    PyModule_AddIntConstant(m, "ABI_VERSION", 1);
    return m;
}
