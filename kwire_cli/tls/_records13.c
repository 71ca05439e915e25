/* TLS 1.3 records decrypted through OpenSSL's libcrypto (used by kwire_cli/tls/keys.py and
 * fast.py when built; the Python path gives the same results: tests/test_tls_native.py).
 *
 * ``Opener(cipher, key, iv)`` keeps one OpenSSL EVP context keyed once (AES-128-GCM, AES-256-GCM
 * or ChaCha20-Poly1305); ``opener.open(seq, body, header)`` decrypts one record body (None when it
 * does not authenticate); ``opener.records(data, p, seq, pos, d, out, plaintext_type)`` walks the
 * whole TLS 1.3 application_data records of ``data`` from ``p`` exactly as the record layer's
 * Python loop does (fast.py ``_app13``): the nonce is the IV XOR the sequence number
 * (RFC 8446 5.3), the additional data the record header as it came; each record whose inner
 * plaintext is application data without padding becomes a ``plaintext_type`` tuple (d, data,
 * start, end) appended to ``out``. It stops at the first record it does not complete: another
 * content type, a record cut short or too long, one with a body over ``max_len`` (AES-GCM
 * records over 4 KiB: faster in the Python path), one that does not authenticate (no state
 * changes for it), or one whose inner plaintext is anything else (that plaintext is handed back
 * for the Python path to read). Returns (p, seq, pos, plaintext bytes, that plaintext or None).
 * ``opener.opens(data, p, seq)`` opens such a run whatever the inner plaintexts hold (the
 * handshake keys' records: fast.py ``_hs13`` reads each) and returns (p, seq, their list).
 *
 * ``derive(cipher, hash, secret, key_info, iv_info)`` gives the Opener of a TLS 1.3 traffic
 * secret with its key and IV: each is an HKDF-Expand-Label output of at most one hash length, so
 * one HMAC (RFC 8446 7.3, RFC 5869 2.3), computed with OpenSSL's EVP_MAC.
 *
 * No cipher is written here: OpenSSL's libcrypto does the AEAD and the HMAC. It is not linked at
 * build time (a fresh machine may have the library without its headers): the few EVP functions are found
 * at import with dlopen("libcrypto.so.3"); without it the import fails with ImportError and kwire
 * uses the Python path (``cryptography``'s AEAD classes), which gives the same results.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <dlfcn.h>
#include <string.h>

#define APPLICATION_DATA 23
#define MAX_RECORD ((1 << 14) + 2048)
#define TAG_LEN 16
#define EVP_CTRL_AEAD_SET_TAG 0x11

typedef struct evp_cipher_ctx_st EVP_CIPHER_CTX;
typedef struct evp_cipher_st EVP_CIPHER;
typedef struct engine_st ENGINE;

static EVP_CIPHER_CTX *(*p_ctx_new)(void);
static void (*p_ctx_free)(EVP_CIPHER_CTX *);
static int (*p_decrypt_init)(EVP_CIPHER_CTX *, const EVP_CIPHER *, ENGINE *, const unsigned char *,
                             const unsigned char *);
static int (*p_decrypt_update)(EVP_CIPHER_CTX *, unsigned char *, int *, const unsigned char *, int);
static int (*p_decrypt_final)(EVP_CIPHER_CTX *, unsigned char *, int *);
static int (*p_ctrl)(EVP_CIPHER_CTX *, int, int, void *);
static EVP_CIPHER *(*p_cipher_fetch)(void *, const char *, const char *);
/* the three ciphers, fetched from the default provider once (not at each key) */
static const EVP_CIPHER *aes_128_gcm, *aes_256_gcm, *chacha20_poly1305;

/* HMAC through OpenSSL 3's EVP_MAC (for the traffic keys: HKDF-Expand-Label of one hash length) */
typedef struct evp_mac_st EVP_MAC;
typedef struct evp_mac_ctx_st EVP_MAC_CTX;
typedef struct {
    const char *key;
    unsigned int data_type;
    void *data;
    size_t data_size;
    size_t return_size;
} OSSL_PARAM;
#define OSSL_PARAM_UTF8_STRING 4
static EVP_MAC *(*p_mac_fetch)(void *, const char *, const char *);
static EVP_MAC_CTX *(*p_mac_ctx_new)(EVP_MAC *);
static void (*p_mac_ctx_free)(EVP_MAC_CTX *);
static int (*p_mac_set_params)(EVP_MAC_CTX *, const OSSL_PARAM *);
static int (*p_mac_init)(EVP_MAC_CTX *, const unsigned char *, size_t, const OSSL_PARAM *);
static int (*p_mac_update)(EVP_MAC_CTX *, const unsigned char *, size_t);
static int (*p_mac_final)(EVP_MAC_CTX *, unsigned char *, size_t *, size_t);
static EVP_MAC_CTX *hmac_sha256, *hmac_sha384;   /* the digest set once; keyed anew per secret */

typedef struct {
    PyObject_HEAD
    EVP_CIPHER_CTX *ctx;
    Py_ssize_t max_len;      /* records with a longer body stop the loop (see opener_init) */
    unsigned char iv[12];
    /* a direction's record state while it is held here (attach .. detach, see opener_feed) */
    unsigned long long seq;  /* the next record's sequence number */
    Py_ssize_t pos;          /* the stream offset of the next record */
    PyObject *d;             /* the direction label of the Plaintext items */
    Py_ssize_t records, decrypted, plain, fed;   /* counted since attach */
} Opener;

/* Up to about 2 KiB this OpenSSL's AES-GCM through one EVP context beats cryptography's own
 * AEAD call (0.51 against 0.68 us at 1 KiB); up to 4 KiB it is within 0.3 us of it (0.88 against
 * 0.73 us at 3000 bytes), less than the second AEAD object per key and the Python path such a
 * record would take; beyond it the library cryptography bundles is faster (1.42 against 3.3 us
 * for a full 16 KiB record, OpenSSL 3.0 here): longer AES-GCM records are left to the Python
 * path. ChaCha20-Poly1305 is faster here at every size. */
#define GCM_NATIVE_MAX 4096

static void opener_dealloc(Opener *self) {
    Py_CLEAR(self->d);
    if (self->ctx)
        p_ctx_free(self->ctx);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int opener_init(Opener *self, PyObject *args, PyObject *kw) {
    const char *name;
    Py_buffer key, iv;
    static char *kwlist[] = {"cipher", "key", "iv", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kw, "sy*y*", kwlist, &name, &key, &iv))
        return -1;
    const EVP_CIPHER *c = NULL;
    Py_ssize_t klen = 0;
    self->max_len = GCM_NATIVE_MAX;
    if (strcmp(name, "aes-128-gcm") == 0) {
        c = aes_128_gcm;
        klen = 16;
    } else if (strcmp(name, "aes-256-gcm") == 0) {
        c = aes_256_gcm;
        klen = 32;
    } else if (strcmp(name, "chacha20-poly1305") == 0) {
        c = chacha20_poly1305;
        klen = 32;
        self->max_len = MAX_RECORD;
    }
    int ok = 0;
    if (c == NULL) {
        PyErr_Format(PyExc_ValueError, "no native cipher %s", name);
    } else if (key.len != klen || iv.len != 12) {
        PyErr_SetString(PyExc_ValueError, "key or IV of the wrong length");
    } else {
        if (self->ctx == NULL)
            self->ctx = p_ctx_new();
        if (self->ctx == NULL || p_decrypt_init(self->ctx, c, NULL, (const unsigned char *)key.buf, NULL) != 1) {
            PyErr_SetString(PyExc_RuntimeError, "OpenSSL could not set up the cipher");
        } else {
            memcpy(self->iv, iv.buf, 12);
            ok = 1;
        }
    }
    PyBuffer_Release(&key);
    PyBuffer_Release(&iv);
    return ok ? 0 : -1;
}

/* Decrypt one record body ``ct`` (``n`` bytes, tag last) into ``out`` (n - 16 bytes): 1 when it
 * authenticates. */
static int open_one(Opener *self, unsigned long long seq, const unsigned char *header, const unsigned char *ct,
                    int n, unsigned char *out) {
    unsigned char nonce[12];
    int len;
    memcpy(nonce, self->iv, 12);
    for (int i = 0; i < 8; i++)
        nonce[11 - i] ^= (unsigned char)(seq >> (8 * i));
    EVP_CIPHER_CTX *ctx = self->ctx;
    if (p_decrypt_init(ctx, NULL, NULL, NULL, nonce) != 1)
        return 0;
    if (p_decrypt_update(ctx, NULL, &len, header, 5) != 1)
        return 0;
    int m = n - TAG_LEN;
    if (m > 0 && p_decrypt_update(ctx, out, &len, ct, m) != 1)
        return 0;
    if (p_ctrl(ctx, EVP_CTRL_AEAD_SET_TAG, TAG_LEN, (void *)(ct + m)) != 1)
        return 0;
    return p_decrypt_final(ctx, out + (m > 0 ? m : 0), &len) == 1;
}

/* The loop of ``records`` and ``feed``: the whole application_data records of data[*pp:n] (the
 * sequence number at *pseq, the stream offset at *ppos, all three moved on past each record read).
 * A record whose inner plaintext is application data without padding becomes an item of ``out``:
 * a ``ptype`` tuple (d, data, start, end), or, with ptype NULL, the plaintext bytes alone; *pplain
 * counts their bytes. It stops at the first record it does not complete; one that decrypted to
 * anything else is counted as read (p and seq past it, pos at its start) and its inner plaintext
 * put in *stop (a new reference). 0 with an exception set when Python ran out of memory. */
#define HANDSHAKE 22
#define NEW_SESSION_TICKET 4

/* The inner plaintext ``pt`` (``m`` bytes, content type last) is a handshake record of whole
 * TLS 1.3 NewSessionTicket messages, no padding: nothing in it changes the record layer's state
 * after the handshake (the record layer reads them and does nothing; a KeyUpdate is not one). */
static int only_tickets(const unsigned char *pt, Py_ssize_t m) {
    if (m < 5 || pt[m - 1] != HANDSHAKE)
        return 0;
    Py_ssize_t p = 0, n = m - 1;
    while (p < n) {
        if (n - p < 4 || pt[p] != NEW_SESSION_TICKET)
            return 0;
        p += 4 + ((Py_ssize_t)pt[p + 1] << 16 | pt[p + 2] << 8 | pt[p + 3]);
    }
    return p == n;
}

static int walk(Opener *self, const unsigned char *data, Py_ssize_t n, Py_ssize_t *pp, unsigned long long *pseq,
                Py_ssize_t *ppos, PyObject *dobj, PyObject *out, PyTypeObject *ptype, Py_ssize_t *pplain,
                PyObject **stop, int tickets) {
    Py_ssize_t p = *pp, pos = *ppos, plain = 0;
    unsigned long long seq = *pseq;
    int ok = 1;
    *stop = NULL;
    while (n - p >= 5 && data[p] == APPLICATION_DATA && data[p + 1] == 3 && data[p + 2] <= 4) {
        Py_ssize_t ln = data[p + 3] << 8 | data[p + 4];
        Py_ssize_t end = p + 5 + ln;
        if (end > n || ln > MAX_RECORD || ln > self->max_len)
            break;
        if (ln < TAG_LEN)
            break;  /* no room for the tag: does not authenticate */
        PyObject *pt = PyBytes_FromStringAndSize(NULL, ln - TAG_LEN);
        if (pt == NULL) {
            ok = 0;
            break;
        }
        if (!open_one(self, seq, data + p, data + p + 5, (int)ln, (unsigned char *)PyBytes_AS_STRING(pt))) {
            Py_DECREF(pt);
            break;
        }
        seq++;
        Py_ssize_t total = end - p;
        p = end;
        Py_ssize_t m = ln - TAG_LEN;
        if (m > 0 && (unsigned char)PyBytes_AS_STRING(pt)[m - 1] == APPLICATION_DATA) {
            if (m > 1) {
                if (_PyBytes_Resize(&pt, m - 1) < 0) {
                    ok = 0;
                    break;
                }
                PyObject *item = pt;
                if (ptype != NULL) {
                    item = ptype->tp_alloc(ptype, 4);
                    PyObject *start = PyLong_FromSsize_t(pos), *stop_at = PyLong_FromSsize_t(pos + total);
                    if (item == NULL || start == NULL || stop_at == NULL) {
                        Py_XDECREF(item);
                        Py_XDECREF(start);
                        Py_XDECREF(stop_at);
                        Py_DECREF(pt);
                        ok = 0;
                        break;
                    }
                    Py_INCREF(dobj);
                    PyTuple_SET_ITEM(item, 0, dobj);
                    PyTuple_SET_ITEM(item, 1, pt);
                    PyTuple_SET_ITEM(item, 2, start);
                    PyTuple_SET_ITEM(item, 3, stop_at);
                }
                int r = PyList_Append(out, item);
                Py_DECREF(item);
                if (r < 0) {
                    ok = 0;
                    break;
                }
                plain += m - 1;
            } else {
                Py_DECREF(pt);
            }
            pos += total;
            continue;
        }
        if (tickets && only_tickets((const unsigned char *)PyBytes_AS_STRING(pt), m)) {
            Py_DECREF(pt);
            pos += total;
            continue;
        }
        /* padding, or a handshake message or an alert inside: the Python path reads it; the
         * position given back is the record's end, ``pos`` its start */
        *stop = pt;
        break;
    }
    *pp = p;
    *pseq = seq;
    *ppos = pos;
    *pplain = plain;
    return ok;
}

static PyObject *opener_records(Opener *self, PyObject *const *args, Py_ssize_t nargs) {
    Py_buffer buf;
    Py_ssize_t p, pos;
    PyObject *out, *ptype;
    int d;
    if (self->ctx == NULL) {
        PyErr_SetString(PyExc_ValueError, "the opener has no key");
        return NULL;
    }
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError, "records(data, p, seq, pos, d, out, plaintext_type) takes 7 arguments");
        return NULL;
    }
    out = args[5];
    ptype = args[6];
    if (!PyList_Check(out) || !PyType_Check(ptype)) {
        PyErr_SetString(PyExc_TypeError, "records: out must be a list and plaintext_type a type");
        return NULL;
    }
    p = PyLong_AsSsize_t(args[1]);
    pos = PyLong_AsSsize_t(args[3]);
    d = PyLong_AsLong(args[4]);
    unsigned long long seq = PyLong_AsUnsignedLongLong(args[2]);
    if (PyErr_Occurred())
        return NULL;
    if (PyObject_GetBuffer(args[0], &buf, PyBUF_SIMPLE) < 0)
        return NULL;
    Py_ssize_t plain = 0;
    PyObject *stop = NULL;
    PyObject *dobj = PyLong_FromLong(d);
    if (dobj == NULL)
        goto error;
    if (p < 0)
        p = buf.len;
    if (!walk(self, (const unsigned char *)buf.buf, buf.len, &p, &seq, &pos, dobj, out, (PyTypeObject *)ptype,
              &plain, &stop, 0))
        goto error;
    Py_DECREF(dobj);
    PyBuffer_Release(&buf);
    if (stop == NULL) {
        stop = Py_None;
        Py_INCREF(stop);
    }
    PyObject *res = PyTuple_New(5);
    PyObject *v0 = PyLong_FromSsize_t(p), *v1 = PyLong_FromUnsignedLongLong(seq), *v2 = PyLong_FromSsize_t(pos),
             *v3 = PyLong_FromSsize_t(plain);
    if (res == NULL || v0 == NULL || v1 == NULL || v2 == NULL || v3 == NULL) {
        Py_XDECREF(res);
        Py_XDECREF(v0);
        Py_XDECREF(v1);
        Py_XDECREF(v2);
        Py_XDECREF(v3);
        Py_DECREF(stop);
        return NULL;
    }
    PyTuple_SET_ITEM(res, 0, v0);
    PyTuple_SET_ITEM(res, 1, v1);
    PyTuple_SET_ITEM(res, 2, v2);
    PyTuple_SET_ITEM(res, 3, v3);
    PyTuple_SET_ITEM(res, 4, stop);
    return res;
error:
    Py_XDECREF(dobj);
    PyBuffer_Release(&buf);
    return NULL;
}

/* attach(seq, pos, d): the opener holds a direction's record state from here (see ``feed``). */
static PyObject *opener_attach(Opener *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "attach(seq, pos, d) takes 3 arguments");
        return NULL;
    }
    unsigned long long seq = PyLong_AsUnsignedLongLong(args[0]);
    Py_ssize_t pos = PyLong_AsSsize_t(args[1]);
    if (PyErr_Occurred())
        return NULL;
    self->seq = seq;
    self->pos = pos;
    Py_INCREF(args[2]);
    Py_XSETREF(self->d, args[2]);
    self->records = self->decrypted = self->plain = self->fed = 0;
    Py_RETURN_NONE;
}

/* feed(data, out, plaintext_type=None): the next bytes of the attached direction (``data`` a
 * bytes object): its whole application_data records read as ``records`` reads them, from the
 * state held here, each plaintext appended to ``out`` (a ``plaintext_type`` tuple (d, data,
 * start, end), or without one the bytes alone). It stops before the first record it does not
 * complete, that one included when it decrypted to something else than plain application data
 * (the record layer reads it again), but for records of whole NewSessionTicket messages, which
 * the record layer would read without a change (the caller attaches a direction with no
 * handshake message under way): they are counted as read. Returns where it stopped; the state
 * and the counts move on past the records read. */
/* ``feed``'s work: where it stopped in ``data`` (a bytes object), or -1 with an exception set. */
static Py_ssize_t feed_core(Opener *self, PyObject *data, PyObject *out, PyTypeObject *ptype) {
    Py_ssize_t p = 0, pos = self->pos, plain = 0;
    unsigned long long seq = self->seq, seq0 = seq;
    PyObject *stop = NULL;
    int ok = walk(self, (const unsigned char *)PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data), &p, &seq, &pos,
                  self->d, out, ptype, &plain, &stop, 1);
    if (stop != NULL) {
        /* not read here: the record layer reads it again from its start */
        p -= PyBytes_GET_SIZE(stop) + 5 + TAG_LEN;
        seq--;
        Py_DECREF(stop);
    }
    self->records += (Py_ssize_t)(seq - seq0);
    self->decrypted += pos - self->pos;     /* the bytes of the records read */
    self->plain += plain;
    self->fed += p;
    self->seq = seq;
    self->pos = pos;
    return ok ? p : -1;
}

static PyObject *opener_feed(Opener *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 && nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "feed(data, out, plaintext_type=None) takes 2 or 3 arguments");
        return NULL;
    }
    PyObject *data = args[0], *out = args[1];
    PyTypeObject *ptype = nargs == 3 && args[2] != Py_None ? (PyTypeObject *)args[2] : NULL;
    if (self->ctx == NULL || self->d == NULL) {
        PyErr_SetString(PyExc_ValueError, "the opener has no key or holds no direction");
        return NULL;
    }
    if (!PyBytes_CheckExact(data) || !PyList_Check(out) || (ptype != NULL && !PyType_Check((PyObject *)ptype))) {
        PyErr_SetString(PyExc_TypeError, "feed: data must be bytes, out a list, plaintext_type a type");
        return NULL;
    }
    Py_ssize_t p = feed_core(self, data, out, ptype);
    return p < 0 ? NULL : PyLong_FromSsize_t(p);
}

/* detach(): (seq, pos, records, decrypted bytes, plaintext bytes, bytes fed) of the direction
 * held since attach; the opener holds none after it. */
static PyObject *opener_detach(Opener *self, PyObject *Py_UNUSED(ignored)) {
    PyObject *res = Py_BuildValue("Knnnnn", self->seq, self->pos, self->records, self->decrypted, self->plain,
                                  self->fed);
    Py_CLEAR(self->d);
    self->records = self->decrypted = self->plain = self->fed = 0;
    return res;
}

/* opens(data, p, seq): the inner plaintexts of the whole application_data records of ``data``
 * from ``p`` that authenticate under this key at ``seq``, ``seq + 1``, ... whatever is inside
 * (the handshake phase's records: handshake messages). It stops where ``records`` stops for
 * anything but the content (another content type, a record cut short, too long or over
 * ``max_len``, one that does not authenticate: no state changes for it). Returns (p, seq, list
 * of inner plaintexts); each record was len(plaintext) + 21 bytes (header, tag). */
static PyObject *opener_opens(Opener *self, PyObject *const *args, Py_ssize_t nargs) {
    if (self->ctx == NULL) {
        PyErr_SetString(PyExc_ValueError, "the opener has no key");
        return NULL;
    }
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "opens(data, p, seq) takes 3 arguments");
        return NULL;
    }
    Py_buffer buf;
    if (PyObject_GetBuffer(args[0], &buf, PyBUF_SIMPLE) < 0)
        return NULL;
    Py_ssize_t p = PyLong_AsSsize_t(args[1]);
    unsigned long long seq = PyLong_AsUnsignedLongLong(args[2]);
    PyObject *list = NULL;
    if (PyErr_Occurred())
        goto error;
    list = PyList_New(0);
    if (list == NULL)
        goto error;
    const unsigned char *data = (const unsigned char *)buf.buf;
    Py_ssize_t n = buf.len;
    if (p < 0)
        p = n;
    while (n - p >= 5 && data[p] == APPLICATION_DATA && data[p + 1] == 3 && data[p + 2] <= 4) {
        Py_ssize_t ln = data[p + 3] << 8 | data[p + 4];
        Py_ssize_t end = p + 5 + ln;
        if (end > n || ln > MAX_RECORD || ln > self->max_len || ln < TAG_LEN)
            break;
        PyObject *pt = PyBytes_FromStringAndSize(NULL, ln - TAG_LEN);
        if (pt == NULL)
            goto error;
        if (!open_one(self, seq, data + p, data + p + 5, (int)ln, (unsigned char *)PyBytes_AS_STRING(pt))) {
            Py_DECREF(pt);
            break;
        }
        int r = PyList_Append(list, pt);
        Py_DECREF(pt);
        if (r < 0)
            goto error;
        seq++;
        p = end;
    }
    PyBuffer_Release(&buf);
    return Py_BuildValue("nKN", p, seq, list);
error:
    Py_XDECREF(list);
    PyBuffer_Release(&buf);
    return NULL;
}

static PyObject *opener_open(Opener *self, PyObject *args) {
    Py_buffer body, header;
    PyObject *seq_obj;
    if (self->ctx == NULL) {
        PyErr_SetString(PyExc_ValueError, "the opener has no key");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "Oy*y*", &seq_obj, &body, &header))
        return NULL;
    PyObject *pt = NULL;
    unsigned long long seq = PyLong_AsUnsignedLongLong(seq_obj);
    if (seq == (unsigned long long)-1 && PyErr_Occurred())
        goto done;
    if (header.len != 5) {
        PyErr_SetString(PyExc_ValueError, "a record header is 5 bytes");
        goto done;
    }
    if (body.len < TAG_LEN || body.len > INT_MAX) {
        pt = Py_None;     /* no room for the tag: does not authenticate */
        Py_INCREF(pt);
        goto done;
    }
    pt = PyBytes_FromStringAndSize(NULL, body.len - TAG_LEN);
    if (pt == NULL)
        goto done;
    if (!open_one(self, seq, (const unsigned char *)header.buf, (const unsigned char *)body.buf, (int)body.len,
                  (unsigned char *)PyBytes_AS_STRING(pt))) {
        Py_DECREF(pt);
        pt = Py_None;
        Py_INCREF(pt);
    }
done:
    PyBuffer_Release(&body);
    PyBuffer_Release(&header);
    return pt;
}

static PyTypeObject OpenerType;

/* derive(cipher, hash, secret, key_info, iv_info): the Opener of a TLS 1.3 traffic secret (RFC
 * 8446 7.3): key = HMAC(secret, key_info), iv = HMAC(secret, iv_info), each cut to its length
 * (HKDF-Expand of one block; the infos end with the counter byte 0x01, as keys.py builds them).
 * Returns (opener, key, iv). */
static PyObject *derive(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "derive(cipher, hash, secret, key_info, iv_info) takes 5 arguments");
        return NULL;
    }
    if (!PyUnicode_Check(args[0]) || !PyUnicode_Check(args[1]) || !PyBytes_Check(args[2]) || !PyBytes_Check(args[3])
        || !PyBytes_Check(args[4])) {
        PyErr_SetString(PyExc_TypeError, "derive: cipher and hash are str, secret and infos bytes");
        return NULL;
    }
    const EVP_CIPHER *c = NULL;
    Py_ssize_t want = 0, max_len = GCM_NATIVE_MAX;
    if (PyUnicode_CompareWithASCIIString(args[0], "aes-128-gcm") == 0) {
        c = aes_128_gcm;
        want = 16;
    } else if (PyUnicode_CompareWithASCIIString(args[0], "aes-256-gcm") == 0) {
        c = aes_256_gcm;
        want = 32;
    } else if (PyUnicode_CompareWithASCIIString(args[0], "chacha20-poly1305") == 0) {
        c = chacha20_poly1305;
        want = 32;
        max_len = MAX_RECORD;
    }
    EVP_MAC_CTX *k = PyUnicode_CompareWithASCIIString(args[1], "sha256") == 0   ? hmac_sha256
                     : PyUnicode_CompareWithASCIIString(args[1], "sha384") == 0 ? hmac_sha384
                                                                                  : NULL;
    if (c == NULL || k == NULL) {
        PyErr_Format(PyExc_ValueError, "no native cipher %U or HMAC over %U", args[0], args[1]);
        return NULL;
    }
    const unsigned char *secret = (const unsigned char *)PyBytes_AS_STRING(args[2]);
    unsigned char key[64], iv[64];
    size_t klen = 0, ivlen = 0;
    PyObject *result = NULL;
    /* ``k`` is re-keyed at each call (the GIL is held throughout) */
    if (p_mac_init(k, secret, (size_t)PyBytes_GET_SIZE(args[2]), NULL) != 1
        || p_mac_update(k, (const unsigned char *)PyBytes_AS_STRING(args[3]), (size_t)PyBytes_GET_SIZE(args[3])) != 1
        || p_mac_final(k, key, &klen, sizeof key) != 1
        /* the same key again (EVP_MAC_init without a key restarts from the keyed state) */
        || p_mac_init(k, NULL, 0, NULL) != 1
        || p_mac_update(k, (const unsigned char *)PyBytes_AS_STRING(args[4]), (size_t)PyBytes_GET_SIZE(args[4])) != 1
        || p_mac_final(k, iv, &ivlen, sizeof iv) != 1 || ivlen < 12) {
        PyErr_SetString(PyExc_RuntimeError, "OpenSSL could not compute the HMAC");
        goto done;
    }
    if ((Py_ssize_t)klen < want) {
        PyErr_SetString(PyExc_ValueError, "the hash is shorter than the key");
        goto done;
    }
    {
        Opener *opener = (Opener *)OpenerType.tp_alloc(&OpenerType, 0);
        if (opener == NULL)
            goto done;
        opener->max_len = max_len;
        opener->ctx = p_ctx_new();
        if (opener->ctx == NULL || p_decrypt_init(opener->ctx, c, NULL, key, NULL) != 1) {
            Py_DECREF(opener);
            PyErr_SetString(PyExc_RuntimeError, "OpenSSL could not set up the cipher");
            goto done;
        }
        memcpy(opener->iv, iv, 12);
        result = Py_BuildValue("(Ny#y#)", (PyObject *)opener, (const char *)key, want, (const char *)iv,
                               (Py_ssize_t)12);
    }
done:
    memset(key, 0, sizeof key);
    memset(iv, 0, sizeof iv);
    return result;
}

/* Entry(stage, direct, stats): where a capture's reassembly hands a TLS connection's bytes
 * (``entry.data(conn, d, data, file, packet, ts)``, ``entry.gap(...)``), in front of its TLS
 * stage (kwire_cli/capture/transforms.py ``TlsStage``): what ``TlsStage.data`` does, in C, for
 * bytes whose direction's record state an opener holds (``direct``, the TlsConnection's list):
 * ``stats.tls_bytes`` counts every byte; the plaintext of each whole record an opener reads goes to
 * ``stage.next.data`` (``stats.tls_plaintext`` counts it), and the rest, if any, and any other
 * bytes, to ``stage.rest(conn, d, side, data, file, packet, ts)``; gaps go to ``stage.gap``. */
typedef struct {
    PyObject_HEAD
    PyObject *stage, *direct, *stats;
} Entry;

static PyObject *s_is_request, *s_tls_bytes, *s_tls_plaintext, *s_next, *s_data, *s_rest, *s_gap;

static void entry_dealloc(Entry *self) {
    Py_CLEAR(self->stage);
    Py_CLEAR(self->direct);
    Py_CLEAR(self->stats);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int entry_init(Entry *self, PyObject *args, PyObject *kw) {
    PyObject *stage, *direct, *stats;
    static char *kwlist[] = {"stage", "direct", "stats", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO!O", kwlist, &stage, &PyList_Type, &direct, &stats))
        return -1;
    if (PyList_GET_SIZE(direct) != 2) {
        PyErr_SetString(PyExc_ValueError, "direct is a list of two");
        return -1;
    }
    Py_INCREF(stage);
    Py_XSETREF(self->stage, stage);
    Py_INCREF(direct);
    Py_XSETREF(self->direct, direct);
    Py_INCREF(stats);
    Py_XSETREF(self->stats, stats);
    return 0;
}

/* obj.name += n */
static int add_to(PyObject *obj, PyObject *name, Py_ssize_t n) {
    PyObject *v = PyObject_GetAttr(obj, name);
    if (v == NULL)
        return -1;
    PyObject *k = PyLong_FromSsize_t(n);
    PyObject *sum = k == NULL ? NULL : PyNumber_Add(v, k);
    Py_DECREF(v);
    Py_XDECREF(k);
    if (sum == NULL)
        return -1;
    int r = PyObject_SetAttr(obj, name, sum);
    Py_DECREF(sum);
    return r;
}

static PyObject *entry_data(Entry *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "data(conn, d, data, file, packet, ts) takes 6 arguments");
        return NULL;
    }
    PyObject *conn = args[0], *d = args[1], *data = args[2];
    if (self->stage == NULL) {
        PyErr_SetString(PyExc_ValueError, "the entry has no stage");
        return NULL;
    }
    PyObject *req = PyObject_GetAttr(d, s_is_request);
    if (req == NULL)
        return NULL;
    int is_req = PyObject_IsTrue(req);
    Py_DECREF(req);
    if (is_req < 0)
        return NULL;
    int side = is_req ? 0 : 1;
    PyObject *f = PyList_GET_ITEM(self->direct, side);
    Py_ssize_t n = PyObject_Length(data);
    if (n < 0 || add_to(self->stats, s_tls_bytes, n) < 0)
        return NULL;
    if (f == Py_None || Py_TYPE(f) != &OpenerType || !PyBytes_CheckExact(data) || ((Opener *)f)->d == NULL) {
        PyObject *sd = PyLong_FromLong(side);
        if (sd == NULL)
            return NULL;
        PyObject *call[8] = {self->stage, conn, d, sd, data, args[3], args[4], args[5]};
        PyObject *r = PyObject_VectorcallMethod(s_rest, call, 8 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
        Py_DECREF(sd);
        return r;
    }
    PyObject *pts = PyList_New(0);
    if (pts == NULL)
        return NULL;
    Py_INCREF(f);       /* (a stage called below may change ``direct``) */
    Py_ssize_t p = feed_core((Opener *)f, data, pts, NULL);
    Py_DECREF(f);
    if (p < 0)
        goto error;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(pts); i++) {
        PyObject *pt = PyList_GET_ITEM(pts, i);
        if (add_to(self->stats, s_tls_plaintext, PyBytes_GET_SIZE(pt)) < 0)
            goto error;
        PyObject *nxt = PyObject_GetAttr(self->stage, s_next);     /* read each time, as TlsStage.data */
        if (nxt == NULL)
            goto error;
        PyObject *call[7] = {nxt, conn, d, pt, args[3], args[4], args[5]};
        PyObject *r = PyObject_VectorcallMethod(s_data, call, 7 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
        Py_DECREF(nxt);
        if (r == NULL)
            goto error;
        Py_DECREF(r);
    }
    Py_DECREF(pts);
    if (p == n)
        Py_RETURN_NONE;
    {
        PyObject *rest = PyBytes_FromStringAndSize(PyBytes_AS_STRING(data) + p, n - p);
        PyObject *sd = PyLong_FromLong(side);
        if (rest == NULL || sd == NULL) {
            Py_XDECREF(rest);
            Py_XDECREF(sd);
            return NULL;
        }
        PyObject *call[8] = {self->stage, conn, d, sd, rest, args[3], args[4], args[5]};
        PyObject *r = PyObject_VectorcallMethod(s_rest, call, 8 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
        Py_DECREF(rest);
        Py_DECREF(sd);
        return r;
    }
error:
    Py_DECREF(pts);
    return NULL;
}

static PyObject *entry_gap(Entry *self, PyObject *args, PyObject *kw) {
    if (self->stage == NULL) {
        PyErr_SetString(PyExc_ValueError, "the entry has no stage");
        return NULL;
    }
    PyObject *m = PyObject_GetAttr(self->stage, s_gap);
    if (m == NULL)
        return NULL;
    PyObject *r = PyObject_Call(m, args, kw);
    Py_DECREF(m);
    return r;
}

static PyMethodDef entry_methods[] = {
    {"data", (PyCFunction)(void (*)(void))entry_data, METH_FASTCALL,
     "data(conn, d, data, file, packet, ts): the next in-order bytes of a direction"},
    {"gap", (PyCFunction)(void (*)(void))entry_gap, METH_VARARGS | METH_KEYWORDS, "gap(...): as stage.gap"},
    {NULL, NULL, 0, NULL},
};

static PyObject *entry_repr(PyObject *self) {
    (void)self;
    return PyUnicode_FromString("<Entry>");
}

static PyTypeObject EntryType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "kwire_cli.tls._records13.Entry",
    .tp_basicsize = sizeof(Entry),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Entry(stage, direct, stats): a capture's TLS stage's data path, in C",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)entry_init,
    .tp_dealloc = (destructor)entry_dealloc,
    .tp_methods = entry_methods,
    .tp_repr = entry_repr,
};

static PyMethodDef module_methods[] = {
    {"derive", (PyCFunction)(void (*)(void))derive, METH_FASTCALL,
     "derive(cipher, hash, secret, key_info, iv_info) -> (Opener, key, iv) of a TLS 1.3 traffic secret"},
    {NULL, NULL, 0, NULL},
};

static PyMethodDef opener_methods[] = {
    {"open", (PyCFunction)opener_open, METH_VARARGS,
     "open(seq, body, header) -> the plaintext, or None when the record does not authenticate"},
    {"opens", (PyCFunction)(void (*)(void))opener_opens, METH_FASTCALL,
     "opens(data, p, seq) -> (p, seq, [inner plaintext, ...]) of the records that authenticate"},
    {"records", (PyCFunction)(void (*)(void))opener_records, METH_FASTCALL,
     "records(data, p, seq, pos, d, out, plaintext_type) -> (p, seq, pos, plaintext_bytes, stop_plaintext)"},
    {"attach", (PyCFunction)(void (*)(void))opener_attach, METH_FASTCALL,
     "attach(seq, pos, d): hold a direction's record state from here"},
    {"feed", (PyCFunction)(void (*)(void))opener_feed, METH_FASTCALL,
     "feed(data, out, plaintext_type=None) -> where the records read from the state held stop"},
    {"detach", (PyCFunction)opener_detach, METH_NOARGS,
     "detach() -> (seq, pos, records, decrypted, plaintext, fed) of the direction held since attach"},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef opener_members[] = {
    {"max_len", T_PYSSIZET, offsetof(Opener, max_len), READONLY,
     "records with a longer body are left to the Python path (records() stops before them)"},
    {NULL, 0, 0, 0, NULL},
};

static PyObject *opener_repr(PyObject *self) {
    (void)self;
    return PyUnicode_FromString("<Opener>");
}

static PyTypeObject OpenerType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "kwire_cli.tls._records13.Opener",
    .tp_basicsize = sizeof(Opener),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Opener(cipher, key, iv): TLS 1.3 records of one traffic key",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)opener_init,
    .tp_dealloc = (destructor)opener_dealloc,
    .tp_methods = opener_methods,
    .tp_members = opener_members,
    .tp_repr = opener_repr,
};

static int load_libcrypto(void) {
    static const char *names[] = {"libcrypto.so.3", NULL};
    void *h = NULL;
    for (int i = 0; names[i] && !h; i++)
        h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (h == NULL)
        return 0;
#define SYM(var, name)                                  \
    do {                                                \
        *(void **)(&var) = dlsym(h, name);              \
        if (var == NULL)                                \
            return 0;                                   \
    } while (0)
    SYM(p_ctx_new, "EVP_CIPHER_CTX_new");
    SYM(p_ctx_free, "EVP_CIPHER_CTX_free");
    SYM(p_decrypt_init, "EVP_DecryptInit_ex");
    SYM(p_decrypt_update, "EVP_DecryptUpdate");
    SYM(p_decrypt_final, "EVP_DecryptFinal_ex");
    SYM(p_ctrl, "EVP_CIPHER_CTX_ctrl");
    SYM(p_cipher_fetch, "EVP_CIPHER_fetch");
    SYM(p_mac_fetch, "EVP_MAC_fetch");
    SYM(p_mac_ctx_new, "EVP_MAC_CTX_new");
    SYM(p_mac_ctx_free, "EVP_MAC_CTX_free");
    SYM(p_mac_set_params, "EVP_MAC_CTX_set_params");
    SYM(p_mac_init, "EVP_MAC_init");
    SYM(p_mac_update, "EVP_MAC_update");
    SYM(p_mac_final, "EVP_MAC_final");
#undef SYM
    aes_128_gcm = p_cipher_fetch(NULL, "AES-128-GCM", NULL);
    aes_256_gcm = p_cipher_fetch(NULL, "AES-256-GCM", NULL);
    chacha20_poly1305 = p_cipher_fetch(NULL, "ChaCha20-Poly1305", NULL);
    if (aes_128_gcm == NULL || aes_256_gcm == NULL || chacha20_poly1305 == NULL)
        return 0;
    EVP_MAC *mac = p_mac_fetch(NULL, "HMAC", NULL);
    if (mac == NULL)
        return 0;
    static char sha256[] = "SHA256", sha384[] = "SHA384";
    EVP_MAC_CTX **tmpls[2] = {&hmac_sha256, &hmac_sha384};
    char *digests[2] = {sha256, sha384};
    for (int i = 0; i < 2; i++) {
        OSSL_PARAM params[2] = {{"digest", OSSL_PARAM_UTF8_STRING, digests[i], strlen(digests[i]), (size_t)-1},
                                {NULL, 0, NULL, 0, 0}};
        *tmpls[i] = p_mac_ctx_new(mac);
        if (*tmpls[i] == NULL || p_mac_set_params(*tmpls[i], params) != 1)
            return 0;
    }
    return 1;
}

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT, "_records13", "TLS 1.3 application data records in one native call", -1, module_methods,
};

PyMODINIT_FUNC PyInit__records13(void) {
    if (!load_libcrypto()) {
        PyErr_SetString(PyExc_ImportError, "libcrypto.so.3 (OpenSSL 3) not found");
        return NULL;
    }
    if (PyType_Ready(&OpenerType) < 0 || PyType_Ready(&EntryType) < 0)
        return NULL;
    s_is_request = PyUnicode_InternFromString("is_request");
    s_tls_bytes = PyUnicode_InternFromString("tls_bytes");
    s_tls_plaintext = PyUnicode_InternFromString("tls_plaintext");
    s_next = PyUnicode_InternFromString("next");
    s_data = PyUnicode_InternFromString("data");
    s_rest = PyUnicode_InternFromString("rest");
    s_gap = PyUnicode_InternFromString("gap");
    if (!s_is_request || !s_tls_bytes || !s_tls_plaintext || !s_next || !s_data || !s_rest || !s_gap)
        return NULL;
    PyObject *m = PyModule_Create(&moduledef);
    if (m == NULL)
        return NULL;
    Py_INCREF(&OpenerType);
    if (PyModule_AddObject(m, "Opener", (PyObject *)&OpenerType) < 0) {
        Py_DECREF(&OpenerType);
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(&EntryType);
    if (PyModule_AddObject(m, "Entry", (PyObject *)&EntryType) < 0) {
        Py_DECREF(&EntryType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
