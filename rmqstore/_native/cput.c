/* rmqstore._native._cput: a record's encoding and its append under the put lock, compiled.
 *
 * The pure path (rmqstore.engine.store_put -> store_checks -> CommitLog.put_message ->
 * MessageEncoder.encode -> append_encoded -> MappedFile.append_message -> do_append) is the
 * reference; Putter.put / Putter.put_batch do the same work for the common case in one call:
 *
 *   - the gates: the store's state (shut down, slave, not writeable, a tracer set) and the message's fast check (a Message of a topic already
 *     checked, a queue id in range, str properties, bytes body, no replay fields);
 *   - the encoding: body CRC, hosts (IPv4/IPv6 and their sys-flag bits), UTF-8 topic and
 *     properties, every header field at the positions of record.h (checked against the
 *     layout table by tests/unit/test_native_put.py);
 *   - under the put lock (the lock object the Python writers take; tried without blocking, and
 *     while another writer holds it, tried again after letting the GIL go -- a spin, never a
 *     blocking wait, see run_locked):
 *     the store timestamp from the store's clock, the last mapped file (a new one through the
 *     commitlog's Python next_file_for_put), the END_OF_FILE blank and the retry in the next
 *     file, the queue offset from the topic-queue table, the physical offset;
 *   - the results, as the same AppendMessageResult / PutMessageResult objects, the put
 *     statistics, and the flush service's wake-up.
 *
 * Anything else answers None before anything is touched, and the caller runs the pure path:
 * a refusal (the pure path words it), a delay level (the rewrite), a new host string (the pure
 * path parses and caches it), a non-exact type.  Replays never come here.
 *
 * Torn writes: a record is written from byte 8 to its end first, then its size and magic in
 * one 8-byte store; a batch writes all its records and the first record's 8 head bytes last.
 * A kill -9 in between leaves the old bytes at the head (zeros in a fresh file): recovery
 * never sees a half record that claims to be whole.
 *
 * The GIL is held throughout (no Python object may change meanwhile) except between tries of
 * a busy put lock and inside next_file_for_put, which may wait for the allocate service;
 * every object used after either is held by a strong reference.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <sched.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>
#include <time.h>

#include "crc32.h"
#include "record.h"

#define SMALL_BATCH 64

/* -- slots of __slots__ classes, by offset ------------------------------------------------ */

static int slot_offset(PyTypeObject *tp, const char *name, Py_ssize_t *out)
{
    PyObject *d = PyObject_GetAttrString((PyObject *)tp, name);
    if (d == NULL)
        return -1;
    if (!PyObject_TypeCheck(d, &PyMemberDescr_Type) ||
        ((PyMemberDescrObject *)d)->d_member->type != T_OBJECT_EX) {
        PyErr_Format(PyExc_TypeError, "%s.%s is not a __slots__ member", tp->tp_name, name);
        Py_DECREF(d);
        return -1;
    }
    *out = ((PyMemberDescrObject *)d)->d_member->offset;
    Py_DECREF(d);
    return 0;
}

#define SLOT(obj, off) (*(PyObject **)((char *)(obj) + (off)))

enum { M_TOPIC, M_BODY, M_QUEUE_ID, M_FLAG, M_PROPS, M_SYS_FLAG, M_BORN_TS, M_BORN_HOST, M_STORE_HOST,
       M_RECONSUME, M_PREPARED, M_STORE_TS, M_QUEUE_OFFSET, M_BODY_CRC, M_COUNT };
static const char *MSG_SLOTS[M_COUNT] = {
    "topic", "body", "queue_id", "flag", "properties", "sys_flag", "born_timestamp", "born_host",
    "store_host", "reconsume_times", "prepared_transaction_offset", "store_timestamp", "queue_offset",
    "body_crc"};

enum { B_TOPIC, B_ITEMS, B_QUEUE_ID, B_SYS_FLAG, B_PROPS, B_BORN_TS, B_BORN_HOST, B_STORE_HOST, B_RECONSUME,
       B_COUNT };
static const char *BATCH_SLOTS[B_COUNT] = {
    "topic", "items", "queue_id", "sys_flag", "properties", "born_timestamp", "born_host", "store_host",
    "reconsume_times"};

enum { I_BODY, I_PROPS, I_FLAG, I_COUNT };
static const char *ITEM_SLOTS[I_COUNT] = {"body", "properties", "flag"};

enum { A_STATUS, A_WROTE_OFFSET, A_WROTE_BYTES, A_MSG_ID, A_STORE_HOST, A_STORE_TS, A_LOGICS, A_MSG_NUM,
       A_PAGECACHE_RT, A_OFFSETS, A_COUNT };
static const char *APPEND_SLOTS[A_COUNT] = {
    "status", "wrote_offset", "wrote_bytes", "_msg_id", "store_host", "store_timestamp", "logics_offset",
    "msg_num", "pagecache_rt", "_offsets"};

enum { P_STATUS, P_APPEND, P_MESSAGE, P_COUNT };
static const char *PUT_SLOTS[P_COUNT] = {"status", "append_result", "message"};

/* -- the put service ----------------------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    PyObject *store, *commit_log, *queue, *good_topics, *acquire, *release, *clock, *default_host,
        *addr_cache, *wakeup, *finish, *next_file, *slave_role, *null_tracer, *record, *counts, *config, *last_key, *table,
        *last_mf, *last_mapped;
    long long last_from;
    PyTypeObject *msg_type, *batch_type, *item_type, *addr_type, *append_type, *put_type;
    PyObject *put_ok, *append_ok, *end_of_file, *unknown_error, *empty, *zero;
    Py_ssize_t msg_off[M_COUNT], batch_off[B_COUNT], item_off[I_COUNT], append_off[A_COUNT], put_off[P_COUNT];
    long long max_message_size, max_record_size, file_size, max_batch;
    /* statistics of the puts this object finished (the rest are StoreStats' own) */
    long long ok_puts, dist[7];
    double max_ms;
} Putter;

static PyObject *s_shutdown_flag, *s_writeable, *s_config, *s_broker_role, *s_tracer, *s_begin_time_in_lock,
    *s_topic_queue_table, *s_mapped_files, *s_wrote_position, *s_file_from_offset, *s_write_buffer, *s_mapped,
    *s_store_timestamp, *s_current_store_timestamp;

static int intern_names(void)
{
#define I(var, text) if ((var = PyUnicode_InternFromString(text)) == NULL) return -1
    I(s_shutdown_flag, "shutdown_flag");
    I(s_writeable, "writeable");
    I(s_config, "config");
    I(s_broker_role, "broker_role");
    I(s_tracer, "tracer");
    I(s_begin_time_in_lock, "begin_time_in_lock");
    I(s_topic_queue_table, "topic_queue_table");
    I(s_mapped_files, "mapped_files");
    I(s_wrote_position, "wrote_position");
    I(s_file_from_offset, "file_from_offset");
    I(s_write_buffer, "write_buffer");
    I(s_mapped, "mapped");
    I(s_store_timestamp, "store_timestamp");
    I(s_current_store_timestamp, "current_store_timestamp");
#undef I
    return 0;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000.0 + ts.tv_nsec / 1e6;
}

/* -- small readers: 1 = ok, 0 = not the common case (pure path), -1 = error ---------------- */

static int int_in(PyObject *v, long long lo, long long hi, long long *out)
{
    if (v == NULL || !PyLong_Check(v))
        return 0;
    int overflow = 0;
    long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (x == -1 && PyErr_Occurred())
        return -1;
    if (overflow || x < lo || x > hi)
        return 0;
    *out = x;
    return 1;
}

static int attr_int(PyObject *obj, PyObject *name, long long *out)
{
    PyObject *v = PyObject_GetAttr(obj, name);
    if (v == NULL)
        return -1;
    int overflow = 0;
    *out = PyLong_AsLongLongAndOverflow(v, &overflow);
    Py_DECREF(v);
    if (*out == -1 && PyErr_Occurred())
        return -1;
    if (overflow) {
        PyErr_Format(PyExc_OverflowError, "%U does not fit 64 bits", name);
        return -1;
    }
    return 0;
}

typedef struct {
    const unsigned char *ip;
    int ip_len;
    int port;
    PyObject *addr; /* borrowed (kept alive by the message or the cache); NULL when parsed here */
    unsigned char parsed[4];
} Host;

/* a canonical "a.b.c.d:port" (no leading zeros, port 0..65535): 1 and the host, else 0 (the pure
 * path parses what this does not, so the two can never disagree on an accepted string) */
static int parse_ipv4(PyObject *text, Host *h)
{
    Py_ssize_t n;
    const char *p = PyUnicode_AsUTF8AndSize(text, &n);
    if (p == NULL) {
        PyErr_Clear();
        return 0;
    }
    const char *end = p + n;
    for (int k = 0; k < 5; k++) {
        long v = 0;
        const char *start = p;
        while (p < end && *p >= '0' && *p <= '9' && p - start < 6)
            v = v * 10 + (*p++ - '0');
        Py_ssize_t digits = p - start;
        if (digits == 0 || (digits > 1 && *start == '0'))
            return 0;
        if (k < 4) {
            if (digits > 3 || v > 255 || p >= end || *p++ != (k < 3 ? '.' : ':'))
                return 0;
            h->parsed[k] = (unsigned char)v;
        } else {
            if (digits > 5 || v > 65535 || p != end)
                return 0;
            h->port = (int)v;
        }
    }
    h->ip = h->parsed;
    h->ip_len = 4;
    h->addr = NULL;
    return 1;
}

/* a host of a put: None (the store's own), a cached "ip:port" string, or an Address; a born
 * host may also be an IPv4 "ip:port" string parsed here (its Address is never needed) */
static int host_of(Putter *self, PyObject *value, Host *h, int born)
{
    PyObject *addr;
    if (value == Py_None) {
        addr = self->default_host;
    } else if (PyUnicode_CheckExact(value)) {
        addr = PyDict_GetItemWithError(self->addr_cache, value);
        if (addr == NULL) {
            if (PyErr_Occurred())
                return -1;
            return born ? parse_ipv4(value, h) : 0; /* else the pure path parses and caches it */
        }
    } else if (Py_TYPE(value) == self->addr_type) {
        addr = value;
    } else {
        return 0;
    }
    if (Py_TYPE(addr) != self->addr_type || PyTuple_GET_SIZE(addr) != 2)
        return 0;
    PyObject *ip = PyTuple_GET_ITEM(addr, 0), *port = PyTuple_GET_ITEM(addr, 1);
    long long p;
    if (!PyBytes_CheckExact(ip) || (PyBytes_GET_SIZE(ip) != 4 && PyBytes_GET_SIZE(ip) != 16))
        return 0;
    int r = int_in(port, 0, 65535, &p);
    if (r <= 0)
        return r;
    h->ip = (const unsigned char *)PyBytes_AS_STRING(ip);
    h->ip_len = (int)PyBytes_GET_SIZE(ip);
    h->port = (int)p;
    h->addr = addr;
    return 1;
}

/* UTF-8 of a str; 0 when it has none (a lone surrogate: the pure path words the refusal) */
static int utf8_of(PyObject *s, const char **p, Py_ssize_t *n)
{
    *p = PyUnicode_AsUTF8AndSize(s, n);
    if (*p == NULL) {
        if (PyErr_ExceptionMatches(PyExc_UnicodeEncodeError)) {
            PyErr_Clear();
            return 0;
        }
        return -1;
    }
    return 1;
}

static int has_delay(const char *p, Py_ssize_t n)
{
    const char *end = p + n;
    while (end - p >= 6) {
        const char *d = memchr(p, 'D', (size_t)(end - p - 5));
        if (d == NULL)
            return 0;
        if (memcmp(d, "DELAY\x01", 6) == 0)
            return 1;
        p = d + 1;
    }
    return 0;
}

/* the store's state as check_store_status sees it, and no tracer (the commit log's tracer is the null one,
 * rmqstore.engine.put_trace.NULL_PUT_TRACE): 1 when a native put may run */
static long long store_clock(Putter *self, int *err);

static int store_open(Putter *self)
{
    PyObject *v = PyObject_GetAttr(self->store, s_shutdown_flag);
    if (v == NULL)
        return -1;
    int shut = PyObject_IsTrue(v);
    Py_DECREF(v);
    if (shut)
        return shut < 0 ? -1 : 0;
    v = PyObject_GetAttr(self->store, s_writeable);
    if (v == NULL)
        return -1;
    int w = PyObject_IsTrue(v);
    Py_DECREF(v);
    if (w <= 0)
        return w;
    v = PyObject_GetAttr(self->config, s_broker_role);
    if (v == NULL)
        return -1;
    int slave = v == self->slave_role;
    Py_DECREF(v);
    if (slave)
        return 0;
    v = PyObject_GetAttr(self->commit_log, s_tracer);
    if (v == NULL)
        return -1;
    int traced = v != self->null_tracer;  /* the engine's null tracer, one object: an identity test */
    Py_DECREF(v);
    if (traced)
        return 0;
    long long begin;
    if (attr_int(self->commit_log, s_begin_time_in_lock, &begin) < 0)
        return -1;
    if (begin <= 0)
        return 1;
    /* another writer is inside the lock: wait for it (run_locked), unless it has held it past
     * os_page_cache_busy_timeout_mills -- then the pure path answers OS_PAGECACHE_BUSY */
    int err = 0;
    long long now = store_clock(self, &err);
    if (err)
        return -1;
    long long limit;
    PyObject *t = PyObject_GetAttrString(self->config, "os_page_cache_busy_timeout_mills");
    if (t == NULL)
        return -1;
    int r = int_in(t, LLONG_MIN, LLONG_MAX, &limit);
    Py_DECREF(t);
    if (r < 0)
        return -1;
    return r == 0 ? 0 : now - begin <= limit;
}

static int queue_limit(Putter *self, PyObject *topic, PyObject *queue_id)
{
    if (!PyUnicode_CheckExact(topic) || !PyLong_CheckExact(queue_id))
        return 0;
    PyObject *limit = PyDict_GetItemWithError(self->good_topics, topic);
    if (limit == NULL)
        return PyErr_Occurred() ? -1 : 0;
    long long q, lim;
    int r = int_in(queue_id, 0, 0x7FFFFFFFLL, &q);
    if (r <= 0)
        return r;
    r = int_in(limit, 0, LLONG_MAX, &lim);
    if (r <= 0)
        return r;
    return q < lim;
}

static long long store_clock(Putter *self, int *err)
{
    if (self->clock == Py_None) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
    }
    PyObject *v = PyObject_CallNoArgs(self->clock);
    if (v == NULL) {
        *err = 1;
        return 0;
    }
    long long t = PyLong_AsLongLong(v);
    Py_DECREF(v);
    if (t == -1 && PyErr_Occurred())
        *err = 1;
    return t;
}

static PyObject *new_slots(PyTypeObject *tp, const Py_ssize_t *offs, PyObject **values, int n)
{
    PyObject *obj = tp->tp_alloc(tp, 0);
    if (obj == NULL) {
        for (int i = 0; i < n; i++)
            Py_DECREF(values[i]);
        return NULL;
    }
    for (int i = 0; i < n; i++)
        SLOT(obj, offs[i]) = values[i]; /* steals */
    return obj;
}

/* AppendMessageResult(status, wrote_offset, wrote_bytes, None, store_ts, logics, msg_num, 0,
 *                     store_host=host, offsets=offsets) -- steals offsets */
static PyObject *append_result(Putter *self, PyObject *status, long long wrote_offset, long long wrote_bytes,
                               PyObject *msg_id, PyObject *store_ts, long long logics, long long msg_num,
                               PyObject *host, PyObject *offsets)
{
    PyObject *v[A_COUNT];
    v[A_STATUS] = Py_NewRef(status);
    v[A_WROTE_OFFSET] = PyLong_FromLongLong(wrote_offset);
    v[A_WROTE_BYTES] = PyLong_FromLongLong(wrote_bytes);
    v[A_MSG_ID] = Py_NewRef(msg_id);
    v[A_STORE_HOST] = Py_NewRef(host);
    v[A_STORE_TS] = Py_NewRef(store_ts);
    v[A_LOGICS] = PyLong_FromLongLong(logics);
    v[A_MSG_NUM] = PyLong_FromLongLong(msg_num);
    v[A_PAGECACHE_RT] = Py_NewRef(self->zero);
    v[A_OFFSETS] = offsets ? offsets : Py_NewRef(Py_None);
    for (int i = 0; i < A_COUNT; i++) {
        if (v[i] == NULL) {
            for (int j = 0; j < A_COUNT; j++)
                Py_XDECREF(v[j]);
            return NULL;
        }
    }
    return new_slots(self->append_type, self->append_off, v, A_COUNT);
}

static PyObject *put_result(Putter *self, PyObject *status, PyObject *ar, PyObject *message)
{
    PyObject *v[P_COUNT] = {Py_NewRef(status), ar, Py_NewRef(message)};
    return new_slots(self->put_type, self->put_off, v, P_COUNT);
}

/* -- the record --------------------------------------------------------------------------- */

typedef struct {
    int32_t queue_id, sys_flag, reconsume;
    int64_t born_ts, prepared;
    Host born, host;
} Head;

static inline int head_size(const Head *h)
{
    return RMQ_POS_BORNHOST + h->born.ip_len + 4 + 8 + h->host.ip_len + 4 + 4 + 8 + 4;
}

/* every byte of one record but its first 8 (size and magic) */
static unsigned char *write_tail(unsigned char *p, const Head *h, int32_t flag, uint32_t crc, int64_t queue_offset,
                                 int64_t phys, int64_t store_ts, const char *body, Py_ssize_t body_len,
                                 const char *topic, Py_ssize_t topic_len, const char *props, Py_ssize_t props_len,
                                 int sep, const char *props2, Py_ssize_t props2_len)
{
    rmq_put_i32(p + RMQ_POS_BODYCRC, (int32_t)crc);
    rmq_put_i32(p + RMQ_POS_QUEUEID, h->queue_id);
    rmq_put_i32(p + RMQ_POS_FLAG, flag);
    rmq_put_i64(p + RMQ_POS_QUEUEOFFSET, queue_offset);
    rmq_put_i64(p + RMQ_POS_PHYSICALOFFSET, phys);
    rmq_put_i32(p + RMQ_POS_SYSFLAG, h->sys_flag);
    rmq_put_i64(p + RMQ_POS_BORNTIMESTAMP, h->born_ts);
    unsigned char *q = p + RMQ_POS_BORNHOST;
    memcpy(q, h->born.ip, h->born.ip_len);
    q += h->born.ip_len;
    rmq_put_i32(q, h->born.port);
    rmq_put_i64(q + 4, store_ts);
    q += 12;
    memcpy(q, h->host.ip, h->host.ip_len);
    q += h->host.ip_len;
    rmq_put_i32(q, h->host.port);
    rmq_put_i32(q + 4, h->reconsume);
    rmq_put_i64(q + 8, h->prepared);
    rmq_put_i32(q + 16, (int32_t)body_len);
    q += 20;
    memcpy(q, body, body_len);
    q += body_len;
    *q++ = (unsigned char)topic_len;
    memcpy(q, topic, topic_len);
    q += topic_len;
    Py_ssize_t all = props_len + sep + props2_len;
    q[0] = (unsigned char)(all >> 8);
    q[1] = (unsigned char)all;
    q += 2;
    memcpy(q, props, props_len);
    q += props_len;
    if (sep)
        *q++ = '\x02';
    if (props2_len) {
        memcpy(q, props2, props2_len);
        q += props2_len;
    }
    return q;
}

/* the 8 head bytes in one store, after everything else of the record */
static inline void write_head(unsigned char *p, int32_t size, int32_t magic)
{
    unsigned char b[8];
    rmq_put_i32(b, size);
    rmq_put_i32(b + 4, magic);
    uint64_t word;
    memcpy(&word, b, 8);
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    *(volatile uint64_t *)p = word;
}

/* -- appending under the lock ---------------------------------------------------------------- */

typedef struct {
    Py_buffer view;
    PyObject *mf;
    long long pos, from;
} Target;

static void target_release(Target *t)
{
    if (t->view.obj != NULL)
        PyBuffer_Release(&t->view);
    t->view.obj = NULL;
    Py_CLEAR(t->mf);
}

/* the file to append to: 1 found (target filled), 0 none could be made (*refusal set), -1 error */
static int find_target(Putter *self, Target *t, PyObject *blank_result, long long store_ts, PyObject **refusal)
{
    PyObject *files = PyObject_GetAttr(self->queue, s_mapped_files);
    if (files == NULL)
        return -1;
    PyObject *mf = NULL;
    if (PyList_Check(files) && PyList_GET_SIZE(files) > 0)
        mf = Py_NewRef(PyList_GET_ITEM(files, PyList_GET_SIZE(files) - 1));
    Py_DECREF(files);
    long long pos = 0;
    if (mf != NULL && attr_int(mf, s_wrote_position, &pos) < 0) {
        Py_DECREF(mf);
        return -1;
    }
    if (mf == NULL || pos >= self->file_size) {
        Py_XDECREF(mf);
        /* a new file: Python code that may wait for the allocate service (the GIL is let go there);
         * begin_time_in_lock tells other writers that the lock is held meanwhile */
        PyObject *ts = PyLong_FromLongLong(store_ts);
        if (ts == NULL || PyObject_SetAttr(self->commit_log, s_begin_time_in_lock, ts) < 0) {
            Py_XDECREF(ts);
            return -1;
        }
        Py_DECREF(ts);
        mf = PyObject_CallOneArg(self->next_file, blank_result ? blank_result : Py_None);
        if (PyObject_SetAttr(self->commit_log, s_begin_time_in_lock, self->zero) < 0) {
            Py_XDECREF(mf);
            return -1;
        }
        if (mf == NULL)
            return -1;
        if (Py_TYPE(mf) == self->put_type) {
            *refusal = mf;
            return 0;
        }
        if (attr_int(mf, s_wrote_position, &pos) < 0) {
            Py_DECREF(mf);
            return -1;
        }
    }
    if (mf != self->last_mf) { /* a file's start offset and mapping never change: read once */
        long long from;
        PyObject *mapped;
        if (attr_int(mf, s_file_from_offset, &from) < 0 || (mapped = PyObject_GetAttr(mf, s_mapped)) == NULL) {
            Py_DECREF(mf);
            return -1;
        }
        Py_XSETREF(self->last_mapped, mapped);
        Py_XSETREF(self->last_mf, Py_NewRef(mf));
        self->last_from = from;
    }
    t->from = self->last_from;
    PyObject *buf = PyObject_GetAttr(mf, s_write_buffer);
    if (buf == Py_None) {
        Py_DECREF(buf);
        buf = Py_NewRef(self->last_mapped);
    }
    if (buf == NULL) {
        Py_DECREF(mf);
        return -1;
    }
    int r = PyObject_GetBuffer(buf, &t->view, PyBUF_WRITABLE);
    Py_DECREF(buf);
    if (r < 0) {
        Py_DECREF(mf);
        return -1;
    }
    if (t->view.len < self->file_size || pos < 0 || pos > self->file_size) {
        PyBuffer_Release(&t->view);
        t->view.obj = NULL;
        Py_DECREF(mf);
        PyErr_Format(PyExc_ValueError, "commitlog file buffer of %zd bytes at position %lld, expected %lld",
                     t->view.len, pos, self->file_size);
        return -1;
    }
    t->mf = mf;
    t->pos = pos;
    return 1;
}

static int advance(Target *t, long long new_pos, PyObject *ts)
{
    PyObject *p = PyLong_FromLongLong(new_pos);
    int r = (p == NULL || PyObject_SetAttr(t->mf, s_wrote_position, p) < 0 ||
             PyObject_SetAttr(t->mf, s_store_timestamp, ts) < 0) ? -1 : 0;
    Py_XDECREF(p);
    return r;
}

/* the rest of the file as one blank record (the END_OF_FILE of do_append) */
static PyObject *write_blank(Putter *self, Target *t, PyObject *ts)
{
    long long max_blank = self->file_size - t->pos;
    if (max_blank < RMQ_END_FILE_MIN_BLANK_LENGTH) { /* a position no append leaves (every record leaves 8 bytes behind it) */
        PyErr_Format(PyExc_ValueError, "no room for a blank record at position %lld of a %lld-byte file",
                     t->pos, self->file_size);
        return NULL;
    }
    unsigned char *p = (unsigned char *)t->view.buf + t->pos;
    if (max_blank > 8)
        memset(p + 8, 0, (size_t)(max_blank - 8));
    write_head(p, (int32_t)max_blank, RMQ_BLANK_MAGIC_CODE);
    if (advance(t, self->file_size, ts) < 0)
        return NULL;
    return append_result(self, self->end_of_file, t->from + t->pos, max_blank, self->empty, ts, 0, 0,
                         Py_None, NULL);
}

/* -- one put, or one batch ------------------------------------------------------------------ */

typedef struct {
    PyObject *body, *props; /* strong references */
    const char *props_p;
    Py_ssize_t props_len, body_len;
    int32_t flag;
    int sep; /* a batch: '\x02' between the item's properties and the batch's */
    uint32_t crc;
    long long length;
} Rec;

typedef struct {
    Head h;
    PyObject *topic, *queue_id, *batch_props;
    const char *topic_p, *bprops_p;
    Py_ssize_t topic_len, bprops_len;
    int gets_unit; /* rmq_gets_queue_unit: a queue offset of its own */
    Rec *recs;
    Py_ssize_t n;
    long long length;
} Work;

static long long queue_offset_of(PyObject *table, PyObject *key, int *err)
{
    PyObject *v = PyDict_GetItemWithError(table, key);
    if (v == NULL) {
        if (PyErr_Occurred())
            *err = 1;
        return 0;
    }
    long long q = PyLong_AsLongLong(v);
    if (q == -1 && PyErr_Occurred())
        *err = 1;
    return q;
}

/* under the lock: store timestamp, file, blank + retry, queue offsets, bytes, results */
static PyObject *append_work(Putter *self, Work *w, PyObject *key)
{
    int err = 0;
    long long store_ts = store_clock(self, &err);
    if (err)
        return NULL;
    PyObject *ts = PyLong_FromLongLong(store_ts);
    if (ts == NULL || PyObject_SetAttr(self->commit_log, s_current_store_timestamp, ts) < 0) {
        Py_XDECREF(ts);
        return NULL;
    }
    PyObject *table = Py_NewRef(self->table); /* (updated in place, never replaced) */
    Target t = {{0}, NULL, 0, 0};
    PyObject *blank = NULL, *result = NULL, *ar = NULL;
    for (int attempt = 0; attempt < 2; attempt++) {
        PyObject *refusal = NULL;
        int r = find_target(self, &t, blank, store_ts, &refusal);
        if (r < 0)
            goto done;
        if (r == 0) {
            result = refusal;
            goto done;
        }
        if (w->length + RMQ_END_FILE_MIN_BLANK_LENGTH > self->file_size - t.pos) {
            Py_XDECREF(blank);
            blank = write_blank(self, &t, ts);
            target_release(&t);
            if (blank == NULL)
                goto done;
            continue;
        }
        /* PUT_OK */
        int advances = w->gets_unit;
        long long qo = advances ? queue_offset_of(table, key, &err) : 0;
        if (err)
            goto done;
        long long wrote = t.from + t.pos, rel = 0;
        unsigned char *base = (unsigned char *)t.view.buf + t.pos;
        PyObject *offsets = NULL;
        if (w->n > 1 && (offsets = PyList_New(w->n)) == NULL)
            goto done;
        for (Py_ssize_t i = 0; i < w->n; i++) {
            Rec *rc = &w->recs[i];
            write_tail(base + rel, &w->h, rc->flag, rc->crc, qo + i, wrote + rel, store_ts, PyBytes_AS_STRING(rc->body),
                       rc->body_len, w->topic_p, w->topic_len, rc->props_p, rc->props_len, rc->sep, w->bprops_p,
                       w->bprops_len);
            if (i > 0)
                write_head(base + rel, (int32_t)rc->length, RMQ_MESSAGE_MAGIC_CODE);
            if (offsets != NULL) {
                PyObject *o = PyLong_FromLongLong(wrote + rel);
                if (o == NULL) {
                    Py_DECREF(offsets);
                    goto done;
                }
                PyList_SET_ITEM(offsets, i, o);
            }
            rel += rc->length;
        }
        write_head(base, (int32_t)w->recs[0].length, RMQ_MESSAGE_MAGIC_CODE);
        if (advance(&t, t.pos + w->length, ts) < 0) {
            Py_XDECREF(offsets);
            goto done;
        }
        if (advances) {
            PyObject *next = PyLong_FromLongLong(qo + w->n);
            if (next == NULL || PyDict_SetItem(table, key, next) < 0) {
                Py_XDECREF(next);
                Py_XDECREF(offsets);
                goto done;
            }
            Py_DECREF(next);
        }
        ar = append_result(self, self->append_ok, wrote, w->length, Py_None, ts, qo, w->n, w->h.host.addr,
                           offsets);
        if (ar != NULL)
            result = put_result(self, self->put_ok, ar, self->empty);
        goto done;
    }
    /* a blank in the fresh file too (cannot happen: the record fits an empty file) */
    if (blank != NULL) {
        PyObject *msg = PyUnicode_FromString("append ended with END_OF_FILE");
        if (msg != NULL) {
            result = put_result(self, self->unknown_error, Py_NewRef(blank), msg);
            Py_DECREF(msg);
        }
    }
done:
    target_release(&t);
    Py_XDECREF(blank);
    Py_DECREF(table);
    Py_DECREF(ts);
    return result;
}

static PyObject *run_locked(Putter *self, Work *w)
{
    /* the topic-queue table's key (topic, queue id); the last one is reused when the same objects come again */
    PyObject *key = self->last_key;
    if (key != NULL && PyTuple_GET_ITEM(key, 0) == w->topic && PyTuple_GET_ITEM(key, 1) == w->queue_id) {
        Py_INCREF(key);
    } else {
        key = PyTuple_Pack(2, w->topic, w->queue_id);
        if (key == NULL)
            return NULL;
        Py_XSETREF(self->last_key, Py_NewRef(key));
    }
    PyObject *got = PyObject_CallOneArg(self->acquire, Py_False);
    if (got == NULL) {
        Py_DECREF(key);
        return NULL;
    }
    int locked = PyObject_IsTrue(got);
    Py_DECREF(got);
    for (unsigned spins = 0; locked == 0; spins++) {
        /* Another writer holds it -- a Python one (a traced put, a replay, a slave's append), or a
         * compiled one inside next_file_for_put.  Spin as RocketMQ's PutMessageSpinLock does: let
         * the GIL go (so the holder can finish), yield, take the GIL back, try again.  Never a
         * blocking acquire: that hands the lock to a thread without the GIL, which then waits for
         * the GIL while holding the lock -- the writer holding the GIL finds the lock taken on its
         * next put and blocks in turn, and every later put pays two hand-offs (a lock convoy:
         * 4 writers ran at a third of one).  Long holds (a file being allocated) back off to sleeps. */
        Py_BEGIN_ALLOW_THREADS
        if (spins < 64) {
            sched_yield();
        } else {
            struct timespec nap = {0, spins < 1024 ? 20000L : 200000L};
            nanosleep(&nap, NULL);
        }
        Py_END_ALLOW_THREADS
        got = PyObject_CallOneArg(self->acquire, Py_False);
        if (got == NULL) {
            Py_DECREF(key);
            return NULL;
        }
        locked = PyObject_IsTrue(got);
        Py_DECREF(got);
    }
    if (locked <= 0) {
        Py_DECREF(key);
        return locked < 0 ? NULL : Py_NewRef(Py_None);
    }
    PyObject *result = append_work(self, w, key);
    Py_DECREF(key);
    PyObject *exc_type, *exc_value, *exc_tb;
    PyErr_Fetch(&exc_type, &exc_value, &exc_tb);
    PyObject *rel = PyObject_CallNoArgs(self->release);
    if (rel == NULL) {
        Py_XDECREF(result);
        Py_XDECREF(exc_type);
        Py_XDECREF(exc_value);
        Py_XDECREF(exc_tb);
        return NULL;
    }
    Py_DECREF(rel);
    PyErr_Restore(exc_type, exc_value, exc_tb);
    return result;
}

/* -- statistics ------------------------------------------------------------------------------ */

typedef struct {
    PyObject_HEAD
    long long times, size;
} TopicCount;

static PyTypeObject TopicCountType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "rmqstore._native._cput.TopicCount",
    .tp_basicsize = sizeof(TopicCount),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
};

static int bucket(double ms)
{
    static const double bounds[] = {0, 10, 50, 100, 200, 500};
    for (int i = 0; i < 6; i++)
        if (ms <= bounds[i])
            return i;
    return 6;
}

static int count_ok(Putter *self, PyObject *topic, long long n, long long bytes, double ms)
{
    PyObject *c = PyDict_GetItemWithError(self->counts, topic);
    if (c == NULL) {
        if (PyErr_Occurred())
            return -1;
        c = PyObject_CallNoArgs((PyObject *)&TopicCountType);
        if (c == NULL)
            return -1;
        int r = PyDict_SetItem(self->counts, topic, c);
        Py_DECREF(c);
        if (r < 0)
            return -1;
    }
    ((TopicCount *)c)->times += n;
    ((TopicCount *)c)->size += bytes;
    self->ok_puts++;
    if (ms > self->max_ms)
        self->max_ms = ms;
    self->dist[bucket(ms)]++;
    return 0;
}

/* wake-up and statistics, or the Python finish (the waits of SYNC_FLUSH / SYNC_MASTER) */
static PyObject *finish(Putter *self, PyObject *result, PyObject *item, PyObject *topic, double t0, long long n,
                        long long bytes)
{
    if (result == NULL || result == Py_None)
        return result;
    if (self->finish != Py_None) {
        PyObject *begin = PyFloat_FromDouble(t0 / 1000.0);
        if (begin == NULL) {
            Py_DECREF(result);
            return NULL;
        }
        PyObject *args[3] = {result, item, begin};
        PyObject *out = PyObject_Vectorcall(self->finish, args, 3, NULL);
        Py_DECREF(begin);
        Py_DECREF(result);
        return out;
    }
    PyObject *status = SLOT(result, self->put_off[P_STATUS]);
    if (status != self->put_ok) { /* a file that could not be created: counted as the pure path counts */
        PyObject *ms = PyFloat_FromDouble(now_ms() - t0);
        if (ms == NULL) {
            Py_DECREF(result);
            return NULL;
        }
        PyObject *args[3] = {topic, result, ms};
        PyObject *r = PyObject_Vectorcall(self->record, args, 3, NULL);
        Py_DECREF(ms);
        if (r == NULL) {
            Py_DECREF(result);
            return NULL;
        }
        Py_DECREF(r);
        return result;
    }
    if (self->wakeup != Py_None) {
        PyObject *r = PyObject_CallNoArgs(self->wakeup);
        if (r == NULL) {
            Py_DECREF(result);
            return NULL;
        }
        Py_DECREF(r);
    }
    if (count_ok(self, topic, n, bytes, now_ms() - t0) < 0) {
        Py_DECREF(result);
        return NULL;
    }
    return result;
}

/* -- Putter.put ----------------------------------------------------------------------------------- */

static int read_head(Putter *self, Head *h, PyObject *sys_flag, PyObject *born_ts, PyObject *reconsume,
                     PyObject *born_host, PyObject *store_host)
{
    long long v;
    int r;
    if ((r = int_in(sys_flag, INT32_MIN, INT32_MAX, &v)) <= 0)
        return r;
    h->sys_flag = (int32_t)v & ~(RMQ_BORNHOST_V6_FLAG | RMQ_STOREHOST_V6_FLAG);
    if ((r = int_in(born_ts, LLONG_MIN, LLONG_MAX, &v)) <= 0)
        return r;
    h->born_ts = v;
    if ((r = int_in(reconsume, INT32_MIN, INT32_MAX, &v)) <= 0)
        return r;
    h->reconsume = (int32_t)v;
    if ((r = host_of(self, born_host, &h->born, 1)) <= 0)
        return r;
    if ((r = host_of(self, store_host, &h->host, 0)) <= 0)
        return r;
    if (h->born.ip_len == 16)
        h->sys_flag |= RMQ_BORNHOST_V6_FLAG;
    if (h->host.ip_len == 16)
        h->sys_flag |= RMQ_STOREHOST_V6_FLAG;
    return 1;
}

#define PURE() do { ret = Py_NewRef(Py_None); goto out; } while (0)
#define CHECK(expr) do { int r_ = (expr); if (r_ < 0) goto out; if (r_ == 0) PURE(); } while (0)

static PyObject *Putter_put(Putter *self, PyObject *msg)
{
    double t0 = now_ms();
    PyObject *ret = NULL;
    Rec rec;
    memset(&rec, 0, sizeof rec);
    Work w;
    memset(&w, 0, sizeof w);
    if (Py_TYPE(msg) != self->msg_type)
        return Py_NewRef(Py_None);
    PyObject *f[M_COUNT];
    for (int i = 0; i < M_COUNT; i++)
        if ((f[i] = SLOT(msg, self->msg_off[i])) == NULL)
            return Py_NewRef(Py_None);
    /* replays take the pure path (recorded values, checked queue offset) */
    if (f[M_STORE_TS] != Py_None || f[M_QUEUE_OFFSET] != Py_None || f[M_BODY_CRC] != Py_None)
        return Py_NewRef(Py_None);
    if (!PyBytes_CheckExact(f[M_BODY]) || !PyUnicode_CheckExact(f[M_PROPS]) ||
        PyUnicode_GET_LENGTH(f[M_PROPS]) > RMQ_MAX_PROPERTIES_BYTES)
        return Py_NewRef(Py_None);
    CHECK(store_open(self));
    CHECK(queue_limit(self, f[M_TOPIC], f[M_QUEUE_ID]));
    long long v;
    CHECK(int_in(f[M_QUEUE_ID], 0, INT32_MAX, &v));
    w.h.queue_id = (int32_t)v;
    CHECK(int_in(f[M_FLAG], INT32_MIN, INT32_MAX, &v));
    rec.flag = (int32_t)v;
    CHECK(int_in(f[M_PREPARED], LLONG_MIN, LLONG_MAX, &v));
    w.h.prepared = v;
    CHECK(read_head(self, &w.h, f[M_SYS_FLAG], f[M_BORN_TS], f[M_RECONSUME], f[M_BORN_HOST], f[M_STORE_HOST]));
    w.gets_unit = rmq_gets_queue_unit(w.h.sys_flag);
    CHECK(utf8_of(f[M_TOPIC], &w.topic_p, &w.topic_len));
    CHECK(utf8_of(f[M_PROPS], &rec.props_p, &rec.props_len));
    if (w.topic_len > RMQ_MAX_TOPIC_BYTES_V1 || rec.props_len > RMQ_MAX_PROPERTIES_BYTES ||
        has_delay(rec.props_p, rec.props_len))
        PURE(); /* the delay rewrite, or a refusal the pure path words */
    rec.body_len = PyBytes_GET_SIZE(f[M_BODY]);
    if (rec.body_len > self->max_message_size)
        PURE();
    rec.length = head_size(&w.h) + rec.body_len + 1 + w.topic_len + 2 + rec.props_len;
    if (rec.length > self->max_record_size || rec.length + RMQ_END_FILE_MIN_BLANK_LENGTH > self->file_size)
        PURE();
    rec.crc = rmq_crc32(0, (const unsigned char *)PyBytes_AS_STRING(f[M_BODY]), (size_t)rec.body_len) & 0x7FFFFFFF;
    /* held: next_file_for_put may let other threads run */
    rec.body = Py_NewRef(f[M_BODY]);
    rec.props = Py_NewRef(f[M_PROPS]);
    w.topic = Py_NewRef(f[M_TOPIC]);
    w.queue_id = Py_NewRef(f[M_QUEUE_ID]);
    Py_XINCREF(w.h.born.addr);
    Py_INCREF(w.h.host.addr);
    w.recs = &rec;
    w.n = 1;
    w.length = rec.length;
    ret = finish(self, run_locked(self, &w), msg, w.topic, t0, 1, rec.length);
    Py_XDECREF(w.h.born.addr);
    Py_DECREF(w.h.host.addr);
out:
    Py_XDECREF(rec.body);
    Py_XDECREF(rec.props);
    Py_XDECREF(w.topic);
    Py_XDECREF(w.queue_id);
    return ret;
}

/* -- Putter.put_batch -------------------------------------------------------------------------------- */

static PyObject *Putter_put_batch(Putter *self, PyObject *batch)
{
    double t0 = now_ms();
    PyObject *ret = NULL;
    Rec small[SMALL_BATCH];
    Work w;
    memset(&w, 0, sizeof w);
    Py_ssize_t held = 0;
    int hosts_held = 0;
    if (Py_TYPE(batch) != self->batch_type)
        return Py_NewRef(Py_None);
    PyObject *f[B_COUNT];
    for (int i = 0; i < B_COUNT; i++)
        if ((f[i] = SLOT(batch, self->batch_off[i])) == NULL)
            return Py_NewRef(Py_None);
    PyObject *items = f[B_ITEMS];
    if (!PyList_CheckExact(items) || PyList_GET_SIZE(items) < 1 || PyList_GET_SIZE(items) > self->max_batch ||
        !PyUnicode_CheckExact(f[B_PROPS]))
        return Py_NewRef(Py_None);
    CHECK(store_open(self));
    CHECK(queue_limit(self, f[B_TOPIC], f[B_QUEUE_ID]));
    long long v;
    CHECK(int_in(f[B_QUEUE_ID], 0, INT32_MAX, &v));
    w.h.queue_id = (int32_t)v;
    CHECK(read_head(self, &w.h, f[B_SYS_FLAG], f[B_BORN_TS], f[B_RECONSUME], f[B_BORN_HOST], f[B_STORE_HOST]));
    w.gets_unit = 1;
    if (rmq_transaction_value(w.h.sys_flag) != RMQ_TX_NOT)
        PURE(); /* a batch with a transaction type is refused by the pure path */
    w.h.prepared = 0;
    CHECK(utf8_of(f[B_TOPIC], &w.topic_p, &w.topic_len));
    CHECK(utf8_of(f[B_PROPS], &w.bprops_p, &w.bprops_len));
    if (w.topic_len > RMQ_MAX_TOPIC_BYTES_V1 || has_delay(w.bprops_p, w.bprops_len))
        PURE();
    w.n = PyList_GET_SIZE(items);
    w.recs = w.n <= SMALL_BATCH ? small : PyMem_Malloc(sizeof(Rec) * (size_t)w.n);
    if (w.recs == NULL) {
        PyErr_NoMemory();
        goto out;
    }
    long long fixed = head_size(&w.h) + 1 + w.topic_len + 2, total_body = 0;
    for (Py_ssize_t i = 0; i < w.n; i++) {
        PyObject *it = PyList_GET_ITEM(items, i);
        if (Py_TYPE(it) != self->item_type)
            PURE();
        PyObject *body = SLOT(it, self->item_off[I_BODY]), *props = SLOT(it, self->item_off[I_PROPS]),
                 *flag = SLOT(it, self->item_off[I_FLAG]);
        if (body == NULL || props == NULL || !PyBytes_CheckExact(body) || !PyUnicode_CheckExact(props))
            PURE();
        Rec *rc = &w.recs[i];
        CHECK(int_in(flag, INT32_MIN, INT32_MAX, &v));
        rc->flag = (int32_t)v;
        CHECK(utf8_of(props, &rc->props_p, &rc->props_len));
        rc->body_len = PyBytes_GET_SIZE(body);
        /* the item's properties, a separator unless they are empty or end in one, the batch's */
        rc->sep = w.bprops_len && rc->props_len && rc->props_p[rc->props_len - 1] != '\x02';
        Py_ssize_t all_props = rc->props_len + rc->sep + w.bprops_len;
        if (all_props > RMQ_MAX_PROPERTIES_BYTES || rc->body_len > self->max_message_size)
            PURE();
        total_body += rc->body_len;
        rc->length = fixed + rc->body_len + all_props;
        w.length += rc->length;
        rc->crc = rmq_crc32(0, (const unsigned char *)PyBytes_AS_STRING(body), (size_t)rc->body_len) & 0x7FFFFFFF;
        rc->body = Py_NewRef(body);
        rc->props = Py_NewRef(props);
        held = i + 1;
    }
    if (total_body > self->max_message_size || w.length + RMQ_END_FILE_MIN_BLANK_LENGTH > self->file_size)
        PURE();
    w.topic = Py_NewRef(f[B_TOPIC]);
    w.queue_id = Py_NewRef(f[B_QUEUE_ID]);
    w.batch_props = Py_NewRef(f[B_PROPS]);
    Py_XINCREF(w.h.born.addr);
    Py_INCREF(w.h.host.addr);
    hosts_held = 1;
    ret = finish(self, run_locked(self, &w), batch, w.topic, t0, w.n, w.length);
out:
    for (Py_ssize_t i = 0; i < held; i++) {
        Py_DECREF(w.recs[i].body);
        Py_DECREF(w.recs[i].props);
    }
    if (w.recs != NULL && w.recs != small)
        PyMem_Free(w.recs);
    if (hosts_held) {
        Py_XDECREF(w.h.born.addr);
        Py_DECREF(w.h.host.addr);
    }
    Py_XDECREF(w.topic);
    Py_XDECREF(w.queue_id);
    Py_XDECREF(w.batch_props);
    return ret;
}

/* -- Putter.counters -------------------------------------------------------------------------------- */

static PyObject *Putter_counters(Putter *self, PyObject *unused)
{
    PyObject *times = PyDict_New(), *sizes = PyDict_New(), *dist = PyList_New(7), *out = NULL;
    if (times == NULL || sizes == NULL || dist == NULL)
        goto done;
    PyObject *topic, *c;
    Py_ssize_t i = 0;
    while (PyDict_Next(self->counts, &i, &topic, &c)) {
        PyObject *t = PyLong_FromLongLong(((TopicCount *)c)->times);
        PyObject *s = PyLong_FromLongLong(((TopicCount *)c)->size);
        int r = (t == NULL || s == NULL || PyDict_SetItem(times, topic, t) < 0 || PyDict_SetItem(sizes, topic, s) < 0);
        Py_XDECREF(t);
        Py_XDECREF(s);
        if (r)
            goto done;
    }
    for (int k = 0; k < 7; k++) {
        PyObject *n = PyLong_FromLongLong(self->dist[k]);
        if (n == NULL)
            goto done;
        PyList_SET_ITEM(dist, k, n);
    }
    out = Py_BuildValue("{s:O,s:O,s:L,s:d,s:O}", "times", times, "sizes", sizes, "ok", self->ok_puts,
                        "max_ms", self->max_ms, "dist", dist);
done:
    Py_XDECREF(times);
    Py_XDECREF(sizes);
    Py_XDECREF(dist);
    return out;
}

/* -- the type ------------------------------------------------------------------------------------ */

#define PUTTER_OBJECTS(X) X(store) X(commit_log) X(queue) X(good_topics) X(acquire) X(release) X(clock) \
    X(default_host) X(addr_cache) X(wakeup) X(finish) X(next_file) X(slave_role) X(null_tracer) X(record) X(counts) \
    X(put_ok) X(append_ok) X(end_of_file) X(unknown_error) X(empty) X(zero) X(config) X(last_key) X(table) X(last_mf) X(last_mapped)
#define PUTTER_TYPES(X) X(msg_type) X(batch_type) X(item_type) X(addr_type) X(append_type) X(put_type)

static int Putter_traverse(Putter *self, visitproc visit, void *arg)
{
#define V(name) Py_VISIT(self->name);
    PUTTER_OBJECTS(V)
    PUTTER_TYPES(V)
#undef V
    return 0;
}

static int Putter_clear(Putter *self)
{
#define C(name) Py_CLEAR(self->name);
    PUTTER_OBJECTS(C)
    PUTTER_TYPES(C)
#undef C
    return 0;
}

static void Putter_dealloc(Putter *self)
{
    PyObject_GC_UnTrack(self);
    Putter_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int offsets_of(PyTypeObject *tp, const char **names, int n, Py_ssize_t *out)
{
    for (int i = 0; i < n; i++)
        if (slot_offset(tp, names[i], &out[i]) < 0)
            return -1;
    return 0;
}

static int Putter_init(Putter *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"store", "commit_log", "queue", "good_topics", "acquire", "release", "clock",
                             "default_host", "addr_cache", "wakeup", "finish", "next_file", "record",
                             "slave_role", "null_tracer", "types", "statuses", "max_message_size", "max_record_size",
                             "file_size", "max_batch", NULL};
    PyObject *types, *statuses;
    PyObject *o[15];
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OOOO!OOOOO!OOOOOOO!O!LLLL:Putter", kwlist, &o[0], &o[1], &o[2],
                                     &PyDict_Type, &o[3], &o[4], &o[5], &o[6], &o[7], &PyDict_Type, &o[8], &o[9],
                                     &o[10], &o[11], &o[12], &o[13], &o[14], &PyTuple_Type, &types, &PyTuple_Type,
                                     &statuses, &self->max_message_size, &self->max_record_size, &self->file_size,
                                     &self->max_batch))
        return -1;
    if (PyTuple_GET_SIZE(types) != 6 || PyTuple_GET_SIZE(statuses) != 4) {
        PyErr_SetString(PyExc_ValueError, "types: 6 classes; statuses: 4 enum members");
        return -1;
    }
    for (int i = 0; i < 6; i++)
        if (!PyType_Check(PyTuple_GET_ITEM(types, i))) {
            PyErr_SetString(PyExc_TypeError, "types must be classes");
            return -1;
        }
    if (self->file_size <= RMQ_END_FILE_MIN_BLANK_LENGTH || self->file_size > INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "file_size must be in 9..2**31-1");
        return -1;
    }
    Putter_clear(self);
    PyObject **dst[15] = {&self->store, &self->commit_log, &self->queue, &self->good_topics, &self->acquire,
                          &self->release, &self->clock, &self->default_host, &self->addr_cache, &self->wakeup,
                          &self->finish, &self->next_file, &self->record, &self->slave_role,
                          &self->null_tracer};
    for (int i = 0; i < 15; i++)
        *dst[i] = Py_NewRef(o[i]);
    PyTypeObject **tdst[6] = {&self->msg_type, &self->batch_type, &self->item_type, &self->addr_type,
                              &self->append_type, &self->put_type};
    for (int i = 0; i < 6; i++)
        *tdst[i] = (PyTypeObject *)Py_NewRef(PyTuple_GET_ITEM(types, i));
    self->put_ok = Py_NewRef(PyTuple_GET_ITEM(statuses, 0));
    self->append_ok = Py_NewRef(PyTuple_GET_ITEM(statuses, 1));
    self->end_of_file = Py_NewRef(PyTuple_GET_ITEM(statuses, 2));
    self->unknown_error = Py_NewRef(PyTuple_GET_ITEM(statuses, 3));
    if ((self->config = PyObject_GetAttr(self->store, s_config)) == NULL ||
        (self->table = PyObject_GetAttr(self->commit_log, s_topic_queue_table)) == NULL)
        return -1;
    if (!PyDict_CheckExact(self->table)) {
        PyErr_SetString(PyExc_TypeError, "topic_queue_table must be a dict");
        return -1;
    }
    if ((self->empty = PyUnicode_FromString("")) == NULL || (self->zero = PyLong_FromLong(0)) == NULL ||
        (self->counts = PyDict_New()) == NULL)
        return -1;
    if (offsets_of(self->msg_type, MSG_SLOTS, M_COUNT, self->msg_off) < 0 ||
        offsets_of(self->batch_type, BATCH_SLOTS, B_COUNT, self->batch_off) < 0 ||
        offsets_of(self->item_type, ITEM_SLOTS, I_COUNT, self->item_off) < 0 ||
        offsets_of(self->append_type, APPEND_SLOTS, A_COUNT, self->append_off) < 0 ||
        offsets_of(self->put_type, PUT_SLOTS, P_COUNT, self->put_off) < 0)
        return -1;
    if (!PyTuple_Check(self->default_host) || Py_TYPE(self->default_host) != self->addr_type) {
        PyErr_SetString(PyExc_TypeError, "default_host must be an Address");
        return -1;
    }
    self->ok_puts = 0;
    self->max_ms = 0;
    memset(self->dist, 0, sizeof self->dist);
    return 0;
}

static PyMethodDef Putter_methods[] = {
    {"put", (PyCFunction)Putter_put, METH_O,
     "put(msg) -> PutMessageResult, or None when the pure path must run (nothing was touched)."},
    {"put_batch", (PyCFunction)Putter_put_batch, METH_O,
     "put_batch(batch) -> PutMessageResult, or None when the pure path must run (nothing was touched)."},
    {"counters", (PyCFunction)Putter_counters, METH_NOARGS,
     "counters() -> dict: the statistics of the puts this object counted (times, sizes, ok, max_ms, dist)."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject PutterType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "rmqstore._native._cput.Putter",
    .tp_basicsize = sizeof(Putter),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "The compiled put of one store (see rmqstore.engine.native_put).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Putter_init,
    .tp_dealloc = (destructor)Putter_dealloc,
    .tp_traverse = (traverseproc)Putter_traverse,
    .tp_clear = (inquiry)Putter_clear,
    .tp_methods = Putter_methods,
};

/* -- module ----------------------------------------------------------------------------------- */

/* the allocate service's pre-fault of a fresh file: one madvise(MADV_POPULATE_WRITE) over the
 * whole mapping with the GIL released.  CPython's mmap.madvise holds the GIL, and populating
 * 64 MiB (zeroing 16,384 pages) takes tens of milliseconds: the writers stopped for that long
 * every file -- at a million 1 KiB puts a second, a new file every 60 ms. */
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux >= 5.14 */
#endif

static PyObject *pre_fault(PyObject *Py_UNUSED(module), PyObject *arg)
{
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_WRITABLE) < 0)
        return NULL;
    long page = sysconf(_SC_PAGESIZE);
    int r = -1;
    if (page > 0 && ((uintptr_t)view.buf % (uintptr_t)page) == 0) {
        Py_BEGIN_ALLOW_THREADS
        r = madvise(view.buf, (size_t)view.len, MADV_POPULATE_WRITE);
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&view);
    return PyBool_FromLong(r == 0);
}

static PyMethodDef cput_methods[] = {
    {"pre_fault", pre_fault, METH_O,
     "Fault every page of a page-aligned writable mapping in (madvise MADV_POPULATE_WRITE), the GIL "
     "released; False where the kernel refuses (too old, not a mapping)."},
    {NULL, NULL, 0, NULL},
};

static int cput_exec(PyObject *m)
{
    rmq_crc_init();
    if (intern_names() < 0 || PyType_Ready(&TopicCountType) < 0 || PyType_Ready(&PutterType) < 0)
        return -1;
    if (PyModule_AddObjectRef(m, "Putter", (PyObject *)&PutterType) < 0)
        return -1;
    PyObject *layout = Py_BuildValue(
        "{s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i}",
        "TOTALSIZE", RMQ_POS_TOTALSIZE, "MAGICCODE", RMQ_POS_MAGIC, "BODYCRC", RMQ_POS_BODYCRC,
        "QUEUEID", RMQ_POS_QUEUEID, "FLAG", RMQ_POS_FLAG, "QUEUEOFFSET", RMQ_POS_QUEUEOFFSET,
        "PHYSICALOFFSET", RMQ_POS_PHYSICALOFFSET, "SYSFLAG", RMQ_POS_SYSFLAG,
        "BORNTIMESTAMP", RMQ_POS_BORNTIMESTAMP, "BORNHOST", RMQ_POS_BORNHOST,
        "STORETIMESTAMP", rmq_pos_store_timestamp(0), "STORETIMESTAMP_V6", rmq_pos_store_timestamp(RMQ_BORNHOST_V6_FLAG),
        "BODYLENGTH", rmq_pos_body_length(0), "BODYLENGTH_V6", rmq_pos_body_length(RMQ_BORNHOST_V6_FLAG | RMQ_STOREHOST_V6_FLAG));
    if (layout == NULL || PyModule_AddObject(m, "LAYOUT", layout) < 0) {
        Py_XDECREF(layout);
        return -1;
    }
    return rmq_add_constants(m, (const char *)NULL);
}

static PyModuleDef_Slot cput_slots[] = {
    {Py_mod_exec, cput_exec},
    {0, NULL},
};

static struct PyModuleDef cput_module = {
    PyModuleDef_HEAD_INIT, "rmqstore._native._cput", "A record's encoding and its append under the put lock, compiled.", 0,
    cput_methods, cput_slots, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__cput(void)
{
    return PyModuleDef_Init(&cput_module);
}
