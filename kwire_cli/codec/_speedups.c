/* kwire_cli.codec._speedups: an optional native decoder for compiled plans (a plan interpreter).
 *
 * codec/native.py describes a plan (message spec at one version) as nested tuples and wraps its
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
 * The records fast path (record batches' records -> dicts) is kwire_cli/records/_native.c.
 */
#include "../native_common.h"
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <structmember.h>

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
    PyObject *layout;      /* a dict of the fields' keys in order (values None): each decoded dict
                            * starts as a copy of its key table (see "dicts" below), or NULL */
    size_t keys_size;      /* bytes of that key table, and how many of them to copy */
    size_t keys_copy;
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

static PyObject *s_unknown_tags;

#if PY_VERSION_HEX >= 0x030A0000
#define KW_GC_PAUSE() PyGC_Disable()
#define KW_GC_RESUME(was_on) do { if (was_on) PyGC_Enable(); } while (0)
#else
#define KW_GC_PAUSE() 0
#define KW_GC_RESUME(was_on) ((void)(was_on))
#endif
static PyObject *s_explicit_tags;

/* ------------------------------------------------------------------------- dicts
 *
 * A decoded struct is a dict of its fields in spec order. Inserting n keys one by one costs n
 * lookups and n insertions; on CPython 3.11 and 3.12 the decoder instead copies the key table of
 * a dict that already holds the same keys in the same order (the struct's `layout`, built with
 * PyDict_SetItem at Program creation, so CPython laid it out) and stores the values in place: the
 * same dict, byte for byte, that the insertions would give. The layout of a key table is
 * CPython's private business, so this runs only on the versions whose layout is mirrored below,
 * and only after kw_dicts_check() found a dict made by CPython laid out as expected; anywhere
 * else each key is inserted with PyDict_SetItem. */

#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030D0000 && !defined(Py_REF_DEBUG) \
    && !defined(Py_GIL_DISABLED)
#define KW_FAST_DICTS 1
typedef struct {           /* CPython 3.11/3.12's struct _dictkeysobject (Include/internal/pycore_dict.h) */
    Py_ssize_t dk_refcnt;
    uint8_t dk_log2_size;
    uint8_t dk_log2_index_bytes;
    uint8_t dk_kind;
    uint32_t dk_version;
    Py_ssize_t dk_usable;
    Py_ssize_t dk_nentries;
    char dk_indices[];
} KwKeys;
typedef struct {           /* PyDictUnicodeEntry */
    PyObject *me_key;
    PyObject *me_value;
} KwEntry;
#define KW_KEYS_UNICODE 1  /* DICT_KEYS_UNICODE: every key an exact str, no hashes stored */
#define KW_KEYS(d) ((KwKeys *)((PyDictObject *)(d))->ma_keys)
#define KW_ENTRIES(k) ((KwEntry *)((k)->dk_indices + ((size_t)1 << (k)->dk_log2_index_bytes)))
#define KW_USABLE(k) ((((size_t)1 << (k)->dk_log2_size) << 1) / 3)
#endif
#define KW_FAST_FIELDS 64  /* structs with more fields insert their keys */

static int g_fast_dicts = 0;  /* kw_dicts_check() passed */

/* The layout dict of a struct's keys, and the sizes of its key table; 0 when the struct's dicts
 * are built by insertion. */
static int struct_layout(StructOp *s) {
#ifdef KW_FAST_DICTS
    if (!g_fast_dicts || s->nfields == 0 || s->nfields > KW_FAST_FIELDS)
        return 0;
    PyObject *d = PyDict_New();
    if (d == NULL)
        return -1;
    for (Py_ssize_t i = 0; i < s->nfields; i++) {
        if (PyDict_SetItem(d, s->fields[i].key, Py_None) < 0) {
            Py_DECREF(d);
            return -1;
        }
    }
    KwKeys *k = KW_KEYS(d);
    if (((PyDictObject *)d)->ma_values != NULL || k->dk_kind != KW_KEYS_UNICODE || k->dk_nentries != s->nfields
            || PyDict_GET_SIZE(d) != s->nfields) {
        Py_DECREF(d);  /* a repeated key, or not the layout mirrored here: insert instead */
        return 0;
    }
    s->layout = d;
    s->keys_size = sizeof(KwKeys) + ((size_t)1 << k->dk_log2_index_bytes) + sizeof(KwEntry) * KW_USABLE(k);
    s->keys_copy = sizeof(KwKeys) + ((size_t)1 << k->dk_log2_index_bytes) + sizeof(KwEntry) * (size_t)s->nfields;
#else
    (void)s;
#endif
    return 0;
}

/* The dict of a struct whose values are vals[0..n) (references stolen, also on failure). */
static PyObject *struct_dict(const StructOp *s, PyObject **vals) {
    Py_ssize_t n = s->nfields;
#ifdef KW_FAST_DICTS
    if (s->layout != NULL) {
        PyObject *d = PyDict_New();
        KwKeys *k = d == NULL ? NULL : (KwKeys *)PyObject_Malloc(s->keys_size);
        if (k == NULL) {
            Py_XDECREF(d);
            for (Py_ssize_t i = 0; i < n; i++)
                Py_DECREF(vals[i]);
            return d == NULL ? NULL : PyErr_NoMemory();
        }
        memcpy(k, KW_KEYS(s->layout), s->keys_copy);
        memset((char *)k + s->keys_copy, 0, s->keys_size - s->keys_copy);
        k->dk_refcnt = 1;
        k->dk_version = 0;
        KwEntry *e = KW_ENTRIES(k);
        int track = 0;
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *v = vals[i];
            Py_INCREF(e[i].me_key);
            e[i].me_value = v;
            /* what insertdict does: a dict holding a value that may be tracked is tracked */
            if (!track && PyObject_IS_GC(v) && (!PyTuple_CheckExact(v) || PyObject_GC_IsTracked(v)))
                track = 1;
        }
        KwKeys *empty = KW_KEYS(d);  /* PyDict_New's shared empty table: give back its reference */
#if PY_VERSION_HEX >= 0x030C0000
        if (empty->dk_refcnt != (Py_ssize_t)_Py_IMMORTAL_REFCNT)
#endif
            empty->dk_refcnt--;
        ((PyDictObject *)d)->ma_keys = (PyDictKeysObject *)k;
        ((PyDictObject *)d)->ma_used = n;
        if (track)
            PyObject_GC_Track(d);
        return d;
    }
#endif
    PyObject *d = kw_new_dict(n);
    Py_ssize_t i = 0;
    if (d != NULL) {
        for (; i < n; i++) {
            int r = PyDict_SetItem(d, s->fields[i].key, vals[i]);
            Py_DECREF(vals[i]);
            if (r < 0) {
                i++;
                Py_CLEAR(d);
                break;
            }
        }
    }
    for (; i < n; i++)
        Py_DECREF(vals[i]);
    return d;
}

/* Whether dicts made by this CPython are laid out as mirrored above (run once, at import). */
static int kw_dicts_check(void) {
#ifdef KW_FAST_DICTS
    PyObject *d = PyDict_New();
    if (d == NULL)
        return -1;
    KwKeys *empty = KW_KEYS(d);
    int ok = empty->dk_nentries == 0 && empty->dk_usable == 0 && ((PyDictObject *)d)->ma_values == NULL;
    PyObject *key = PyUnicode_InternFromString("kwire");
    if (key == NULL || PyDict_SetItem(d, key, Py_None) < 0) {
        Py_XDECREF(key);
        Py_DECREF(d);
        return -1;
    }
    KwKeys *k = KW_KEYS(d);
    ok = ok && k != empty && k->dk_refcnt == 1 && k->dk_kind == KW_KEYS_UNICODE && k->dk_log2_size == 3
         && k->dk_log2_index_bytes == 3 && k->dk_nentries == 1 && k->dk_usable == 4
         && (unsigned char)k->dk_indices[(size_t)(PyObject_Hash(key) & 7)] == 0
         && KW_ENTRIES(k)[0].me_key == key && KW_ENTRIES(k)[0].me_value == Py_None
         && !PyObject_GC_IsTracked(d);
    Py_DECREF(key);
    Py_DECREF(d);
    g_fast_dicts = ok;
#endif
    return 0;
}

/* ------------------------------------------------------------------------- reading */

/* The item budget of one decoded message: array elements and unknown tagged fields, as the
 * generated decoders count them (codec/runtime.py, MAX_ITEMS, set by set_max_items when the limits
 * change). Past it the Program hands the input to the Python decoder, which names the error. Every
 * Ctx starts with items_left = g_max_items (one per decoded header or body, as in Python). */
static Py_ssize_t g_max_items = 400000;

typedef struct {
    const unsigned char *b;
    ProgramObject *prog;
    Py_ssize_t items_left;
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

/* bytes.hex(): lowercase, no separators. Eight bytes a turn: a records field in hex mode is
 * kilobytes, and a one-byte loop's speed depends on where the compiler happens to place it. */
static PyObject *hex_str(const unsigned char *p, Py_ssize_t n) {
    PyObject *s = PyUnicode_New(2 * n, 127);
    if (s == NULL)
        return NULL;
    char *d = (char *)PyUnicode_1BYTE_DATA(s);
    Py_ssize_t i = 0;
    for (; i + 8 <= n; i += 8) {
        char *o = d + 2 * i;
        memcpy(o, HEXPAIRS + 2 * p[i], 2);
        memcpy(o + 2, HEXPAIRS + 2 * p[i + 1], 2);
        memcpy(o + 4, HEXPAIRS + 2 * p[i + 2], 2);
        memcpy(o + 6, HEXPAIRS + 2 * p[i + 3], 2);
        memcpy(o + 8, HEXPAIRS + 2 * p[i + 4], 2);
        memcpy(o + 10, HEXPAIRS + 2 * p[i + 5], 2);
        memcpy(o + 12, HEXPAIRS + 2 * p[i + 6], 2);
        memcpy(o + 14, HEXPAIRS + 2 * p[i + 7], 2);
    }
    for (; i < n; i++)
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
        if (cnt > c->items_left) return NULL;  /* the item budget, before anything is allocated */
        c->items_left -= (Py_ssize_t)cnt;
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
    PyObject *vals_small[16];
    PyObject **vals = vals_small;
    if (s->nfields > 16 && (vals = PyMem_Malloc(sizeof(PyObject *) * (size_t)s->nfields)) == NULL)
        return PyErr_NoMemory();
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
        if (v == NULL) {
            while (i > 0)
                Py_DECREF(vals[--i]);
            if (vals != vals_small)
                PyMem_Free(vals);
            return NULL;
        }
        vals[i] = v;
    }
    PyObject *d = struct_dict(s, vals);
    if (vals != vals_small)
        PyMem_Free(vals);
    if (d == NULL)
        return NULL;
    if (prog->flexible) {
        uint64_t nt;
        if (read_uvarint(c->b, &p, end, &nt) < 0) goto fail;
        if (nt) {
            PyObject *unk = NULL, *expl = NULL;
            if ((int64_t)nt * 2 > end - p) goto fail;
            uint64_t prev = 0;
            for (uint64_t k = 0; k < nt; k++) {
                uint64_t tag, sz;
                if (read_uvarint(c->b, &p, end, &tag) < 0) goto tagfail;
                if (k > 0 && tag <= prev) goto tagfail; /* out of order or repeated: Python names it */
                prev = tag;
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
                    if (--c->items_left < 0) goto tagfail;  /* an unknown tagged field is an item */
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
        Py_XDECREF(s->layout);
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
    return struct_layout(s);
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
        Ctx c = {(const unsigned char *)PyBytes_AS_STRING(args[0]), self, g_max_items};
        /* The cyclic collector pauses while the tree is built: the new containers cannot form a
         * cycle before they are returned, so a collection started by their allocations (one per
         * ~700 containers, each scanning them all) finds nothing; it runs as usual afterwards. */
        int gc_was_on = KW_GC_PAUSE();
        PyObject *d = decode_struct(&c, 0, &pos, end, 0, 0);
        KW_GC_RESUME(gc_was_on);
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

/* decode_pair(head, body, buf, start, end): a whole message (header then body) in one call:
 * (header dict, body dict) when both Programs decode natively and the body ends exactly at `end`;
 * None on anything else (the caller then runs its usual path, which gives every error). */
static PyObject *decode_pair(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "decode_pair(head, body, buf, start, end)");
        return NULL;
    }
    if (!g_enabled || !Py_IS_TYPE(args[0], &ProgramType) || !Py_IS_TYPE(args[1], &ProgramType)
            || !PyBytes_CheckExact(args[2]) || !PyLong_CheckExact(args[3]) || !PyLong_CheckExact(args[4]))
        Py_RETURN_NONE;
    Py_ssize_t pos = PyLong_AsSsize_t(args[3]);
    Py_ssize_t end = PyLong_AsSsize_t(args[4]);
    if ((pos == -1 || end == -1) && PyErr_Occurred()) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    if (pos < 0 || end < pos || end > PyBytes_GET_SIZE(args[2]))
        Py_RETURN_NONE;
    const unsigned char *b = (const unsigned char *)PyBytes_AS_STRING(args[2]);
    Ctx hc = {b, (ProgramObject *)args[0], g_max_items};
    Ctx bc = {b, (ProgramObject *)args[1], g_max_items};  /* each its own budget, as in Python */
    int gc_was_on = KW_GC_PAUSE();  /* as in program_vectorcall */
    PyObject *h = decode_struct(&hc, 0, &pos, end, 0, 0);
    PyObject *d = h == NULL ? NULL : decode_struct(&bc, 0, &pos, end, 0, 0);
    KW_GC_RESUME(gc_was_on);
    if (d == NULL || pos != end) {
        Py_XDECREF(h);
        Py_XDECREF(d);
        if (PyErr_Occurred()) {
            if (!PyErr_ExceptionMatches(PyExc_Exception))
                return NULL;  /* KeyboardInterrupt and the like go through */
            PyErr_Clear();
        }
        Py_RETURN_NONE;
    }
    PyObject *r = PyTuple_New(2);
    if (r == NULL) {
        Py_DECREF(h);
        Py_DECREF(d);
        return NULL;
    }
    PyTuple_SET_ITEM(r, 0, h);
    PyTuple_SET_ITEM(r, 1, d);
    return r;
}

/* ------------------------------------------------------------------------- whole frames
 *
 * decode_request_frame / decode_response_frame: a whole frame (size prefix, header, body) into a
 * codec.message.Message in one call, for what message.py has already looked up once: its
 * "targets" (per kind, records mode, api key and version: the registry they came from, the
 * header and body Programs, the api's key and name, the newest version the specs know), handed
 * over with remember_target. None on anything else (no target yet, another registry in use, a
 * version newer than the specs, a size prefix that does not fit, bytes either Program does not
 * read whole, trailing bytes): message.py's own path then decides, and gives every error. */

#define KW_MAX_KEY 256
#define KW_MAX_VERSION 64
#define KW_NMODES 4   /* records=None, "bytes", "hex", "decode" */

typedef struct {
    PyObject *registry;      /* NULL: no target */
    ProgramObject *head;
    ProgramObject *body;
    PyObject *api_key;
    PyObject *api_name;
    int hi;
} Target;

static Target *g_targets[2][KW_NMODES][KW_MAX_KEY];  /* rows of KW_MAX_VERSION, made when first needed */
static PyTypeObject *g_message;                      /* codec.message.Message (a slotted dataclass) */
static PyObject *g_registry_fn;                      /* spec.registry.registry */
#define KW_MESSAGE_FIELDS 10
static Py_ssize_t g_slot[KW_MESSAGE_FIELDS];         /* offsets of Message's slots, in its field order */
static PyObject *s_kind[2];                          /* "request", "response" */
static PyObject *s_mode[KW_NMODES];                  /* None's place, "bytes", "hex", "decode" */

static int records_mode_index(PyObject *records) {
    if (records == Py_None)
        return 0;
    for (int i = 1; i < KW_NMODES; i++)
        if (records == s_mode[i])
            return i;
    if (!PyUnicode_CheckExact(records))
        return -1;
    for (int i = 1; i < KW_NMODES; i++)
        if (PyUnicode_Compare(records, s_mode[i]) == 0)
            return i;
    PyErr_Clear();
    return -1;
}

/* frame_setup(Message, field names in Message's order, registry function) */
static PyObject *frame_setup(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3 || !PyType_Check(args[0]) || !PyTuple_Check(args[1])
            || PyTuple_GET_SIZE(args[1]) != KW_MESSAGE_FIELDS || !PyCallable_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError, "frame_setup(Message, its 10 field names, registry)");
        return NULL;
    }
    PyTypeObject *tp = (PyTypeObject *)args[0];
    Py_ssize_t off[KW_MESSAGE_FIELDS];
    for (Py_ssize_t i = 0; i < KW_MESSAGE_FIELDS; i++) {
        PyObject *d = PyObject_GetAttr(args[0], PyTuple_GET_ITEM(args[1], i));
        if (d == NULL)
            return NULL;
        int ok = Py_IS_TYPE(d, &PyMemberDescr_Type)
                 && ((PyMemberDescrObject *)d)->d_member->type == T_OBJECT_EX
                 && !(((PyMemberDescrObject *)d)->d_member->flags & READONLY);
        if (ok)
            off[i] = ((PyMemberDescrObject *)d)->d_member->offset;
        Py_DECREF(d);
        if (!ok) {
            PyErr_SetString(PyExc_TypeError, "Message's fields must be writable slots");
            return NULL;
        }
    }
    memcpy(g_slot, off, sizeof off);
    Py_XSETREF(g_message, (PyTypeObject *)Py_NewRef(tp));
    Py_XSETREF(g_registry_fn, Py_NewRef(args[2]));
    Py_RETURN_NONE;
}

/* remember_target(is_response, records, key, version, registry, head, body, api key, api name, hi) */
static PyObject *remember_target(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 10) {
        PyErr_SetString(PyExc_TypeError, "remember_target takes 10 arguments");
        return NULL;
    }
    int kind = PyObject_IsTrue(args[0]);
    int mode = records_mode_index(args[1]);
    long key = PyLong_AsLong(args[2]);
    long version = PyLong_AsLong(args[3]);
    long hi = PyLong_AsLong(args[9]);
    if (PyErr_Occurred())
        return NULL;
    if (mode < 0 || key < 0 || key >= KW_MAX_KEY || version < 0 || version >= KW_MAX_VERSION
            || !Py_IS_TYPE(args[5], &ProgramType) || !Py_IS_TYPE(args[6], &ProgramType)
            || !PyLong_CheckExact(args[7]) || !PyUnicode_CheckExact(args[8]))
        Py_RETURN_FALSE;  /* not one the native entry reads: message.py's path keeps it */
    Target **row = &g_targets[kind][mode][key];
    if (*row == NULL && (*row = PyMem_Calloc(KW_MAX_VERSION, sizeof(Target))) == NULL)
        return PyErr_NoMemory();
    Target *t = &(*row)[version];
    Py_XSETREF(t->registry, Py_NewRef(args[4]));
    Py_XSETREF(t->head, (ProgramObject *)Py_NewRef(args[5]));
    Py_XSETREF(t->body, (ProgramObject *)Py_NewRef(args[6]));
    Py_XSETREF(t->api_key, Py_NewRef(args[7]));
    Py_XSETREF(t->api_name, Py_NewRef(args[8]));
    t->hi = (int)hi;
    Py_RETURN_TRUE;
}

/* The Message for a frame whose header and body start at `start`; NULL with no exception set: not
 * read here. */
static PyObject *frame_message(int kind, const Target *t, PyObject *data, Py_ssize_t start, Py_ssize_t end,
                               PyObject *version) {
    PyObject *reg = PyObject_CallNoArgs(g_registry_fn);
    if (reg == NULL) {
        if (PyErr_ExceptionMatches(PyExc_Exception))
            PyErr_Clear();  /* the usual path calls it again and raises */
        return NULL;
    }
    Py_DECREF(reg);  /* the module keeps it; only its identity is compared */
    if (reg != t->registry)
        return NULL;
    /* Own references for the duration: a default factory runs Python code, during which another
     * thread may replace this target (remember_target) */
    ProgramObject *head = (ProgramObject *)Py_NewRef(t->head), *body = (ProgramObject *)Py_NewRef(t->body);
    PyObject *api_key = Py_NewRef(t->api_key), *api_name = Py_NewRef(t->api_name);
    const unsigned char *b = (const unsigned char *)PyBytes_AS_STRING(data);
    Ctx hc = {b, head, g_max_items};
    Ctx bc = {b, body, g_max_items};  /* each its own budget, as in Python */
    Py_ssize_t pos = start;
    PyObject *msg = NULL;
    int gc_was_on = KW_GC_PAUSE();  /* as in program_vectorcall; the Message is made before it resumes */
    PyObject *h = decode_struct(&hc, 0, &pos, end, 0, 0);
    PyObject *d = h == NULL ? NULL : decode_struct(&bc, 0, &pos, end, 0, 0);
    if (d != NULL && pos == end) {
        PyObject *size = PyLong_FromSsize_t(end - start);
        if (size != NULL)
            msg = g_message->tp_alloc(g_message, 0);
        if (msg != NULL) {
            PyObject *v[KW_MESSAGE_FIELDS] = {api_key, api_name, version, s_kind[kind], h, d, size,
                                              Py_None, NULL, NULL};
            PyObject *empty = PyTuple_New(0);
            v[8] = v[9] = empty;
            for (int i = 0; i < KW_MESSAGE_FIELDS; i++)
                *(PyObject **)((char *)msg + g_slot[i]) = Py_XNewRef(v[i]);
            Py_XDECREF(empty);
            if (empty == NULL)
                Py_CLEAR(msg);
        }
        Py_XDECREF(size);
    }
    KW_GC_RESUME(gc_was_on);
    Py_XDECREF(h);
    Py_XDECREF(d);
    Py_DECREF(head);
    Py_DECREF(body);
    Py_DECREF(api_key);
    Py_DECREF(api_name);
    if (msg == NULL && PyErr_Occurred() && PyErr_ExceptionMatches(PyExc_Exception))
        PyErr_Clear();  /* the usual path decides (KeyboardInterrupt and the like go through) */
    return msg;
}

/* Where the message starts inside `data` given the caller's size_prefixed (None, True, False):
 * 4 for a size prefix that fits, 0 for none; -1 for what the usual path decides (an error). */
static Py_ssize_t frame_start(PyObject *data, PyObject *size_prefixed) {
    Py_ssize_t n = PyBytes_GET_SIZE(data);
    if (size_prefixed == Py_False)
        return 0;
    if (n >= 4 && (Py_ssize_t)(int32_t)be32((const unsigned char *)PyBytes_AS_STRING(data)) == n - 4)
        return 4;
    return size_prefixed == Py_None ? 0 : -1;
}

static inline PyObject *none_or_error(PyObject *msg) {
    if (msg != NULL || PyErr_Occurred())
        return msg;
    Py_RETURN_NONE;
}

/* decode_request_frame(data, size_prefixed, records) -> Message or None */
static PyObject *decode_request_frame(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "decode_request_frame(data, size_prefixed, records)");
        return NULL;
    }
    PyObject *data = args[0];
    if (!g_enabled || g_message == NULL || !PyBytes_CheckExact(data))
        Py_RETURN_NONE;
    Py_ssize_t start = frame_start(data, args[1]), end = PyBytes_GET_SIZE(data);
    int mode = records_mode_index(args[2]);
    if (start < 0 || mode < 0 || end - start < 4)
        Py_RETURN_NONE;
    const unsigned char *b = (const unsigned char *)PyBytes_AS_STRING(data) + start;
    int key = (int16_t)be16(b), version = (int16_t)be16(b + 2);
    if (key < 0 || key >= KW_MAX_KEY || version < 0 || version >= KW_MAX_VERSION)
        Py_RETURN_NONE;
    Target *row = g_targets[0][mode][key];
    if (row == NULL || row[version].registry == NULL || version > row[version].hi)
        Py_RETURN_NONE;
    PyObject *v = PyLong_FromLong(version);
    if (v == NULL)
        return NULL;
    PyObject *msg = frame_message(0, &row[version], data, start, end, v);
    Py_DECREF(v);
    return none_or_error(msg);
}

/* decode_response_frame(data, api_key, api_version, size_prefixed, records) -> Message or None */
static PyObject *decode_response_frame(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "decode_response_frame(data, api_key, api_version, size_prefixed, records)");
        return NULL;
    }
    PyObject *data = args[0];
    if (!g_enabled || g_message == NULL || !PyBytes_CheckExact(data) || !PyLong_CheckExact(args[1])
            || !PyLong_CheckExact(args[2]))
        Py_RETURN_NONE;
    long key = PyLong_AsLong(args[1]), version = PyLong_AsLong(args[2]);
    if ((key == -1 || version == -1) && PyErr_Occurred()) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    Py_ssize_t start = frame_start(data, args[3]), end = PyBytes_GET_SIZE(data);
    int mode = records_mode_index(args[4]);
    if (start < 0 || mode < 0 || key < 0 || key >= KW_MAX_KEY || version < 0 || version >= KW_MAX_VERSION)
        Py_RETURN_NONE;
    Target *row = g_targets[1][mode][key];
    if (row == NULL || row[version].registry == NULL || version > row[version].hi)
        Py_RETURN_NONE;
    return none_or_error(frame_message(1, &row[version], data, start, end, args[2]));
}

/* ------------------------------------------------------------------------- module */

/* set_max_items(n): the item budget of each message from now on; returns the previous one. */
static PyObject *set_max_items(PyObject *mod, PyObject *arg) {
    Py_ssize_t n = PyLong_AsSsize_t(arg);
    if (n == -1 && PyErr_Occurred())
        return NULL;
    if (n < 0) {
        PyErr_SetString(PyExc_ValueError, "the item budget cannot be negative");
        return NULL;
    }
    Py_ssize_t prev = g_max_items;
    g_max_items = n;
    return PyLong_FromSsize_t(prev);
}

static PyMethodDef module_methods[] = {
    {"set_max_items", (PyCFunction)set_max_items, METH_O,
     "set_max_items(n) -> previous: array elements and unknown tagged fields per decoded message"},
    {"decode_pair", (PyCFunction)(void (*)(void))decode_pair, METH_FASTCALL,
     "decode_pair(head, body, buf, start, end) -> (header, body) or None"},
    {"frame_setup", (PyCFunction)(void (*)(void))frame_setup, METH_FASTCALL,
     "frame_setup(Message, its field names, registry): what decode_*_frame build and check"},
    {"remember_target", (PyCFunction)(void (*)(void))remember_target, METH_FASTCALL,
     "remember_target(is_response, records, key, version, registry, head, body, api_key, api_name, hi) -> bool"},
    {"decode_request_frame", (PyCFunction)(void (*)(void))decode_request_frame, METH_FASTCALL,
     "decode_request_frame(data, size_prefixed, records) -> Message or None"},
    {"decode_response_frame", (PyCFunction)(void (*)(void))decode_response_frame, METH_FASTCALL,
     "decode_response_frame(data, api_key, api_version, size_prefixed, records) -> Message or None"},
    KW_SWITCH_METHODS("every Program calls its Python fallback."),
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_speedups",
    "Optional native decoder for kwire's compiled plans (see native.py).", -1, module_methods,
};

PyMODINIT_FUNC PyInit__speedups(void) {
    for (int i = 0; i < 256; i++) {
        HEXPAIRS[2 * i] = HEXDIGITS[i >> 4];
        HEXPAIRS[2 * i + 1] = HEXDIGITS[i & 15];
    }
    if (PyType_Ready(&ProgramType) < 0 || kw_dicts_check() < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module_def);
    if (m == NULL)
        return NULL;
    s_unknown_tags = PyUnicode_InternFromString("_unknown_tags");
    s_explicit_tags = PyUnicode_InternFromString("_explicit_tags");
    s_kind[0] = PyUnicode_InternFromString("request");
    s_kind[1] = PyUnicode_InternFromString("response");
    s_mode[0] = Py_None;
    s_mode[1] = PyUnicode_InternFromString("bytes");
    s_mode[2] = PyUnicode_InternFromString("hex");
    s_mode[3] = PyUnicode_InternFromString("decode");
    if (s_unknown_tags == NULL || s_explicit_tags == NULL || s_kind[0] == NULL || s_kind[1] == NULL
            || s_mode[1] == NULL || s_mode[2] == NULL || s_mode[3] == NULL) {
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
    PyModule_AddIntConstant(m, "FAST_DICTS", g_fast_dicts);
    return m;
}
