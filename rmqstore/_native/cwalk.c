/* rmqstore._native._cwalk: the segment walk with its body CRC, compiled (see rmqstore/common/native.py).
 *
 * walk() is rmqstore.format.walk.step in a loop -- the same decision table (step.h, shared with the
 * dispatch parse and the full decode), in the same order, so
 * a walk ends at the same position with the same End kind (tests/unit/test_native_walk.py
 * proves it against the pure walk over every fixture segment and random garbage).  It
 * only reports *where* and *which kind*; rmqstore.format.walk re-runs the pure step at that one
 * position for the reason's words, so the vocabulary of ends stays in one place.
 *
 * The loop touches no Python object: it runs with the GIL released, holding the caller's
 * Py_buffer (an mmap cannot be closed under it).  Every read is bounds-checked against
 * the readable limit first; garbage ends the walk, it never reads past the buffer.
 *
 * Also exposes crc32() (zlib's signature) and LAYOUT, the record positions this C code
 * uses, which tests/unit/test_native_crc.py compares with the layout table.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "crc32.h"
#include "record.h"
#include "step.h"
#include "utf8.h"

static PyObject *cwalk_crc32(PyObject *self, PyObject *args)
{
    Py_buffer view;
    unsigned int value = 0;
    if (!PyArg_ParseTuple(args, "y*|I:crc32", &view, &value))
        return NULL;
    uint32_t crc;
    if (view.len > 65536) {
        Py_BEGIN_ALLOW_THREADS
        crc = rmq_crc32(value, view.buf, (size_t)view.len);
        Py_END_ALLOW_THREADS
    } else {
        crc = rmq_crc32(value, view.buf, (size_t)view.len);
    }
    PyBuffer_Release(&view);
    return PyLong_FromUnsignedLong(crc);
}




/* one record as the walk saw it (the columns of walk(..., records=True)) */
typedef struct {
    int64_t pos, size, magic, crc, crc_ok, queue_id, queue_offset, physical_offset, sys_flag, body_len;
} rmq_span;

/* a growable array, filled without the GIL (malloc only) */
typedef struct {
    void *data;
    size_t len, cap, item;
    int failed;
} rmq_vec;

static void *rmq_vec_push(rmq_vec *v)
{
    if (v->failed)
        return NULL;
    if (v->len == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 256;
        void *d = realloc(v->data, cap * v->item);
        if (d == NULL) {
            v->failed = 1;
            return NULL;
        }
        v->data = d;
        v->cap = cap;
    }
    return (char *)v->data + (v->len++) * v->item;
}

static void rmq_push_i64(rmq_vec *v, int64_t x)
{
    int64_t *p = rmq_vec_push(v);
    if (p != NULL)
        *p = x;
}

typedef struct {
    int64_t pos, records, used;
    int kind;
    int64_t end_size; /* the ending step's size (a blank's declared size) */
} rmq_walk_end;

static void rmq_walk(const unsigned char *p, int64_t size, int64_t lim, int64_t start, int64_t base,
                     int have_stop, int64_t stop_at, int crc, int strict, rmq_vec *crc_failures,
                     rmq_vec *mismatches, rmq_vec *spans, rmq_walk_end *end)
{
    int64_t pos = start, records = 0, used = 0;
    rmq_step_t s;
    for (;;) {
        if (have_stop && stop_at <= pos && pos < lim) {
            end->kind = RMQ_STOPPED;
            end->end_size = 0;
            break;
        }
        rmq_step(p, size, lim, pos, base, crc, strict, &s);
        if (s.kind != RMQ_RECORD) {
            end->kind = s.kind;
            end->end_size = s.size;
            break;
        }
        records++;
        used += s.size;
        int64_t at = base + pos;
        if (crc_failures != NULL && s.crc_ok == 0)
            rmq_push_i64(crc_failures, at);
        const unsigned char *r = p + pos;
        int64_t phys = rmq_get_i64(r + RMQ_POS_PHYSICALOFFSET);
        if (mismatches != NULL && phys != at)
            rmq_push_i64(mismatches, at);
        if (spans != NULL) {
            rmq_span *sp = rmq_vec_push(spans);
            if (sp != NULL) {
                sp->pos = at;
                sp->size = s.size;
                sp->magic = s.magic;
                sp->crc = rmq_get_i32(r + RMQ_POS_BODYCRC);
                sp->queue_id = rmq_get_i32(r + RMQ_POS_QUEUEID);
                sp->queue_offset = rmq_get_i64(r + RMQ_POS_QUEUEOFFSET);
                sp->physical_offset = phys;
                sp->crc_ok = s.crc_ok;
                sp->sys_flag = s.sys_flag;
                sp->body_len = s.body_len;
            }
        }
        pos += s.size;
    }
    end->pos = pos;
    end->records = records;
    end->used = used;
}

static PyObject *rmq_vec_bytes(rmq_vec *v)
{
    return PyBytes_FromStringAndSize(v->data ? (const char *)v->data : "", (Py_ssize_t)(v->len * v->item));
}

static PyObject *cwalk_walk(PyObject *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"buf", "base", "start", "limit", "stop_at", "crc", "strict", "collect", "spans", NULL};
    Py_buffer view;
    long long base = 0, start = 0, limit = -1, stop_at = -1;
    int crc = 0, strict = 0, collect = 0, want_spans = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "y*|LLLLpppp:walk", kwlist, &view, &base, &start, &limit,
                                     &stop_at, &crc, &strict, &collect, &want_spans))
        return NULL;
    int64_t size = (int64_t)view.len;
    int64_t lim = (limit < 0 || limit > size) ? size : (int64_t)limit;
    rmq_vec fails = {NULL, 0, 0, sizeof(int64_t), 0};
    rmq_vec mism = {NULL, 0, 0, sizeof(int64_t), 0};
    rmq_vec spans = {NULL, 0, 0, sizeof(rmq_span), 0};
    rmq_walk_end end;
    Py_BEGIN_ALLOW_THREADS
    rmq_walk((const unsigned char *)view.buf, size, lim, (int64_t)start, (int64_t)base, stop_at >= 0,
             (int64_t)stop_at, crc, strict, collect ? &fails : NULL, collect ? &mism : NULL,
             want_spans ? &spans : NULL, &end);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    PyObject *result = NULL;
    if (fails.failed || mism.failed || spans.failed) {
        PyErr_NoMemory();
    } else {
        PyObject *f = collect ? rmq_vec_bytes(&fails) : (Py_INCREF(Py_None), Py_None);
        PyObject *m = collect ? rmq_vec_bytes(&mism) : (Py_INCREF(Py_None), Py_None);
        PyObject *s = want_spans ? rmq_vec_bytes(&spans) : (Py_INCREF(Py_None), Py_None);
        if (f != NULL && m != NULL && s != NULL)
            result = Py_BuildValue("(LiLLLNNN)", (long long)end.pos, end.kind, (long long)end.records,
                                   (long long)end.used, (long long)end.end_size, f, m, s);
        else {
            Py_XDECREF(f);
            Py_XDECREF(m);
            Py_XDECREF(s);
        }
    }
    free(fails.data);
    free(mism.data);
    free(spans.data);
    return result;
}

static PyMethodDef cwalk_methods[] = {
    {"crc32", cwalk_crc32, METH_VARARGS,
     "crc32(data, value=0) -> int: zlib's CRC-32 of a bytes-like object, continuing `value`."},
    {"walk", (PyCFunction)(void (*)(void))cwalk_walk, METH_VARARGS | METH_KEYWORDS,
     "walk(buf, base=0, start=0, limit=-1, stop_at=-1, crc=False, strict=False, collect=False, spans=False)\n"
     "-> (pos, kind, records, bytes_in_records, end_size, crc_failures, mismatches, spans): rmqstore.format.walk's\n"
     "segment walk from `start` to its first end (kind 0: stopped at stop_at; 1 blank, 2 unwritten,\n"
     "3 out of bytes, 4 corrupt).  limit/stop_at < 0: none.  collect: the physical offsets of CRC\n"
     "failures and PHYSICALOFFSET mismatches, as native int64 bytes; spans: 10 int64 per record\n"
     "(offset, size, magic, stored CRC, crc_ok -1/0/1, queue id, queue offset, PHYSICALOFFSET field,\n"
     "sys flag, body length)."},
    {NULL, NULL, 0, NULL},
};

static int cwalk_exec(PyObject *m)
{
    rmq_crc_init();
    PyObject *layout = Py_BuildValue(
        "{s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i}",
        "TOTALSIZE", RMQ_POS_TOTALSIZE, "MAGICCODE", RMQ_POS_MAGIC, "BODYCRC", RMQ_POS_BODYCRC,
        "QUEUEID", RMQ_POS_QUEUEID, "FLAG", RMQ_POS_FLAG, "QUEUEOFFSET", RMQ_POS_QUEUEOFFSET,
        "PHYSICALOFFSET", RMQ_POS_PHYSICALOFFSET, "SYSFLAG", RMQ_POS_SYSFLAG,
        "BORNTIMESTAMP", RMQ_POS_BORNTIMESTAMP, "BORNHOST", RMQ_POS_BORNHOST,
        "STORETIMESTAMP", rmq_pos_store_timestamp(0), "STORETIMESTAMP_V6", rmq_pos_store_timestamp(RMQ_BORNHOST_V6_FLAG),
        "BODYLENGTH", rmq_pos_body_length(0));
    if (layout == NULL || PyModule_AddObject(m, "LAYOUT", layout) < 0) {
        Py_XDECREF(layout);
        return -1;
    }
    if (PyModule_AddStringConstant(m, "CRC_KERNEL", rmq_crc_use_clmul ? "pclmulqdq" : "slice-by-8") < 0)
        return -1;
    if (rmq_add_constants(m, "MIN_RECORD_SIZE", (long)RMQ_MIN_RECORD_SIZE, (const char *)NULL) < 0)
        return -1;
    return 0;
}

static PyModuleDef_Slot cwalk_slots[] = {
    {Py_mod_exec, cwalk_exec},
    {0, NULL},
};

static struct PyModuleDef cwalk_module = {
    PyModuleDef_HEAD_INIT, "rmqstore._native._cwalk", "The segment walk with its body CRC, compiled.", 0,
    cwalk_methods, cwalk_slots, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__cwalk(void)
{
    return PyModuleDef_Init(&cwalk_module);
}
