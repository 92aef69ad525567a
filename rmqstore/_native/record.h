/* The commitlog record's layout, limits and sysFlag rules, as the C fast path uses them.
 *
 * The numbers here are Python's (rmqstore/format/layout.py's table and limits, rmqstore/format/sysflag.py's
 * bits): every extension module exports them -- LAYOUT (positions) and CONSTANTS (the rest, from
 * rmq_add_constants below) -- and tests/unit/test_native_constants.py checks each one against
 * Python's, so a change on one side that the other does not follow fails the tests instead of
 * writing other bytes.  The two transaction rules are written once here, as in rmqstore.format.sysflag.
 */
#ifndef RMQ_RECORD_H
#define RMQ_RECORD_H

#include <stdarg.h>
#include <stdint.h>
#include <string.h>

#define RMQ_MESSAGE_MAGIC_CODE ((int32_t)0xDAA320A7)
#define RMQ_MESSAGE_MAGIC_CODE_V2 ((int32_t)0xDAA320AB)
#define RMQ_BLANK_MAGIC_CODE ((int32_t)0xCBD43194)
#define RMQ_BORNHOST_V6_FLAG (1 << 4)
#define RMQ_STOREHOST_V6_FLAG (1 << 5)

/* the transaction type bits of sysFlag (MessageSysFlag, rmqstore.format.sysflag) */
#define RMQ_TX_MASK 0xC
#define RMQ_TX_NOT 0x0
#define RMQ_TX_PREPARED 0x4
#define RMQ_TX_COMMIT 0x8
#define RMQ_TX_ROLLBACK 0xC

/* limits of the record (rmqstore.format.layout): the V1 topic length is a signed byte, the properties
 * length a short; a record leaves room for an 8-byte blank header behind it */
#define RMQ_MAX_TOPIC_BYTES_V1 127
#define RMQ_MAX_PROPERTIES_BYTES 32767
#define RMQ_END_FILE_MIN_BLANK_LENGTH 8

/* fixed positions (every record, IPv4 or IPv6) */
#define RMQ_POS_TOTALSIZE 0
#define RMQ_POS_MAGIC 4
#define RMQ_POS_BODYCRC 8
#define RMQ_POS_QUEUEID 12
#define RMQ_POS_FLAG 16
#define RMQ_POS_QUEUEOFFSET 20
#define RMQ_POS_PHYSICALOFFSET 28
#define RMQ_POS_SYSFLAG 36
#define RMQ_POS_BORNTIMESTAMP 40
#define RMQ_POS_BORNHOST 48

static inline int32_t rmq_get_i32(const unsigned char *p)
{
    return (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3]);
}

static inline int64_t rmq_get_i64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = (v << 8) | p[i];
    return (int64_t)v;
}

static inline int rmq_get_u16(const unsigned char *p)
{
    return (p[0] << 8) | p[1];
}

static inline void rmq_put_i32(unsigned char *p, int32_t v)
{
    uint32_t u = (uint32_t)v;
    p[0] = (unsigned char)(u >> 24);
    p[1] = (unsigned char)(u >> 16);
    p[2] = (unsigned char)(u >> 8);
    p[3] = (unsigned char)u;
}

static inline void rmq_put_i64(unsigned char *p, int64_t v)
{
    uint64_t u = (uint64_t)v;
    for (int i = 7; i >= 0; i--) {
        p[i] = (unsigned char)u;
        u >>= 8;
    }
}

static inline int rmq_transaction_value(int32_t sys_flag)
{
    return sys_flag & RMQ_TX_MASK;
}

/* rmqstore.format.sysflag.gets_queue_unit: not a transaction, or its commit */
static inline int rmq_gets_queue_unit(int32_t sys_flag)
{
    int tx = rmq_transaction_value(sys_flag);
    return tx == RMQ_TX_NOT || tx == RMQ_TX_COMMIT;
}

/* rmqstore.format.sysflag.gets_index_entries: all but a rollback */
static inline int rmq_gets_index_entries(int32_t sys_flag)
{
    return rmq_transaction_value(sys_flag) != RMQ_TX_ROLLBACK;
}

/* where the fields after BORNHOST start: BORNHOST is 8 bytes (IPv4) or 20 (IPv6), STOREHOST likewise */
static inline int rmq_born_size(int sys_flag)
{
    return (sys_flag & RMQ_BORNHOST_V6_FLAG) ? 20 : 8;
}

static inline int rmq_store_size(int sys_flag)
{
    return (sys_flag & RMQ_STOREHOST_V6_FLAG) ? 20 : 8;
}

/* STORETIMESTAMP follows BORNHOST */
static inline int rmq_pos_store_timestamp(int sys_flag)
{
    return RMQ_POS_BORNHOST + rmq_born_size(sys_flag);
}

/* BODYLENGTH: after STORETIMESTAMP(8), STOREHOST, RECONSUMETIMES(4), PREPAREDTRANSACTIONOFFSET(8) */
static inline int rmq_pos_body_length(int sys_flag)
{
    return rmq_pos_store_timestamp(sys_flag) + 8 + rmq_store_size(sys_flag) + 4 + 8;
}

#ifdef Py_PYTHON_H
/* Add the record constants every module shares, and the module's own (name/value pairs ending in
 * NULL), to the module as CONSTANTS: tests/unit/test_native_constants.py checks each against Python's. */
static int rmq_add_constants(PyObject *m, ...)
{
    PyObject *d = Py_BuildValue(
        "{s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i}",
        "MESSAGE_MAGIC_CODE", (int)RMQ_MESSAGE_MAGIC_CODE, "MESSAGE_MAGIC_CODE_V2", (int)RMQ_MESSAGE_MAGIC_CODE_V2,
        "BLANK_MAGIC_CODE", (int)RMQ_BLANK_MAGIC_CODE, "BORNHOST_V6_FLAG", RMQ_BORNHOST_V6_FLAG,
        "STOREHOSTADDRESS_V6_FLAG", RMQ_STOREHOST_V6_FLAG, "TRANSACTION_MASK", RMQ_TX_MASK,
        "TRANSACTION_NOT_TYPE", RMQ_TX_NOT, "TRANSACTION_PREPARED_TYPE", RMQ_TX_PREPARED,
        "TRANSACTION_COMMIT_TYPE", RMQ_TX_COMMIT, "TRANSACTION_ROLLBACK_TYPE", RMQ_TX_ROLLBACK,
        "MAX_TOPIC_BYTES_V1", RMQ_MAX_TOPIC_BYTES_V1, "MAX_PROPERTIES_BYTES", RMQ_MAX_PROPERTIES_BYTES,
        "END_FILE_MIN_BLANK_LENGTH", RMQ_END_FILE_MIN_BLANK_LENGTH);
    if (d == NULL)
        return -1;
    va_list ap;
    va_start(ap, m);
    const char *name;
    while ((name = va_arg(ap, const char *)) != NULL) {
        PyObject *v = PyLong_FromLong(va_arg(ap, long));
        if (v == NULL || PyDict_SetItemString(d, name, v) < 0) {
            Py_XDECREF(v);
            va_end(ap);
            Py_DECREF(d);
            return -1;
        }
        Py_DECREF(v);
    }
    va_end(ap);
    if (PyModule_AddObject(m, "CONSTANTS", d) < 0) {
        Py_DECREF(d);
        return -1;
    }
    return 0;
}
#endif

#endif
