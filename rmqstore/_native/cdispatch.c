/* rmqstore._native._cdispatch: dispatch of a run of records to consume queues and index, compiled
 * (see rmqstore/common/native.py and the essay of rmqstore/engine/dispatch.py).
 *
 * Two calls per run of records, each with the GIL released while it works (on runs long enough
 * to pay for handing it over):
 *
 *   parse(buf, start, limit, delay_table, max_records, with_keys) -> Batch
 *       walks the records of a mapped commitlog file from `start` (a record boundary) up to
 *       `limit` (the readable end) with the walk's rules (step.h's rmq_step, non-strict, no
 *       CRC), and for each record computes what the pure DispatchRequest carries: the tags
 *       code (Java String.hashCode of TAGS over UTF-16 code units; on SCHEDULE_TOPIC_XXXX
 *       the delivery time of the DELAY level), and, with `with_keys`, the index hash of
 *       "topic#UNIQ_KEY" and of every "topic#k" of KEYS.  The consume-queue units of the
 *       records that build one (not a prepared or rolled-back transaction) are grouped per
 *       topic-queue: contiguous 20-byte units, ready for one write.
 *       It stops at the first position that is not a record it can take whole (Batch.stop:
 *       END -- a blank, unwritten space, the readable end, anything the walk calls corrupt,
 *       which the caller words with walk.step; DEFER -- a record whose DELAY value is not a
 *       plain decimal, left to the pure path; MORE -- max_records reached).
 *
 *   Batch.write_index(n, buf, slots, index_num, begin_ts, end_ts, begin_phy, end_phy,
 *                     slot_count, index_count)
 *       writes the index entries of the first n records into one index file's mapping
 *       (slot + entry chain + header, the bytes IndexFile.put_key writes), and stops before
 *       the first record that finds the file full or whose keys do not all fit (the pure
 *       path then takes that record: it fills the file and creates the next one).
 *
 * Everything read from a buffer is bounds-checked against the buffer; garbage ends a run
 * (END), never a read past the end.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "crc32.h"
#include "record.h"
#include "step.h"
#include "utf8.h"

#define RMQ_CQ_UNIT 20
#define RMQ_INDEX_HEADER 40
#define RMQ_INDEX_SLOT 4
#define RMQ_INDEX_ENTRY 20
#define RMQ_PREFETCH 16
/* below these, a call keeps the GIL: handing it to a busy writer and waiting to get it back (up to
 * the interpreter's switch interval, 5 ms) would cost far more than the work */
#define RMQ_RELEASE_BYTES (64 * 1024)
#define RMQ_RELEASE_RECORDS 128

enum { STOP_END = 0, STOP_DEFER = 1, STOP_MORE = 2 };

static const char SCHEDULE_TOPIC[] = "SCHEDULE_TOPIC_XXXX";

/* -- growable buffers -------------------------------------------------------------------- */

typedef struct {
    unsigned char *p;
    size_t len, cap;
} rbuf;

static int rbuf_grow(rbuf *b, size_t extra)
{
    if (b->len + extra <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + extra) {
        if (cap > SIZE_MAX / 2)
            return -1;
        cap *= 2;
    }
    unsigned char *p = realloc(b->p, cap);
    if (p == NULL)
        return -1;
    b->p = p;
    b->cap = cap;
    return 0;
}

/* -- strings: strict UTF-8 (Python's decoder's rules) and Java's String.hashCode ----------- */


/* continue Java's hashCode h over the UTF-16 code units of valid UTF-8 s[0:n] */
static uint32_t java_hash(uint32_t h, const unsigned char *s, Py_ssize_t n)
{
    Py_ssize_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        if (i + 4 <= n && !((s[i] | s[i + 1] | s[i + 2] | s[i + 3]) & 0x80)) {
            /* four ASCII units at once: h*31^4 + c0*31^3 + c1*31^2 + c2*31 + c3 (a shorter chain) */
            h = h * 923521u + s[i] * 29791u + s[i + 1] * 961u + s[i + 2] * 31u + s[i + 3];
            i += 4;
        } else if (c < 0x80) {
            h = 31 * h + c;
            i += 1;
        } else if (c < 0xE0 && i + 1 < n) {
            h = 31 * h + (((c & 0x1F) << 6) | (s[i + 1] & 0x3F));
            i += 2;
        } else if (c < 0xF0 && i + 2 < n) {
            h = 31 * h + (((c & 0x0F) << 12) | ((s[i + 1] & 0x3Fu) << 6) | (s[i + 2] & 0x3F));
            i += 3;
        } else if (i + 3 < n) {
            uint32_t cp = ((c & 0x07u) << 18) | ((s[i + 1] & 0x3Fu) << 12) | ((s[i + 2] & 0x3Fu) << 6) | (s[i + 3] & 0x3F);
            cp -= 0x10000;
            h = 31 * h + (0xD800 + (cp >> 10));
            h = 31 * h + (0xDC00 + (cp & 0x3FF));
            i += 4;
        } else {
            break; /* (cannot happen after utf8_valid: a sequence is never cut) */
        }
    }
    return h;
}

/* IndexFile#indexKeyHashMethod: abs of the signed hash, 0 when abs overflows */
static int32_t index_hash(uint32_t h)
{
    int32_t s = (int32_t)h;
    if (s == INT32_MIN)
        return 0;
    return s < 0 ? -s : s;
}

/* Python's int() of a DELAY value, for the plain form [+-]?digits (at most 18); 0: not that form */
static int plain_decimal(const unsigned char *s, Py_ssize_t n, int64_t *out)
{
    Py_ssize_t i = 0;
    int neg = 0;
    if (n > 0 && (s[0] == '+' || s[0] == '-')) {
        neg = s[0] == '-';
        i = 1;
    }
    if (n - i < 1 || n - i > 18)
        return 0;
    int64_t v = 0;
    for (; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return 0;
        v = v * 10 + (s[i] - '0');
    }
    *out = neg ? -v : v;
    return 1;
}

/* -- the batch ------------------------------------------------------------------------------ */

typedef struct {
    unsigned char *topic; /* a copy */
    Py_ssize_t topic_len;
    int32_t qid;
    uint64_t hash;
    int64_t first_cq, last_end;
    Py_ssize_t count, run;
    rbuf units;  /* 20-byte consume-queue units, big-endian */
    rbuf recidx; /* int32 (native order): the record number of each unit in the batch */
} group_t;

typedef struct {
    PyObject_HEAD
    Py_ssize_t count;    /* records parsed */
    Py_ssize_t stop_pos; /* position where the run stopped */
    int stop;            /* STOP_END, STOP_DEFER, STOP_MORE */
    Py_ssize_t cap;
    int64_t *pos, *phy, *ts;
    int32_t *sys_flag, *key_start, *key_n;
    rbuf keys; /* int32 index hashes */
    group_t *groups;
    Py_ssize_t ngroups, groups_cap;
    Py_ssize_t *table; /* open addressing: group number + 1, 0 = empty */
    Py_ssize_t table_cap;
    PyObject *group_list; /* built lazily */
} BatchObject;

static PyTypeObject BatchType;

static void batch_free_arrays(BatchObject *b)
{
    free(b->pos);
    free(b->phy);
    free(b->ts);
    free(b->sys_flag);
    free(b->key_start);
    free(b->key_n);
    free(b->keys.p);
    for (Py_ssize_t i = 0; i < b->ngroups; i++) {
        free(b->groups[i].topic);
        free(b->groups[i].units.p);
        free(b->groups[i].recidx.p);
    }
    free(b->groups);
    free(b->table);
    b->pos = b->phy = b->ts = NULL;
    b->sys_flag = b->key_start = b->key_n = NULL;
    b->keys.p = NULL;
    b->groups = NULL;
    b->table = NULL;
    b->ngroups = 0;
}

static void batch_dealloc(BatchObject *b)
{
    batch_free_arrays(b);
    Py_XDECREF(b->group_list);
    Py_TYPE(b)->tp_free((PyObject *)b);
}

static int batch_alloc(BatchObject *b, Py_ssize_t cap)
{
    b->cap = cap;
    size_t n = (size_t)(cap > 0 ? cap : 1);
    b->pos = malloc(n * sizeof(int64_t));
    b->phy = malloc(n * sizeof(int64_t));
    b->ts = malloc(n * sizeof(int64_t));
    b->sys_flag = malloc(n * sizeof(int32_t));
    b->key_start = malloc(n * sizeof(int32_t));
    b->key_n = malloc(n * sizeof(int32_t));
    b->table_cap = 64;
    b->table = calloc((size_t)b->table_cap, sizeof(Py_ssize_t));
    if (!b->pos || !b->phy || !b->ts || !b->sys_flag || !b->key_start || !b->key_n || !b->table)
        return -1;
    return 0;
}

static uint64_t topic_fnv(const unsigned char *topic, Py_ssize_t len)
{
    uint64_t h = 1469598103934665603ULL;
    for (Py_ssize_t i = 0; i < len; i++)
        h = (h ^ topic[i]) * 1099511628211ULL;
    return h;
}

static uint64_t group_hash(uint64_t topic_hash, int32_t qid)
{
    uint64_t h = topic_hash ^ (uint64_t)(uint32_t)qid * 0x9E3779B97F4A7C15ULL;
    return h ^ (h >> 29);
}

static int table_rehash(BatchObject *b)
{
    Py_ssize_t cap = b->table_cap * 2;
    Py_ssize_t *t = calloc((size_t)cap, sizeof(Py_ssize_t));
    if (t == NULL)
        return -1;
    for (Py_ssize_t g = 0; g < b->ngroups; g++) {
        size_t i = (size_t)b->groups[g].hash & (size_t)(cap - 1);
        while (t[i])
            i = (i + 1) & (size_t)(cap - 1);
        t[i] = g + 1;
    }
    free(b->table);
    b->table = t;
    b->table_cap = cap;
    return 0;
}

/* the group of (topic, qid), created if new; NULL when out of memory */
static group_t *find_group(BatchObject *b, const unsigned char *topic, Py_ssize_t len, uint64_t topic_hash,
                           int32_t qid)
{
    uint64_t h = group_hash(topic_hash, qid);
    size_t mask = (size_t)(b->table_cap - 1);
    size_t i = (size_t)h & mask;
    while (b->table[i]) {
        group_t *g = &b->groups[b->table[i] - 1];
        if (g->hash == h && g->qid == qid && g->topic_len == len && memcmp(g->topic, topic, (size_t)len) == 0)
            return g;
        i = (i + 1) & mask;
    }
    if ((b->ngroups + 1) * 2 > b->table_cap) {
        if (table_rehash(b) < 0)
            return NULL;
        mask = (size_t)(b->table_cap - 1);
        i = (size_t)h & mask;
        while (b->table[i])
            i = (i + 1) & mask;
    }
    if (b->ngroups == b->groups_cap) {
        Py_ssize_t cap = b->groups_cap ? b->groups_cap * 2 : 16;
        group_t *gs = realloc(b->groups, (size_t)cap * sizeof(group_t));
        if (gs == NULL)
            return NULL;
        b->groups = gs;
        b->groups_cap = cap;
    }
    group_t *g = &b->groups[b->ngroups];
    memset(g, 0, sizeof(*g));
    g->topic = malloc(len > 0 ? (size_t)len : 1);
    if (g->topic == NULL)
        return NULL;
    memcpy(g->topic, topic, (size_t)len);
    g->topic_len = len;
    g->qid = qid;
    g->hash = h;
    b->ngroups++;
    b->table[i] = b->ngroups;
    return g;
}

static inline int64_t b_phy_of(const unsigned char *r)
{
    return rmq_get_i64(r + RMQ_POS_PHYSICALOFFSET);
}

/* -- parsing one record --------------------------------------------------------------------- */

typedef struct {
    const unsigned char *tags, *keys, *uniq, *delay;
    Py_ssize_t tags_len, keys_len, uniq_len, delay_len;
} props_t;

/* parse_properties' rules: segments split by \x02; name = before the first \x01, value after;
 * both non-empty or the segment is skipped; a later name overwrites an earlier one */
static void scan_properties(const unsigned char *s, Py_ssize_t n, props_t *out)
{
    memset(out, 0, sizeof(*out));
    Py_ssize_t at = 0;
    while (at <= n) {
        const unsigned char *seg = s + at;
        const unsigned char *sep = at < n ? memchr(seg, 0x02, (size_t)(n - at)) : NULL;
        Py_ssize_t seg_len = sep ? sep - seg : n - at;
        const unsigned char *eq = seg_len > 0 ? memchr(seg, 0x01, (size_t)seg_len) : NULL;
        if (eq != NULL) {
            Py_ssize_t i = eq - seg;
            if (i > 0 && i < seg_len - 1) {
                const unsigned char *v = eq + 1;
                Py_ssize_t vlen = seg_len - i - 1;
                if (i == 4 && memcmp(seg, "TAGS", 4) == 0) {
                    out->tags = v;
                    out->tags_len = vlen;
                } else if (i == 4 && memcmp(seg, "KEYS", 4) == 0) {
                    out->keys = v;
                    out->keys_len = vlen;
                } else if (i == 8 && memcmp(seg, "UNIQ_KEY", 8) == 0) {
                    out->uniq = v;
                    out->uniq_len = vlen;
                } else if (i == 5 && memcmp(seg, "DELAY", 5) == 0) {
                    out->delay = v;
                    out->delay_len = vlen;
                }
            }
        }
        if (sep == NULL)
            break;
        at += seg_len + 1;
    }
}

typedef struct {
    const unsigned char *buf;
    Py_ssize_t lim;
    const int64_t *delays;
    Py_ssize_t ndelays;
    int with_keys;
    Py_ssize_t max_records;
    int oom;
} parse_args;

static int add_key(BatchObject *b, uint32_t topic_hash, const unsigned char *k, Py_ssize_t n)
{
    if (rbuf_grow(&b->keys, sizeof(int32_t)) < 0)
        return -1;
    int32_t h = index_hash(java_hash(31 * topic_hash + '#', k, n));
    memcpy(b->keys.p + b->keys.len, &h, sizeof(h));
    b->keys.len += sizeof(h);
    return 0;
}

/* walk and parse from pos on; fills the batch (no Python object is touched: runs without the GIL) */
static void parse_run(BatchObject *b, parse_args *a, Py_ssize_t pos)
{
    const unsigned char *buf = a->buf;
    const Py_ssize_t lim = a->lim;
    const unsigned char *last_topic = NULL;
    Py_ssize_t last_topic_len = -1;
    uint32_t last_topic_hash = 0;
    uint64_t last_topic_fnv = 0;
    b->stop = STOP_END;
    for (;;) {
        if (b->count >= a->max_records) {
            b->stop = STOP_MORE;
            break;
        }
        if (pos < 0 || pos + 8 > lim)
            break;
        rmq_step_t st; /* the one step (step.h): anything but a whole record ends the run */
        rmq_step(buf, lim, lim, pos, 0, 0, 0, &st);
        if (st.kind != RMQ_RECORD)
            break; /* a blank, unwritten space, the readable end or garbage: walk.step says which */
        const unsigned char *r = buf + pos;
        const int64_t total = st.size;
        const int32_t sys_flag = st.sys_flag;
        const unsigned char *topic = buf + st.topic_at;
        const unsigned char *props = buf + st.props_at;
        const int64_t topic_len = st.topic_len, props_len = st.props_len;

        props_t p;
        scan_properties(props, props_len, &p);
        int64_t store_ts = rmq_get_i64(r + rmq_pos_store_timestamp(sys_flag));
        int64_t tags_code = p.tags ? (int32_t)java_hash(0, p.tags, p.tags_len) : 0;
        if (p.delay != NULL && a->ndelays > 0 && topic_len == (int64_t)sizeof(SCHEDULE_TOPIC) - 1 &&
            memcmp(topic, SCHEDULE_TOPIC, sizeof(SCHEDULE_TOPIC) - 1) == 0) {
            int64_t level;
            if (!plain_decimal(p.delay, p.delay_len, &level)) {
                b->stop = STOP_DEFER; /* int()'s other forms: the pure path reads them */
                break;
            }
            if (level > a->ndelays)
                level = a->ndelays;
            if (level > 0 && __builtin_add_overflow(store_ts, a->delays[level - 1], &tags_code)) {
                b->stop = STOP_DEFER;
                break;
            }
        }

        Py_ssize_t n = b->count;
        size_t keys_before = b->keys.len;
        b->key_start[n] = (int32_t)(keys_before / sizeof(int32_t));
        if (!(topic_len == last_topic_len && memcmp(topic, last_topic, (size_t)topic_len) == 0)) {
            last_topic = topic; /* (records of one topic follow each other: hash it once per stretch) */
            last_topic_len = topic_len;
            last_topic_hash = java_hash(0, topic, topic_len);
            last_topic_fnv = topic_fnv(topic, topic_len);
        }
        if (a->with_keys && (p.uniq || p.keys)) {
            uint32_t th = last_topic_hash;
            if (p.uniq && add_key(b, th, p.uniq, p.uniq_len) < 0)
                goto oom;
            if (p.keys) {
                Py_ssize_t i = 0;
                while (i <= p.keys_len) {
                    const unsigned char *sp = i < p.keys_len ? memchr(p.keys + i, ' ', (size_t)(p.keys_len - i)) : NULL;
                    Py_ssize_t end = sp ? sp - p.keys : p.keys_len;
                    if (end > i && add_key(b, th, p.keys + i, end - i) < 0)
                        goto oom;
                    if (sp == NULL)
                        break;
                    i = end + 1;
                }
            }
        }
        b->key_n[n] = (int32_t)((b->keys.len - keys_before) / sizeof(int32_t));

        if (rmq_gets_queue_unit(sys_flag)) {
            int32_t qid = rmq_get_i32(r + RMQ_POS_QUEUEID);
            group_t *g = find_group(b, topic, topic_len, last_topic_fnv, qid);
            if (g == NULL || rbuf_grow(&g->units, RMQ_CQ_UNIT) < 0 || rbuf_grow(&g->recidx, sizeof(int32_t)) < 0)
                goto oom;
            int64_t qoff = rmq_get_i64(r + RMQ_POS_QUEUEOFFSET);
            unsigned char *u = g->units.p + g->units.len;
            memcpy(u, r + RMQ_POS_PHYSICALOFFSET, 8);
            rmq_put_i32(u + 8, (int32_t)total);
            rmq_put_i64(u + 12, tags_code);
            g->units.len += RMQ_CQ_UNIT;
            int32_t ri = (int32_t)n;
            memcpy(g->recidx.p + g->recidx.len, &ri, sizeof(ri));
            g->recidx.len += sizeof(ri);
            /* the run: units whose queue offsets follow each other and whose ends grow, as one
             * write of the pure path's unit-by-unit appends requires */
            int64_t unit_end;
            int ends_ok = !__builtin_add_overflow(b_phy_of(r), total, &unit_end);
            if (g->count == 0) {
                g->first_cq = qoff;
                if (ends_ok) {
                    g->run = 1;
                    g->last_end = unit_end;
                }
            } else if (g->run == g->count && ends_ok && unit_end > g->last_end &&
                       (uint64_t)qoff == (uint64_t)g->first_cq + (uint64_t)g->count) {
                g->run++;
                g->last_end = unit_end;
            }
            g->count++;
        }
        b->pos[n] = pos;
        b->phy[n] = rmq_get_i64(r + RMQ_POS_PHYSICALOFFSET);
        b->ts[n] = store_ts;
        b->sys_flag[n] = sys_flag;
        b->count = n + 1;
        pos += total;
    }
    b->stop_pos = pos;
    return;
oom:
    a->oom = 1;
    b->stop_pos = pos;
}

/* parse(buf, start, limit, delay_table, max_records, with_keys) -> Batch */
static PyObject *cdispatch_parse(PyObject *self, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t start, limit, max_records;
    PyObject *delay_table;
    int with_keys;
    if (!PyArg_ParseTuple(args, "y*nnOnp:parse", &view, &start, &limit, &delay_table, &max_records, &with_keys))
        return NULL;
    BatchObject *b = NULL;
    int64_t *delays = NULL;
    PyObject *seq = PySequence_Fast(delay_table, "delay_table must be a sequence of ints (ms of levels 1..N)");
    if (seq == NULL)
        goto fail;
    Py_ssize_t nd = PySequence_Fast_GET_SIZE(seq);
    delays = malloc((size_t)(nd > 0 ? nd : 1) * sizeof(int64_t));
    if (delays == NULL) {
        PyErr_NoMemory();
        goto fail;
    }
    for (Py_ssize_t i = 0; i < nd; i++) {
        delays[i] = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(seq, i));
        if (delays[i] == -1 && PyErr_Occurred())
            goto fail;
    }
    if (max_records < 1 || max_records > INT32_MAX / 2) {
        PyErr_Format(PyExc_ValueError, "max_records must be 1..%d, got %zd", INT32_MAX / 2, max_records);
        goto fail;
    }
    if (start < 0) {
        PyErr_Format(PyExc_ValueError, "start must be >= 0, got %zd", start);
        goto fail;
    }
    b = PyObject_New(BatchObject, &BatchType);
    if (b == NULL)
        goto fail;
    b->count = 0;
    b->stop_pos = start;
    b->stop = STOP_END;
    b->keys.p = NULL;
    b->keys.len = b->keys.cap = 0;
    b->groups = NULL;
    b->ngroups = b->groups_cap = 0;
    b->group_list = NULL;
    b->pos = b->phy = b->ts = NULL;
    b->sys_flag = b->key_start = b->key_n = NULL;
    b->table = NULL;
    Py_ssize_t lim = limit < view.len ? limit : view.len;
    Py_ssize_t left = lim > start ? lim - start : 0;
    /* no record is shorter than 91 bytes: no more records than that fit */
    Py_ssize_t cap = left / RMQ_MIN_RECORD_SIZE + 1;
    if (cap > max_records)
        cap = max_records;
    if (batch_alloc(b, cap) < 0) {
        PyErr_NoMemory();
        goto fail;
    }
    parse_args a = {(const unsigned char *)view.buf, lim, delays, nd, with_keys, cap, 0};
    if (left >= RMQ_RELEASE_BYTES) { /* (a short run: giving the GIL away would cost more than the run) */
        Py_BEGIN_ALLOW_THREADS
        parse_run(b, &a, start);
        Py_END_ALLOW_THREADS
    } else {
        parse_run(b, &a, start);
    }
    if (a.oom) {
        PyErr_NoMemory();
        goto fail;
    }
    free(delays);
    Py_DECREF(seq);
    PyBuffer_Release(&view);
    return (PyObject *)b;
fail:
    free(delays);
    Py_XDECREF(seq);
    Py_XDECREF(b);
    PyBuffer_Release(&view);
    return NULL;
}

/* -- the batch's methods ------------------------------------------------------------------- */

static int check_n(BatchObject *b, Py_ssize_t n)
{
    if (n < 0 || n > b->count) {
        PyErr_Format(PyExc_IndexError, "record number %zd outside 0..%zd", n, b->count);
        return -1;
    }
    return 0;
}

static PyObject *batch_record_pos(BatchObject *b, PyObject *arg)
{
    Py_ssize_t n = PyLong_AsSsize_t(arg);
    if (n == -1 && PyErr_Occurred())
        return NULL;
    if (check_n(b, n) < 0)
        return NULL;
    return PyLong_FromSsize_t(n == b->count ? b->stop_pos : (Py_ssize_t)b->pos[n]);
}

static PyObject *batch_cq_timestamp(BatchObject *b, PyObject *arg)
{
    Py_ssize_t n = PyLong_AsSsize_t(arg);
    if (n == -1 && PyErr_Occurred())
        return NULL;
    if (check_n(b, n) < 0)
        return NULL;
    for (Py_ssize_t i = n - 1; i >= 0; i--) {
        if (rmq_gets_queue_unit(b->sys_flag[i]))
            return PyLong_FromLongLong(b->ts[i]);
    }
    Py_RETURN_NONE;
}

static PyObject *batch_index_keys(BatchObject *b, PyObject *arg)
{
    Py_ssize_t n = PyLong_AsSsize_t(arg);
    if (n == -1 && PyErr_Occurred())
        return NULL;
    if (check_n(b, n) < 0)
        return NULL;
    Py_ssize_t keys = n == 0 ? 0 : (Py_ssize_t)b->key_start[n - 1] + b->key_n[n - 1];
    return PyLong_FromSsize_t(keys);
}

typedef struct {
    int64_t begin_ts, end_ts, begin_phy, end_phy;
    int64_t slot_count, index_count;
} index_header;

/* IndexFile.put_key for records [0, n), into the mapping; returns the records done */
static Py_ssize_t write_index_run(BatchObject *b, Py_ssize_t n, unsigned char *buf, int64_t slots, int64_t index_num,
                                  index_header *h, Py_ssize_t *written)
{
    const int32_t *keys = (const int32_t *)b->keys.p;
    const int64_t entries = RMQ_INDEX_HEADER + slots * RMQ_INDEX_SLOT;
    const int64_t total_keys = (int64_t)(b->keys.len / sizeof(int32_t));
    Py_ssize_t i;
    *written = 0;
    for (i = 0; i < n; i++) {
        if (h->index_count >= index_num)
            break; /* full: the pure path creates the next file for this record */
        if (b->phy[i] < h->end_phy)
            continue;
        if (!rmq_gets_index_entries(b->sys_flag[i]))
            continue;
        int32_t nk = b->key_n[i];
        if (nk == 0)
            continue;
        if (h->index_count + nk > index_num)
            break; /* its keys span two files: the pure path puts them */
        int64_t phy = b->phy[i], ts = b->ts[i];
        for (int32_t k = 0; k < nk; k++) {
            int64_t at = (int64_t)b->key_start[i] + k;
            if (at + RMQ_PREFETCH < total_keys) /* the slots are scattered over the table: ask early */
                __builtin_prefetch(buf + RMQ_INDEX_HEADER + (keys[at + RMQ_PREFETCH] % slots) * RMQ_INDEX_SLOT, 1);
            int32_t key_hash = keys[at];
            unsigned char *slot = buf + RMQ_INDEX_HEADER + (key_hash % slots) * RMQ_INDEX_SLOT;
            unsigned char *entry = buf + entries + h->index_count * RMQ_INDEX_ENTRY;
            int64_t slot_value = rmq_get_i32(slot);
            if (slot_value <= 0 || slot_value > h->index_count)
                slot_value = 0;
            int64_t time_diff = 0;
            if (!(h->begin_ts <= 0 || h->index_count <= 1) && ts >= h->begin_ts) {
                uint64_t d = ((uint64_t)ts - (uint64_t)h->begin_ts) / 1000;
                time_diff = d > INT32_MAX ? INT32_MAX : (int64_t)d;
            }
            rmq_put_i32(entry, key_hash);
            rmq_put_i64(entry + 4, phy);
            rmq_put_i32(entry + 12, (int32_t)time_diff);
            rmq_put_i32(entry + 16, (int32_t)slot_value);
            rmq_put_i32(slot, (int32_t)h->index_count);
            if (h->index_count <= 1) {
                h->begin_phy = phy;
                h->begin_ts = ts;
            }
            if (slot_value == 0)
                h->slot_count++;
            h->index_count++;
            h->end_phy = phy;
            h->end_ts = ts;
            (*written)++;
        }
    }
    if (*written) {
        rmq_put_i64(buf, h->begin_ts);
        rmq_put_i64(buf + 8, h->end_ts);
        rmq_put_i64(buf + 16, h->begin_phy);
        rmq_put_i64(buf + 24, h->end_phy);
        rmq_put_i32(buf + 32, (int32_t)h->slot_count);
        rmq_put_i32(buf + 36, (int32_t)h->index_count);
    }
    return i;
}

static PyObject *batch_write_index(BatchObject *b, PyObject *args)
{
    Py_ssize_t n;
    Py_buffer view;
    long long slots, index_num;
    index_header h;
    long long bt, et, bp, ep, sc, ic;
    if (!PyArg_ParseTuple(args, "nw*LLLLLLLL:write_index", &n, &view, &slots, &index_num, &bt, &et, &bp, &ep, &sc, &ic))
        return NULL;
    h.begin_ts = bt;
    h.end_ts = et;
    h.begin_phy = bp;
    h.end_phy = ep;
    h.slot_count = sc;
    h.index_count = ic;
    if (check_n(b, n) < 0)
        goto fail;
    if (slots < 1 || index_num < 1 || slots > INT32_MAX || index_num > INT32_MAX) {
        PyErr_Format(PyExc_ValueError, "an index file has 1..2**31-1 slots and entries, got %lld and %lld", slots,
                     index_num);
        goto fail;
    }
    if (h.index_count < 1 || h.index_count > INT32_MAX || h.slot_count < 0 || h.slot_count > INT32_MAX) {
        PyErr_Format(PyExc_ValueError, "index header counts out of range: index count %lld, slot count %lld",
                     (long long)h.index_count, (long long)h.slot_count);
        goto fail;
    }
    int64_t need = RMQ_INDEX_HEADER + slots * RMQ_INDEX_SLOT + index_num * RMQ_INDEX_ENTRY;
    if ((int64_t)view.len < need) {
        PyErr_Format(PyExc_ValueError, "the index buffer holds %zd bytes; %lld slots and %lld entries need %lld",
                     view.len, slots, index_num, (long long)need);
        goto fail;
    }
    Py_ssize_t done, written;
    if (n >= RMQ_RELEASE_RECORDS) {
        Py_BEGIN_ALLOW_THREADS
        done = write_index_run(b, n, (unsigned char *)view.buf, slots, index_num, &h, &written);
        Py_END_ALLOW_THREADS
    } else {
        done = write_index_run(b, n, (unsigned char *)view.buf, slots, index_num, &h, &written);
    }
    PyBuffer_Release(&view);
    return Py_BuildValue("nnLLLLLL", done, written, (long long)h.begin_ts, (long long)h.end_ts,
                         (long long)h.begin_phy, (long long)h.end_phy, (long long)h.slot_count,
                         (long long)h.index_count);
fail:
    PyBuffer_Release(&view);
    return NULL;
}

/* groups: [(topic, queue_id, first queue offset, units bytes, record numbers bytes (int32), run)] */
static PyObject *batch_get_groups(BatchObject *b, void *closure)
{
    if (b->group_list != NULL) {
        Py_INCREF(b->group_list);
        return b->group_list;
    }
    PyObject *list = PyList_New(b->ngroups);
    if (list == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < b->ngroups; i++) {
        group_t *g = &b->groups[i];
        PyObject *t = Py_BuildValue("(s#iLy#y#n)", (const char *)g->topic, g->topic_len, (int)g->qid,
                                    (long long)g->first_cq, (const char *)g->units.p, (Py_ssize_t)g->units.len,
                                    (const char *)g->recidx.p, (Py_ssize_t)g->recidx.len, g->run);
        if (t == NULL) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, i, t);
    }
    b->group_list = list;
    Py_INCREF(list);
    return list;
}

static PyObject *batch_get_count(BatchObject *b, void *c) { return PyLong_FromSsize_t(b->count); }
static PyObject *batch_get_stop_pos(BatchObject *b, void *c) { return PyLong_FromSsize_t(b->stop_pos); }
static PyObject *batch_get_stop(BatchObject *b, void *c) { return PyLong_FromLong(b->stop); }

static PyGetSetDef batch_getset[] = {
    {"count", (getter)batch_get_count, NULL, "records parsed", NULL},
    {"stop_pos", (getter)batch_get_stop_pos, NULL, "the position where the run stopped", NULL},
    {"stop", (getter)batch_get_stop, NULL, "why: END (walk.step words it), DEFER (a record for the pure path), MORE", NULL},
    {"groups", (getter)batch_get_groups, NULL,
     "[(topic, queue_id, first queue offset, units, record numbers (int32), consecutive run)]", NULL},
    {NULL},
};

static PyMethodDef batch_methods[] = {
    {"record_pos", (PyCFunction)batch_record_pos, METH_O, "record_pos(n): position of record n (n == count: stop_pos)"},
    {"cq_timestamp", (PyCFunction)batch_cq_timestamp, METH_O,
     "cq_timestamp(n): store timestamp of the last record before n that builds a consume-queue unit, or None"},
    {"index_keys", (PyCFunction)batch_index_keys, METH_O, "index_keys(n): index keys of the records before n"},
    {"write_index", (PyCFunction)batch_write_index, METH_VARARGS,
     "write_index(n, buf, slots, index_num, begin_ts, end_ts, begin_phy, end_phy, slot_count, index_count)"
     " -> (records done, entries written, begin_ts, end_ts, begin_phy, end_phy, slot_count, index_count)"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject BatchType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "rmqstore._native._cdispatch.Batch",
    .tp_basicsize = sizeof(BatchObject),
    .tp_dealloc = (destructor)batch_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A parsed run of commitlog records: consume-queue groups and index keys (see parse()).",
    .tp_methods = batch_methods,
    .tp_getset = batch_getset,
};

/* java_hash(data: bytes (UTF-8)) -> int: Java's String.hashCode, for the tests */
static PyObject *cdispatch_java_hash(PyObject *self, PyObject *arg)
{
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    if (!rmq_utf8_ok(view.buf, view.len)) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "not UTF-8");
        return NULL;
    }
    uint32_t h = java_hash(0, view.buf, view.len);
    PyBuffer_Release(&view);
    return PyLong_FromLong((int32_t)h);
}

static PyMethodDef cdispatch_methods[] = {
    {"parse", cdispatch_parse, METH_VARARGS,
     "parse(buf, start, limit, delay_table, max_records, with_keys) -> Batch"},
    {"java_hash", cdispatch_java_hash, METH_O, "java_hash(utf8_bytes) -> Java String.hashCode (signed)"},
    {NULL, NULL, 0, NULL},
};

static int cdispatch_exec(PyObject *m)
{
    rmq_crc_init();
    if (PyType_Ready(&BatchType) < 0)
        return -1;
    Py_INCREF(&BatchType);
    if (PyModule_AddObject(m, "Batch", (PyObject *)&BatchType) < 0) {
        Py_DECREF(&BatchType);
        return -1;
    }
    if (PyModule_AddIntConstant(m, "END", STOP_END) < 0 || PyModule_AddIntConstant(m, "DEFER", STOP_DEFER) < 0 ||
        PyModule_AddIntConstant(m, "MORE", STOP_MORE) < 0)
        return -1;
    if (rmq_add_constants(m, "CONSUME_QUEUE_UNIT_SIZE", (long)RMQ_CQ_UNIT, "INDEX_HEADER_SIZE", (long)RMQ_INDEX_HEADER,
                          "INDEX_SLOT_SIZE", (long)RMQ_INDEX_SLOT, "INDEX_ENTRY_SIZE", (long)RMQ_INDEX_ENTRY,
                          (const char *)NULL) < 0)
        return -1;
    PyObject *constants = PyObject_GetAttrString(m, "CONSTANTS");
    PyObject *topic = PyUnicode_FromString(SCHEDULE_TOPIC);
    int r = constants == NULL || topic == NULL ? -1 : PyDict_SetItemString(constants, "SCHEDULE_TOPIC", topic);
    Py_XDECREF(constants);
    Py_XDECREF(topic);
    return r;
}

static PyModuleDef_Slot cdispatch_slots[] = {
    {Py_mod_exec, cdispatch_exec},
    {0, NULL},
};

static struct PyModuleDef cdispatch_module = {
    PyModuleDef_HEAD_INIT, "rmqstore._native._cdispatch", "dispatch of a run of records to consume queues and index, compiled", 0,
    cdispatch_methods, cdispatch_slots, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__cdispatch(void)
{
    return PyModuleDef_Init(&cdispatch_module);
}
