/* spark-decode's connection pre-pass in C: the TCP connections of a capture's packets from their
 * headers only. The same walk as kwire_cli/capture/headerscan.py's py_tcp_connections (the
 * reference, and the fallback when this is not built), which follows the capture reader
 * (reader._pcap_records, reader._pcapng_records, linklayer.packets) step for step; the module
 * docstring there says what is walked and when the answer is None (the caller then reads the
 * bytes with the full reader).
 *
 * Bounded: every step of a walk moves forward by at least 12 bytes (a pcap record header, a pcapng
 * block) or 8 (an IPv6 extension header), inside [start, end) of the buffer; nothing is allocated
 * per packet: a direct-mapped table of the keys seen (4,096 slots, allocated once per call) stops
 * repeats and adds up their bytes, and a Python key object is made only when a key enters or
 * leaves the table (its bytes are then added to the dict's count). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define NSLOTS 4096      /* the table of keys seen: a power of two */
#define MAX_IFACES 4096  /* pcapng interfaces in one section; more: None (the full reader) */

enum { WALK_DONE = 0, WALK_STOPPED = 1, WALK_GIVE_UP = 2, WALK_ERROR = -1 };

typedef struct {
    unsigned char len; /* 0: empty */
    unsigned char k[36]; /* address bytes (8 or 32), then the source and destination ports */
    uint64_t bytes;      /* captured TCP bytes of the key's packets not yet added to the dict */
} slot_t;

typedef struct {
    PyObject *dict; /* key -> captured TCP bytes (header and payload) */
    slot_t *slots;
    uint64_t hard_limit;
    int le;                 /* pcapng: the section's byte order */
    Py_ssize_t nif;
    uint16_t if_lt[MAX_IFACES];
    uint32_t if_snap[MAX_IFACES];
} scan_t;

static inline uint16_t be16(const unsigned char *p) { return (uint16_t)((p[0] << 8) | p[1]); }

static inline uint32_t rd32(const unsigned char *p, int le) {
    return le ? (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24)
              : ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | (uint32_t)p[3];
}

static inline uint16_t rd16(const unsigned char *p, int le) {
    return le ? (uint16_t)(p[0] | (p[1] << 8)) : (uint16_t)((p[0] << 8) | p[1]);
}

/* a slot's key and bytes, added to the dict */
static int flush_slot(scan_t *s, slot_t *sl) {
    int alen = sl->len - 4;
    PyObject *key = Py_BuildValue("(y#ii)", (const char *)sl->k, (Py_ssize_t)alen, (int)be16(sl->k + alen),
                                  (int)be16(sl->k + alen + 2));
    if (key == NULL)
        return -1;
    uint64_t total = sl->bytes;
    PyObject *old = PyDict_GetItemWithError(s->dict, key);
    if (old == NULL && PyErr_Occurred()) {
        Py_DECREF(key);
        return -1;
    }
    if (old != NULL)
        total += PyLong_AsUnsignedLongLong(old);
    PyObject *v = PyLong_FromUnsignedLongLong(total);
    int r = v == NULL ? -1 : PyDict_SetItem(s->dict, key, v);
    Py_XDECREF(v);
    Py_DECREF(key);
    sl->bytes = 0;
    return r;
}

/* the key (addr, sport, dport) of a packet with ``nbytes`` captured TCP bytes: counted in the
 * table, the slot's previous key flushed to the dict when another takes its place */
static int add_key(scan_t *s, const unsigned char *addr, int alen, const unsigned char *ports, uint64_t nbytes) {
    unsigned char k[36];
    int n = alen + 4;
    memcpy(k, addr, (size_t)alen);
    memcpy(k + alen, ports, 4);
    uint32_t h = 2166136261u; /* FNV-1a */
    for (int i = 0; i < n; i++)
        h = (h ^ k[i]) * 16777619u;
    slot_t *sl = &s->slots[h & (NSLOTS - 1)];
    if (sl->len == n && memcmp(sl->k, k, (size_t)n) == 0) {
        sl->bytes += nbytes;
        return 0;
    }
    if (sl->len && flush_slot(s, sl) < 0)
        return -1;
    sl->len = (unsigned char)n;
    memcpy(sl->k, k, (size_t)n);
    sl->bytes = nbytes;
    return 0;
}

static inline int vlan_type(unsigned et) { return et == 0x8100 || et == 0x88A8 || et == 0x9100 || et == 0x9200; }

/* the packet b[off:end) of link type lt: its key, if the capture reader yields a Packet for it */
static int packet_key(scan_t *s, unsigned lt, const unsigned char *b, Py_ssize_t off, Py_ssize_t end) {
    unsigned ver;
    /* ---- link layer -> IP version */
    if (lt == 1 || lt == 113 || lt == 276) {
        Py_ssize_t hl = lt == 1 ? 14 : lt == 113 ? 16 : 20;
        if (end - off < hl)
            return 0;
        unsigned et = be16(b + off + (lt == 1 ? 12 : lt == 113 ? 14 : 0));
        off += hl;
        while (vlan_type(et) && end - off >= 4) {
            et = be16(b + off + 2);
            off += 4;
        }
        ver = et == 0x0800 ? 4 : et == 0x86DD ? 6 : 0;
    } else if (lt == 101 || lt == 12 || lt == 14 || lt == 228 || lt == 229) {
        if (end <= off)
            return 0;
        ver = b[off] >> 4;
    } else if (lt == 0 || lt == 108) {
        if (end - off < 4)
            return 0;
        uint32_t fam;
        if (lt == 108) {
            fam = rd32(b + off, 0);
        } else {
            fam = rd32(b + off, 1);
            if (fam > 0xFFFF)
                fam = rd32(b + off, 0);
        }
        off += 4;
        ver = fam == 2 ? 4 : (fam == 10 || fam == 24 || fam == 28 || fam == 30) ? 6 : 0;
    } else {
        return 0; /* a link type the reader does not know: its packets are skipped */
    }
    /* ---- network layer */
    const unsigned char *addr;
    int alen;
    if (ver == 4) {
        if (end - off < 20)
            return 0;
        unsigned vihl = b[off];
        Py_ssize_t ihl = (Py_ssize_t)(vihl & 15) << 2;
        if ((vihl >> 4) != 4 || ihl < 20 || (be16(b + off + 6) & 0x3FFF) || b[off + 9] != 6 || end - off < ihl)
            return 0;
        addr = b + off + 12;
        alen = 8;
        off += ihl;
    } else if (ver == 6) {
        if (end - off < 40)
            return 0;
        unsigned nh = b[off + 6];
        addr = b + off + 8;
        alen = 32;
        off += 40;
        while (nh != 6) {
            if (end - off < 8)
                return 0;
            if (nh == 0 || nh == 43 || nh == 60 || nh == 135 || nh == 139 || nh == 140) {
                Py_ssize_t hl = ((Py_ssize_t)b[off + 1] + 1) << 3;
                nh = b[off];
                off += hl;
            } else if (nh == 44) { /* fragment */
                if (be16(b + off + 2) & 0xFFF9)
                    return 0;
                nh = b[off];
                off += 8;
            } else if (nh == 51) { /* AH */
                Py_ssize_t hl = ((Py_ssize_t)b[off + 1] + 2) << 2;
                nh = b[off];
                off += hl;
            } else {
                return 0;
            }
        }
    } else {
        return 0;
    }
    /* ---- TCP */
    if (end - off < 20)
        return 0;
    if (((be16(b + off + 12) >> 10) & 0x3C) < 20)
        return 0;
    return add_key(s, addr, alen, b + off, (uint64_t)(end - off));
}

static int pcap_walk(scan_t *s, const unsigned char *b, Py_ssize_t pos, Py_ssize_t end, int le, Py_ssize_t hlen,
                     uint64_t limit, unsigned lt) {
    while (end - pos >= hlen) { /* fewer: the end, or a cut record header (the reader stops) */
        uint32_t caplen = rd32(b + pos + 8, le);
        pos += hlen;
        if (caplen > limit) { /* over the hard limit: skipped (a cut one ends the walk) */
            pos += (Py_ssize_t)caplen;
            continue;
        }
        if ((Py_ssize_t)caplen > end - pos)
            return WALK_STOPPED; /* a cut record: the reader stops */
        if (packet_key(s, lt, b, pos, pos + (Py_ssize_t)caplen) < 0)
            return WALK_ERROR;
        pos += (Py_ssize_t)caplen;
    }
    return WALK_DONE;
}

static const unsigned char SHB[4] = {0x0A, 0x0D, 0x0D, 0x0A};

static int pcapng_walk(scan_t *s, const unsigned char *b, Py_ssize_t pos, Py_ssize_t end) {
    for (;;) {
        Py_ssize_t left = end - pos;
        if (left < 12) {
            if (left == 0)
                return WALK_DONE;
            return WALK_STOPPED; /* a cut block (a cut section header too: its magic is bad, below) */
        }
        if (memcmp(b + pos, SHB, 4) == 0) {
            const unsigned char *m = b + pos + 8;
            if (m[0] == 0x4D && m[1] == 0x3C && m[2] == 0x2B && m[3] == 0x1A)
                s->le = 1;
            else if (m[0] == 0x1A && m[1] == 0x2B && m[2] == 0x3C && m[3] == 0x4D)
                s->le = 0;
            else /* the reader raises at the file's first byte (no packet yet), else stops */
                return WALK_STOPPED;
            s->nif = 0;
        }
        int le = s->le;
        uint32_t t = rd32(b + pos, le);
        uint32_t blen = rd32(b + pos + 4, le);
        if (blen < 12 || blen % 4)
            return WALK_STOPPED;
        if (blen > s->hard_limit) { /* skipped unread (a cut one ends the walk) */
            if (left < (Py_ssize_t)blen)
                return WALK_STOPPED;
            pos += (Py_ssize_t)blen;
            continue;
        }
        if (left < (Py_ssize_t)blen || rd32(b + pos + blen - 4, le) != blen)
            return WALK_STOPPED;
        if (t == 6 || t == 2) { /* Enhanced Packet Block; obsolete Packet Block */
            if (blen >= 32) {
                uint32_t ifid = t == 6 ? rd32(b + pos + 8, le) : rd16(b + pos + 8, le);
                uint32_t caplen = rd32(b + pos + 20, le);
                /* (a record over its interface's snap length is read whole, as the reader does) */
                if (caplen <= blen - 32 && (Py_ssize_t)ifid < s->nif)
                    if (packet_key(s, s->if_lt[ifid], b, pos + 28, pos + 28 + (Py_ssize_t)caplen) < 0)
                        return WALK_ERROR;
            }
        } else if (t == 3) { /* Simple Packet Block: interface 0 */
            if (s->nif) {
                uint32_t caplen = rd32(b + pos + 8, le);
                uint32_t room = blen >= 16 ? blen - 16 : 0;
                if (caplen > room)
                    caplen = room;
                if (s->if_snap[0] && caplen > s->if_snap[0])
                    caplen = s->if_snap[0];
                if (packet_key(s, s->if_lt[0], b, pos + 12, pos + 12 + (Py_ssize_t)caplen) < 0)
                    return WALK_ERROR;
            }
        } else if (t == 1 && blen >= 20) { /* Interface Description Block */
            if (s->nif == MAX_IFACES)
                return WALK_GIVE_UP;
            uint32_t snap = rd32(b + pos + 12, le);
            s->if_lt[s->nif] = rd16(b + pos + 8, le);
            s->if_snap[s->nif] = snap < s->hard_limit ? snap : 0;
            s->nif++;
        }
        pos += (Py_ssize_t)blen;
    }
}

/* the pcap magic: 1 and its byte order and record header length, or 0 */
static int pcap_magic(const unsigned char *m, int *le, Py_ssize_t *hlen) {
    static const unsigned char tab[6][4] = {{0xD4, 0xC3, 0xB2, 0xA1}, {0xA1, 0xB2, 0xC3, 0xD4},
                                            {0x4D, 0x3C, 0xB2, 0xA1}, {0xA1, 0xB2, 0x3C, 0x4D},
                                            {0x34, 0xCD, 0xB2, 0xA1}, {0xA1, 0xB2, 0xCD, 0x34}};
    for (int i = 0; i < 6; i++)
        if (memcmp(m, tab[i], 4) == 0) {
            *le = !(i & 1);
            *hlen = i >= 4 ? 24 : 16;
            return 1;
        }
    return 0;
}

static PyObject *tcp_connections(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *bufobj, *hdrobj;
    Py_ssize_t start, end;
    unsigned long long hard_limit;
    if (!PyArg_ParseTuple(args, "OnnOK", &bufobj, &start, &end, &hdrobj, &hard_limit))
        return NULL;
    Py_buffer buf, hdr;
    hdr.obj = NULL;
    if (PyObject_GetBuffer(bufobj, &buf, PyBUF_SIMPLE) < 0)
        return NULL;
    int have_hdr = hdrobj != Py_None;
    if (have_hdr && PyObject_GetBuffer(hdrobj, &hdr, PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(&buf);
        return NULL;
    }
    PyObject *result = NULL;
    scan_t *s = PyMem_Calloc(1, sizeof(scan_t));
    slot_t *slots = PyMem_Calloc(NSLOTS, sizeof(slot_t));
    PyObject *dict = PyDict_New();
    if (s == NULL || slots == NULL || dict == NULL) {
        if (!PyErr_Occurred())
            PyErr_NoMemory();
        goto done;
    }
    s->dict = dict;
    s->slots = slots;
    s->hard_limit = hard_limit;
    s->le = 1;
    const unsigned char *b = buf.buf;
    if (end > buf.len)
        end = buf.len;
    if (start < 0)
        start = 0;
    /* the file header: the header context, or the first bytes of the range */
    const unsigned char *h = have_hdr ? hdr.buf : b + start;
    Py_ssize_t hn = have_hdr ? hdr.len : (end - start < 24 ? (end > start ? end - start : 0) : 24);
    int le, r;
    Py_ssize_t hlen;
    if (hn >= 4 && pcap_magic(h, &le, &hlen)) {
        if (hn < 24 || (have_hdr && hn != 24))
            goto give_up; /* the reader raises: file header cut short */
        /* a record over the snap length is read whole, as the reader does: only the hard limit */
        uint64_t limit = hard_limit;
        unsigned lt = rd32(h + 20, le) & 0xFFFF;
        r = pcap_walk(s, b, have_hdr ? start : start + 24, end, le, hlen, limit, lt);
    } else if (hn >= 4 && memcmp(h, SHB, 4) == 0) {
        if (have_hdr) {
            r = pcapng_walk(s, h, 0, hn);
            if (r == WALK_ERROR)
                goto done;
            if (r != WALK_DONE)
                goto give_up;
        }
        r = pcapng_walk(s, b, start, end);
    } else {
        goto give_up; /* gzip, or not a capture */
    }
    if (r == WALK_ERROR)
        goto done;
    if (r == WALK_GIVE_UP)
        goto give_up;
    for (int i = 0; i < NSLOTS; i++)
        if (slots[i].len && flush_slot(s, &slots[i]) < 0)
            goto done;
    result = dict;
    dict = NULL;
    goto done;
give_up:
    result = Py_None;
    Py_INCREF(result);
done:
    Py_XDECREF(dict);
    PyMem_Free(slots);
    PyMem_Free(s);
    if (have_hdr)
        PyBuffer_Release(&hdr);
    PyBuffer_Release(&buf);
    return result;
}

static PyMethodDef methods[] = {
    {"tcp_connections", tcp_connections, METH_VARARGS,
     "tcp_connections(buf, start, end, header, hard_record_limit) -> dict of (address bytes, source port, "
     "destination port) -> captured TCP bytes | None: kwire_cli.capture.headerscan.py_tcp_connections in C."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_headerscan",
    "Optional native walk of capture headers for spark-decode's connection pre-pass.", -1, methods,
};

PyMODINIT_FUNC PyInit__headerscan(void) { return PyModule_Create(&module_def); }
