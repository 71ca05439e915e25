/* kwire_cli.records._native: the records fast path in C, optional (kwire runs without it).
 *
 * v2_records is the native twin of _v2_records_fast in kwire_cli/records/v2.py: a record batch's
 * records section -> the list of record dicts. kwire_cli/records/native.py binds it; the Python
 * function stays the reference and the fallback (tests/test_records_speedups.py compares them).
 */
#include "../native_common.h"
#include <stdint.h>
#include <string.h>

/* v2_records(rb, count, base_offset, base_ts, room, show_bytes, header_key): the native twin of
 * kwire_cli/records/v2.py's _v2_records_fast, the fast path of a record batch's records
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

/* A key or value of at least this many bytes goes to show_bytes as a memoryview of rb (no copy),
 * plain or not: its form is costed and charged to the frame budget there (records/forms.py). */
#define RB_BIG ((Py_ssize_t)1 << 20)

/* The bytes of rb: a bytes object, a bytearray (what decompression makes, not copied again) or a
 * contiguous memoryview of bytes (an uncompressed batch inside its records field, not copied). */
static inline const unsigned char *rb_data(PyObject *rbo) {
    if (PyBytes_CheckExact(rbo))
        return (const unsigned char *)PyBytes_AS_STRING(rbo);
    if (PyByteArray_CheckExact(rbo))
        return (const unsigned char *)PyByteArray_AS_STRING(rbo);
    return (const unsigned char *)PyMemoryView_GET_BUFFER(rbo)->buf;
}

/* Whether rb is one of those (and its length into *n). */
static int rb_taken(PyObject *rbo, Py_ssize_t *n) {
    if (PyBytes_CheckExact(rbo)) {
        *n = PyBytes_GET_SIZE(rbo);
        return 1;
    }
    if (PyByteArray_CheckExact(rbo)) {
        *n = PyByteArray_GET_SIZE(rbo);
        return 1;
    }
    if (PyMemoryView_Check(rbo)) {
        Py_buffer *v = PyMemoryView_GET_BUFFER(rbo);
        if (v->buf != NULL && v->itemsize == 1 && v->ndim <= 1 && PyBuffer_IsContiguous(v, 'C')
                && (v->format == NULL || strcmp(v->format, "B") == 0)) {
            *n = v->len;
            return 1;
        }
    }
    return 0;
}

/* show(memoryview(rbo)[off:off + n]) */
static PyObject *rb_show_view(PyObject *rbo, Py_ssize_t off, Py_ssize_t n, PyObject *show) {
    PyObject *mv = PyMemoryView_FromObject(rbo);
    if (mv == NULL)
        return NULL;
    PyObject *view = PySequence_GetSlice(mv, off, off + n);
    Py_DECREF(mv);
    if (view == NULL)
        return NULL;
    PyObject *r = PyObject_CallOneArg(show, view);
    Py_DECREF(view);
    return r;
}

/* A key/value's form: {"text": s} when plain, else show_bytes(bytes); a long one show_bytes(view). */
static PyObject *rb_form(PyObject *rbo, const unsigned char *s, Py_ssize_t n, PyObject *show) {
    if (n >= RB_BIG)
        return rb_show_view(rbo, (Py_ssize_t)(s - rb_data(rbo)), n, show);
    if (rb_plain(s, n)) {
        PyObject *t = rb_ascii(s, n);
        if (t == NULL)
            return NULL;
        PyObject *d = kw_new_dict(1);
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

/* A header key: the str when plain (and not long), else header_key(bytes). */
static PyObject *rb_hkey(const unsigned char *s, Py_ssize_t n, PyObject *header_key) {
    if (n < RB_BIG && rb_plain(s, n))
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
static int rb_field(PyObject *rbo, const unsigned char *b, Py_ssize_t n, Py_ssize_t *pos, PyObject *show,
                    PyObject **out) {
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
    *out = rb_form(rbo, b + *pos, (Py_ssize_t)len, show);
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
static int rb_headers(PyObject *rbo, const unsigned char *b, Py_ssize_t n, Py_ssize_t *pos, int64_t *room,
                      PyObject *show, PyObject *header_key, PyObject **out) {
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
        if ((r = rb_field(rbo, b, n, &p, show, &hv)) != RB_OK) {
            Py_DECREF(hk);
            goto fail;
        }
        PyObject *d = kw_new_dict(2);
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
    Py_ssize_t n;
    if (!g_enabled || !rb_taken(rbo, &n) || rb_int64(args[1], &count) != 0
            || rb_int64(args[2], &base_offset) != 0 || rb_int64(args[3], &base_ts) != 0)
        Py_RETURN_NOTIMPLEMENTED;
    int ro = rb_int64(args[4], &room);
    if (ro == 1)
        room = INT64_MAX;    /* more than any rb can use up */
    else if (ro != 0)
        Py_RETURN_NOTIMPLEMENTED;
    if (room < 0)
        Py_RETURN_NONE;      /* the Python function ends with "room < 0": None */
    const unsigned char *b = rb_data(rbo);
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
        if ((r = rb_field(rbo, b, n, &p, show, &key)) != RB_OK)
            goto out;
        if ((r = rb_field(rbo, b, n, &p, show, &value)) != RB_OK)
            goto rec_fail;
        if (p < n && b[p] == 0) {
            p++;
            headers = PyList_New(0);
            if (headers == NULL) {
                r = -1;
                goto rec_fail;
            }
        } else if ((r = rb_headers(rbo, b, n, &p, &room, show, header_key, &headers)) != RB_OK)
            goto rec_fail;
        if ((int64_t)p != rec_end) {
            r = RB_BAD;
            goto rec_fail;
        }
        if (rb_add(base_ts, tsd, &ts) < 0 || rb_add(base_offset, od, &off) < 0) {
            r = RB_DEFER;
            goto rec_fail;
        }
        PyObject *d = kw_new_dict(9);
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

static PyMethodDef module_methods[] = {
    KW_SWITCH_METHODS("v2_records returns NotImplemented (the Python fast path runs)."),
    {"v2_records", (PyCFunction)(void (*)(void))v2_records, METH_FASTCALL,
     "v2_records(rb, count, base_offset, base_ts, room, show_bytes, header_key) -> list, None or "
     "NotImplemented: records/v2.py's _v2_records_fast in C (NotImplemented: run that instead)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_native",
    "Optional native records fast path (see kwire_cli/records/native.py).", -1, module_methods,
};

PyMODINIT_FUNC PyInit__native(void) {
    PyObject *m = PyModule_Create(&module_def);
    if (m == NULL)
        return NULL;
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
    if (s_Length == NULL || s_Attributes == NULL || s_TimestampDelta == NULL || s_Timestamp == NULL
            || s_OffsetDelta == NULL || s_Offset == NULL || s_Key == NULL || s_Value == NULL || s_Headers == NULL
            || s_text == NULL) {
        Py_DECREF(m);
        return NULL;
    }
    PyModule_AddIntConstant(m, "ABI_VERSION", 1);
    return m;
}
