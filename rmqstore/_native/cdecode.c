/* rmqstore._native._cdecode: the full decode of a segment's records into columns, compiled.
 *
 * decode(buf, pos, base, ...) walks buf from the record boundary `pos` exactly as
 * rmqstore.format.walk.step would (the same decision table, step.h's rmq_step: blank, unwritten,
 * out of bytes, corrupt; lenient or strict; the body CRC on request) and returns every field that
 * rmqstore.format.record.decode_record gives, one column per field, plus where and why the
 * walk stopped.  Two passes:
 *
 *   1. the walk, with the GIL released: every length is checked against the readable
 *      limit and the record's declared size before anything is read, topic and
 *      properties are validated as UTF-8 (Python's strict rules), the CRC is computed;
 *      each record leaves one small struct (positions and lengths);
 *   2. with the GIL, the Python objects: int columns as array('i') / array('q'), hosts
 *      through the caller's `host(ip, port)` (once per distinct host: a small cache), and
 *      topic / properties / body either as lists of str / bytes, or -- `joined=True`, for
 *      Arrow -- as one bytes object per field with int32 offsets (msg_id too).
 *
 * The Py_buffer of `buf` is held across both passes, so an mmap cannot be closed under
 * the walk.  Garbage never crashes: it ends the walk as `corrupt`, as in Python.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "crc32.h"
#include "record.h"
#include "step.h"
#include "utf8.h"

#define DEC_HEAD 40 /* total .. sys_flag */

/* step.h's end kinds, with 0 (RMQ_STOPPED, which the decode never ends with) meaning a record */
enum { K_NONE = 0, K_BLANK = RMQ_BLANK, K_UNWRITTEN = RMQ_UNWRITTEN, K_OUT_OF_BYTES = RMQ_OUT_OF_BYTES,
       K_CORRUPT = RMQ_CORRUPT };
static const char *const KIND_NAMES[] = {NULL, "blank", "unwritten", "out_of_bytes", "corrupt"};

typedef struct {
    Py_ssize_t pos, body_at, topic_at, props_at;
    int32_t total, body_len, topic_len, props_len, sys_flag;
    int8_t crc_ok; /* -1 not computed, 0, 1 */
} rec_t;


/* walk.step at `pos` (step.h): K_NONE and *r filled for a message record, else the end's kind */
static int step_at(const unsigned char *b, Py_ssize_t size, Py_ssize_t lim, Py_ssize_t pos, long long base,
                   int crc, int strict, rec_t *r, int32_t *blank_size)
{
    rmq_step_t s;
    rmq_step(b, size, lim, pos, base, crc, strict, &s);
    if (s.kind == RMQ_BLANK)
        *blank_size = (int32_t)s.size;
    if (s.kind != RMQ_RECORD)
        return s.kind;
    r->pos = pos;
    r->total = (int32_t)s.size;
    r->sys_flag = s.sys_flag;
    r->body_at = s.body_at;
    r->body_len = s.body_len;
    r->topic_at = s.topic_at;
    r->topic_len = s.topic_len;
    r->props_at = s.props_at;
    r->props_len = s.props_len;
    r->crc_ok = (int8_t)s.crc_ok;
    return K_NONE;
}

typedef struct {
    rec_t *recs;
    Py_ssize_t n, cap;
    Py_ssize_t end;
    int kind;
    int32_t blank_size;
    int oom;
} walk_t;

static void walk(const unsigned char *b, Py_ssize_t size, Py_ssize_t lim, Py_ssize_t pos, long long base,
                 long long stop_at, int crc, int strict, Py_ssize_t max_records, long long max_bytes, walk_t *w)
{
    long long bytes = 0;
    for (;;) {
        if (stop_at >= 0 && stop_at <= pos && pos < lim) {
            w->kind = K_NONE;
            break;
        }
        if (w->n == w->cap) {
            Py_ssize_t cap = w->cap ? w->cap * 2 : 1024;
            rec_t *grown = realloc(w->recs, (size_t)cap * sizeof(rec_t));
            if (grown == NULL) {
                w->oom = 1;
                w->kind = K_NONE;
                break;
            }
            w->recs = grown;
            w->cap = cap;
        }
        int kind = step_at(b, size, lim, pos, base, crc, strict, &w->recs[w->n], &w->blank_size);
        if (kind != K_NONE) {
            w->kind = kind;
            break;
        }
        w->n++;
        bytes += w->recs[w->n - 1].total;
        pos += w->recs[w->n - 1].total;
        if ((max_records >= 0 && w->n >= max_records) || (max_bytes >= 0 && bytes >= max_bytes)) {
            w->kind = K_NONE;
            break;
        }
    }
    w->end = pos;
}

/* -- pass 2: columns ------------------------------------------------------------------- */

#define HOST_CACHE 256
typedef struct {
    unsigned char key[21]; /* 16 ip bytes, 4 port bytes, v6 flag */
    PyObject *value;
} host_slot;

static PyObject *host_value(host_slot *cache, PyObject *host_fn, const unsigned char *at, int v6)
{
    unsigned char key[21] = {0};
    int ip_len = v6 ? 16 : 4;
    memcpy(key, at, (size_t)ip_len);
    memcpy(key + 16, at + ip_len, 4);
    key[20] = (unsigned char)v6;
    uint32_t h = 2166136261u;
    for (int i = 0; i < 21; i++)
        h = (h ^ key[i]) * 16777619u;
    host_slot *s = &cache[h % HOST_CACHE];
    if (s->value != NULL && memcmp(s->key, key, 21) == 0) {
        Py_INCREF(s->value);
        return s->value;
    }
    PyObject *v = PyObject_CallFunction(host_fn, "y#i", (const char *)at, (Py_ssize_t)ip_len,
                                        (int)rmq_get_i32(at + ip_len));
    if (v == NULL)
        return NULL;
    Py_XDECREF(s->value);
    memcpy(s->key, key, 21);
    Py_INCREF(v);
    s->value = v;
    return v;
}

#define TOPIC_CACHE 64
typedef struct {
    const unsigned char *src;
    Py_ssize_t len;
    PyObject *value;
} topic_slot;

static PyObject *topic_value(topic_slot *cache, const unsigned char *s, Py_ssize_t n)
{
    uint32_t h = 2166136261u;
    for (Py_ssize_t i = 0; i < n; i++)
        h = (h ^ s[i]) * 16777619u;
    topic_slot *t = &cache[h % TOPIC_CACHE];
    if (t->value != NULL && t->len == n && memcmp(t->src, s, (size_t)n) == 0) {
        Py_INCREF(t->value);
        return t->value;
    }
    PyObject *v = PyUnicode_DecodeUTF8((const char *)s, n, "strict");
    if (v == NULL)
        return NULL;
    Py_XDECREF(t->value);
    t->src = s;
    t->len = n;
    Py_INCREF(v);
    t->value = v;
    return v;
}

static PyObject *array_type = NULL; /* array.array */

/* an array(typecode) of n items filled from `data` (machine order) */
static PyObject *make_array(const char *typecode, const void *data, Py_ssize_t nbytes)
{
    PyObject *raw = PyBytes_FromStringAndSize((const char *)data, nbytes);
    if (raw == NULL)
        return NULL;
    PyObject *arr = PyObject_CallFunction(array_type, "sO", typecode, raw);
    Py_DECREF(raw);
    return arr;
}

static int put(PyObject *d, const char *name, PyObject *v)
{
    if (v == NULL)
        return -1;
    int rc = PyDict_SetItemString(d, name, v);
    Py_DECREF(v);
    return rc;
}

/* one var-length field of every record, joined, with n+1 int32 offsets */
static int put_joined(PyObject *d, const char *name, const char *offsets_name, const unsigned char *b,
                      const rec_t *recs, Py_ssize_t n, int which)
{
    long long total = 0;
    for (Py_ssize_t i = 0; i < n; i++)
        total += which == 0 ? recs[i].body_len : which == 1 ? recs[i].topic_len : recs[i].props_len;
    if (total > INT32_MAX) {
        PyErr_Format(PyExc_OverflowError, "%s: %lld bytes do not fit int32 offsets; decode fewer records", name,
                     total);
        return -1;
    }
    PyObject *data = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)total);
    int32_t *off = PyMem_Malloc((size_t)(n + 1) * sizeof(int32_t));
    if (data == NULL || off == NULL) {
        Py_XDECREF(data);
        PyMem_Free(off);
        if (!PyErr_Occurred())
            PyErr_NoMemory();
        return -1;
    }
    unsigned char *out = (unsigned char *)PyBytes_AS_STRING(data);
    int32_t at = 0;
    off[0] = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        const rec_t *r = &recs[i];
        Py_ssize_t from = which == 0 ? r->body_at : which == 1 ? r->topic_at : r->props_at;
        int32_t len = which == 0 ? r->body_len : which == 1 ? r->topic_len : r->props_len;
        memcpy(out + at, b + from, (size_t)len);
        at += len;
        off[i + 1] = at;
    }
    int rc = put(d, name, data);
    if (rc == 0)
        rc = put(d, offsets_name, make_array("i", off, (n + 1) * (Py_ssize_t)sizeof(int32_t)));
    PyMem_Free(off);
    return rc;
}

/* msg_id of every record: store ip + port + physical offset field, upper-case hex, joined */
static int put_msg_ids(PyObject *d, const unsigned char *b, const rec_t *recs, Py_ssize_t n)
{
    static const char HEX[] = "0123456789ABCDEF";
    long long total = 0;
    for (Py_ssize_t i = 0; i < n; i++)
        total += 2 * ((recs[i].sys_flag & RMQ_STOREHOST_V6_FLAG) ? 28 : 16);
    if (total > INT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "msg_id: too many records for int32 offsets");
        return -1;
    }
    PyObject *data = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)total);
    int32_t *off = PyMem_Malloc((size_t)(n + 1) * sizeof(int32_t));
    if (data == NULL || off == NULL) {
        Py_XDECREF(data);
        PyMem_Free(off);
        if (!PyErr_Occurred())
            PyErr_NoMemory();
        return -1;
    }
    char *out = PyBytes_AS_STRING(data);
    int32_t at = 0;
    off[0] = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        const rec_t *r = &recs[i];
        const unsigned char *p = b + r->pos;
        int store_ip = (r->sys_flag & RMQ_STOREHOST_V6_FLAG) ? 16 : 4;
        const unsigned char *host = p + rmq_pos_store_timestamp(r->sys_flag) + 8;
        for (int k = 0; k < store_ip + 4; k++) {
            out[at++] = HEX[host[k] >> 4];
            out[at++] = HEX[host[k] & 15];
        }
        for (int k = 0; k < 8; k++) {
            unsigned char c = p[RMQ_POS_PHYSICALOFFSET + k];
            out[at++] = HEX[c >> 4];
            out[at++] = HEX[c & 15];
        }
        off[i + 1] = at;
    }
    int rc = put(d, "msg_id", data);
    if (rc == 0)
        rc = put(d, "msg_id_offsets", make_array("i", off, (n + 1) * (Py_ssize_t)sizeof(int32_t)));
    PyMem_Free(off);
    return rc;
}

#define NI32 7
#define NI64 6
static const char *const I32_NAMES[NI32] = {"total_size", "magic_code", "body_crc", "queue_id", "flag", "sys_flag",
                                            "reconsume_times"};
static const char *const I64_NAMES[NI64] = {"position", "queue_offset", "physical_offset", "born_timestamp",
                                            "store_timestamp", "prepared_transaction_offset"};

static int build_columns(PyObject *d, const unsigned char *b, const rec_t *recs, Py_ssize_t n, int crc,
                         PyObject *host_fn, int joined, int bodies)
{
    int rc = -1;
    int32_t *i32 = PyMem_Malloc((size_t)(n ? n : 1) * NI32 * sizeof(int32_t));
    int64_t *i64 = PyMem_Malloc((size_t)(n ? n : 1) * NI64 * sizeof(int64_t));
    PyObject *born = PyList_New(n), *store = PyList_New(n);
    PyObject *body = NULL, *topic = NULL, *props = NULL;
    host_slot *hosts = PyMem_Calloc(HOST_CACHE, sizeof(host_slot));
    topic_slot *topics = PyMem_Calloc(TOPIC_CACHE, sizeof(topic_slot));
    if (i32 == NULL || i64 == NULL || born == NULL || store == NULL || hosts == NULL || topics == NULL) {
        if (!PyErr_Occurred())
            PyErr_NoMemory();
        goto done;
    }
    if (!joined) {
        topic = PyList_New(n);
        props = PyList_New(n);
        if (topic == NULL || props == NULL)
            goto done;
        if (bodies && (body = PyList_New(n)) == NULL)
            goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        const rec_t *r = &recs[i];
        const unsigned char *p = b + r->pos;
        int32_t sf = r->sys_flag;
        int born_v6 = (sf & RMQ_BORNHOST_V6_FLAG) != 0, store_v6 = (sf & RMQ_STOREHOST_V6_FLAG) != 0;
        int store_ts_at = rmq_pos_store_timestamp(sf);
        int store_at = store_ts_at + 8;
        int reconsume_at = store_at + rmq_store_size(sf);
        i32[0 * n + i] = r->total;
        i32[1 * n + i] = rmq_get_i32(p + RMQ_POS_MAGIC);
        i32[2 * n + i] = rmq_get_i32(p + RMQ_POS_BODYCRC);
        i32[3 * n + i] = rmq_get_i32(p + RMQ_POS_QUEUEID);
        i32[4 * n + i] = rmq_get_i32(p + RMQ_POS_FLAG);
        i32[5 * n + i] = sf;
        i32[6 * n + i] = rmq_get_i32(p + reconsume_at);
        i64[0 * n + i] = r->pos;
        i64[1 * n + i] = rmq_get_i64(p + RMQ_POS_QUEUEOFFSET);
        i64[2 * n + i] = rmq_get_i64(p + RMQ_POS_PHYSICALOFFSET);
        i64[3 * n + i] = rmq_get_i64(p + RMQ_POS_BORNTIMESTAMP);
        i64[4 * n + i] = rmq_get_i64(p + store_ts_at);
        i64[5 * n + i] = rmq_get_i64(p + reconsume_at + 4);
        PyObject *h = host_value(hosts, host_fn, p + RMQ_POS_BORNHOST, born_v6);
        if (h == NULL)
            goto done;
        PyList_SET_ITEM(born, i, h);
        h = host_value(hosts, host_fn, p + store_at, store_v6);
        if (h == NULL)
            goto done;
        PyList_SET_ITEM(store, i, h);
        if (!joined) {
            PyObject *t = topic_value(topics, b + r->topic_at, r->topic_len);
            if (t == NULL)
                goto done;
            PyList_SET_ITEM(topic, i, t);
            t = PyUnicode_DecodeUTF8((const char *)b + r->props_at, r->props_len, "strict");
            if (t == NULL)
                goto done;
            PyList_SET_ITEM(props, i, t);
            if (body != NULL) {
                t = PyBytes_FromStringAndSize((const char *)b + r->body_at, r->body_len);
                if (t == NULL)
                    goto done;
                PyList_SET_ITEM(body, i, t);
            }
        }
    }
    for (int k = 0; k < NI32; k++)
        if (put(d, I32_NAMES[k], make_array("i", i32 + k * n, n * (Py_ssize_t)sizeof(int32_t))) < 0)
            goto done;
    for (int k = 0; k < NI64; k++)
        if (put(d, I64_NAMES[k], make_array("q", i64 + k * n, n * (Py_ssize_t)sizeof(int64_t))) < 0)
            goto done;
    if (PyDict_SetItemString(d, "born_host", born) < 0 || PyDict_SetItemString(d, "store_host", store) < 0)
        goto done;
    if (crc) {
        PyObject *ok = PyBytes_FromStringAndSize(NULL, n);
        if (ok == NULL)
            goto done;
        for (Py_ssize_t i = 0; i < n; i++)
            PyBytes_AS_STRING(ok)[i] = (char)(recs[i].crc_ok == 1);
        if (put(d, "crc_ok", ok) < 0)
            goto done;
    } else if (PyDict_SetItemString(d, "crc_ok", Py_None) < 0) {
        goto done;
    }
    if (joined) {
        if (bodies) {
            if (put_joined(d, "body", "body_offsets", b, recs, n, 0) < 0)
                goto done;
        } else if (PyDict_SetItemString(d, "body", Py_None) < 0) {
            goto done;
        }
        if (put_joined(d, "topic", "topic_offsets", b, recs, n, 1) < 0 ||
            put_joined(d, "properties", "properties_offsets", b, recs, n, 2) < 0 || put_msg_ids(d, b, recs, n) < 0)
            goto done;
    } else {
        if (PyDict_SetItemString(d, "body", body != NULL ? body : Py_None) < 0 ||
            PyDict_SetItemString(d, "topic", topic) < 0 || PyDict_SetItemString(d, "properties", props) < 0)
            goto done;
    }
    rc = 0;
done:
    PyMem_Free(i32);
    PyMem_Free(i64);
    Py_XDECREF(born);
    Py_XDECREF(store);
    Py_XDECREF(body);
    Py_XDECREF(topic);
    Py_XDECREF(props);
    if (hosts != NULL)
        for (int k = 0; k < HOST_CACHE; k++)
            Py_XDECREF(hosts[k].value);
    if (topics != NULL)
        for (int k = 0; k < TOPIC_CACHE; k++)
            Py_XDECREF(topics[k].value);
    PyMem_Free(hosts);
    PyMem_Free(topics);
    return rc;
}

static PyObject *cdecode_decode(PyObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"buf", "pos", "base", "limit", "stop_at", "crc", "strict", "max_records", "max_bytes",
                             "host", "joined", "bodies", NULL};
    Py_buffer view;
    Py_ssize_t pos = 0, limit = -1, max_records = -1;
    long long base = 0, stop_at = -1, max_bytes = -1;
    int crc = 0, strict = 0, joined = 0, bodies = 1;
    PyObject *host_fn = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "y*|nLnL$ppnLOpp:decode", kwlist, &view, &pos, &base, &limit,
                                     &stop_at, &crc, &strict, &max_records, &max_bytes, &host_fn, &joined,
                                     &bodies))
        return NULL;
    if (host_fn == NULL || !PyCallable_Check(host_fn)) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_TypeError, "decode: host must be a callable host(ip: bytes, port: int)");
        return NULL;
    }
    const unsigned char *b = view.buf;
    Py_ssize_t size = view.len;
    Py_ssize_t lim = (limit < 0 || limit > size) ? size : limit;
    walk_t w = {0};
    Py_BEGIN_ALLOW_THREADS
    walk(b, size, lim, pos, base, stop_at, crc, strict, max_records, max_bytes, &w);
    Py_END_ALLOW_THREADS
    PyObject *d = NULL;
    if (w.oom) {
        PyErr_NoMemory();
        goto fail;
    }
    d = PyDict_New();
    if (d == NULL)
        goto fail;
    if (put(d, "count", PyLong_FromSsize_t(w.n)) < 0 || put(d, "end", PyLong_FromSsize_t(w.end)) < 0)
        goto fail;
    if (w.kind == K_NONE) {
        if (PyDict_SetItemString(d, "kind", Py_None) < 0)
            goto fail;
    } else if (put(d, "kind", PyUnicode_FromString(KIND_NAMES[w.kind])) < 0) {
        goto fail;
    }
    if (put(d, "blank_size", PyLong_FromLong(w.kind == K_BLANK ? w.blank_size : 0)) < 0)
        goto fail;
    if (build_columns(d, b, w.recs, w.n, crc, host_fn, joined, bodies) < 0)
        goto fail;
    free(w.recs);
    PyBuffer_Release(&view);
    return d;
fail:
    free(w.recs);
    Py_XDECREF(d);
    PyBuffer_Release(&view);
    return NULL;
}

/* -- record_facts: what verify's bulk pass needs of a run of records ------------------------
 *
 * record_facts(buf, base, start, end) -> (count, stop, starts, max_store_ts, flagged)
 *
 * Follows the records of buf from the record boundary `start` by their sizes, up to `end`, and
 * returns, with the GIL released: how many whole records it took, the position after the last,
 * their physical offsets (base + position) as native int64 bytes, the largest STORETIMESTAMP
 * (None: no record), and `flagged`: the position of the record it stopped at because its body
 * CRC does not match or its PHYSICALOFFSET field names another offset (a record verify's rules
 * must see alone; None when it stopped for another reason: `end`, a record not whole before it,
 * anything that is not a message record -- the callers' walks word those).
 * Every read is checked against `end` and the record's declared size; anything odd stops it.
 */
typedef struct {
    Py_ssize_t count, stop, flagged; /* flagged: -1, or the position of the record it stopped at */
    int64_t max_ts;
    int64_t *starts;
} facts_t;

static void facts_run(const unsigned char *b, Py_ssize_t end, Py_ssize_t pos, int64_t base, facts_t *f)
{
    while (pos >= 0 && pos + DEC_HEAD <= end) {
        const unsigned char *r = b + pos;
        int64_t total = rmq_get_i32(r + RMQ_POS_TOTALSIZE);
        int32_t magic = rmq_get_i32(r + RMQ_POS_MAGIC);
        if ((magic != RMQ_MESSAGE_MAGIC_CODE && magic != RMQ_MESSAGE_MAGIC_CODE_V2) || total < RMQ_MIN_RECORD_SIZE || total > end - pos)
            break;
        int32_t sys_flag = rmq_get_i32(r + RMQ_POS_SYSFLAG);
        int64_t ts_at = rmq_pos_store_timestamp(sys_flag);
        int64_t body_at = rmq_pos_body_length(sys_flag) + 4;
        if (body_at > total)
            break;
        int64_t body_len = rmq_get_i32(r + body_at - 4);
        if (body_len < 0 || body_len > total - body_at)
            break;
        int64_t ts = rmq_get_i64(r + ts_at);
        int64_t crc = (int64_t)(rmq_crc32(0, r + body_at, (size_t)body_len) & 0x7FFFFFFFu);
        int64_t phys = base + pos;
        if (crc != (int64_t)rmq_get_i32(r + RMQ_POS_BODYCRC) || rmq_get_i64(r + RMQ_POS_PHYSICALOFFSET) != phys) {
            f->flagged = pos;
            break;
        }
        if (f->count == 0 || ts > f->max_ts)
            f->max_ts = ts;
        f->starts[f->count++] = phys;
        pos += total;
    }
    f->stop = pos;
}

static PyObject *cdecode_record_facts(PyObject *self, PyObject *args)
{
    Py_buffer view;
    long long base;
    Py_ssize_t start, end;
    if (!PyArg_ParseTuple(args, "y*Lnn:record_facts", &view, &base, &start, &end))
        return NULL;
    if (end > view.len)
        end = view.len;
    facts_t f = {0};
    f.stop = start;
    f.flagged = -1;
    Py_ssize_t cap = (end > start ? end - start : 0) / RMQ_MIN_RECORD_SIZE + 1;
    f.starts = malloc((size_t)cap * sizeof(int64_t));
    if (f.starts == NULL) {
        PyBuffer_Release(&view);
        return PyErr_NoMemory();
    }
    if (start >= 0 && end > start) {
        Py_BEGIN_ALLOW_THREADS
        facts_run(view.buf, end, start, (int64_t)base, &f);
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&view);
    PyObject *max_ts = f.count ? PyLong_FromLongLong(f.max_ts) : (Py_INCREF(Py_None), Py_None);
    PyObject *flagged = f.flagged >= 0 ? PyLong_FromSsize_t(f.flagged) : (Py_INCREF(Py_None), Py_None);
    PyObject *starts = PyBytes_FromStringAndSize((const char *)f.starts, f.count * (Py_ssize_t)sizeof(int64_t));
    PyObject *result = NULL;
    if (max_ts != NULL && flagged != NULL && starts != NULL)
        result = Py_BuildValue("(nnOOO)", f.count, f.stop, starts, max_ts, flagged);
    Py_XDECREF(max_ts);
    Py_XDECREF(flagged);
    Py_XDECREF(starts);
    free(f.starts);
    return result;
}

/* -- unit_run: the valid consume-queue units at the start of a buffer -------------------------
 *
 * unit_run(buf, end, phy_limit) -> (stop, last)
 *
 * Reads the 20-byte units of buf[0:end] (offset int64, size int32, tags int64, big-endian) from
 * the first on, and stops at the first that is not valid (offset < 0 or size <= 0) or points at
 * or past phy_limit, or after the last whole unit: `stop` is its position, `last` the (offset,
 * size) of the unit before it (None: no unit was taken).  The loops of ConsumeQueue.recover and
 * truncate_dirty_logic_files, one call a file.
 */
static PyObject *cdecode_unit_run(PyObject *self, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t end;
    long long limit;
    if (!PyArg_ParseTuple(args, "y*nL:unit_run", &view, &end, &limit))
        return NULL;
    if (end > view.len)
        end = view.len;
    const unsigned char *b = view.buf;
    Py_ssize_t pos = 0;
    int64_t last_offset = 0;
    int32_t last_size = 0;
    int taken = 0;
    Py_BEGIN_ALLOW_THREADS
    for (; end >= 20 && pos <= end - 20; pos += 20) {
        int64_t offset = rmq_get_i64(b + pos);
        int32_t size = rmq_get_i32(b + pos + 8);
        if (offset < 0 || size <= 0 || offset >= (int64_t)limit)
            break;
        last_offset = offset;
        last_size = size;
        taken = 1;
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    if (!taken)
        return Py_BuildValue("(nO)", pos, Py_None);
    return Py_BuildValue("(n(Li))", pos, (long long)last_offset, (int)last_size);
}

static PyMethodDef cdecode_methods[] = {
    {"decode", (PyCFunction)(void (*)(void))cdecode_decode, METH_VARARGS | METH_KEYWORDS,
     "decode(buf, pos=0, base=0, limit=-1, stop_at=-1, *, crc=False, strict=False, max_records=-1,\n"
     "       max_bytes=-1, host, joined=False, bodies=True) -> dict\n\n"
     "Walk buf from the record boundary pos as rmqstore.format.walk.step does and decode every record\n"
     "into columns; 'end'/'kind' say where and why the walk stopped (kind None: stop_at or a max)."},
    {"unit_run", cdecode_unit_run, METH_VARARGS,
     "unit_run(buf, end, phy_limit) -> (stop, (offset, size) of the unit before it or None): the valid consume-queue units before phy_limit at the\n"
     "start of buf[:end] (ConsumeQueue's recovery loops)."},
    {"record_facts", cdecode_record_facts, METH_VARARGS,
     "record_facts(buf, base, start, end) -> (count, stop, starts (int64 bytes), max_store_ts, flagged)\n\n"
     "The physical offsets and newest store timestamp of a run of whole records, up to the first that fails\n"
     "the body CRC or PHYSICALOFFSET check (flagged: its position, else None) -- verify's bulk pass."},
    {NULL, NULL, 0, NULL},
};

static int cdecode_exec(PyObject *m)
{
    rmq_crc_init();
    PyObject *array_mod = PyImport_ImportModule("array");
    if (array_mod == NULL)
        return -1;
    array_type = PyObject_GetAttrString(array_mod, "array");
    Py_DECREF(array_mod);
    if (array_type == NULL)
        return -1;
    return rmq_add_constants(m, "MIN_RECORD_SIZE", (long)RMQ_MIN_RECORD_SIZE, (const char *)NULL);
}

static PyModuleDef_Slot cdecode_slots[] = {
    {Py_mod_exec, cdecode_exec},
    {0, NULL},
};

static struct PyModuleDef cdecode_module = {
    PyModuleDef_HEAD_INIT, "rmqstore._native._cdecode", "The full decode of a segment's records into columns, compiled.", 0,
    cdecode_methods, cdecode_slots, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__cdecode(void)
{
    return PyModuleDef_Init(&cdecode_module);
}
