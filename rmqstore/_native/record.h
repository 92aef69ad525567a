/* The commitlog record's layout, as the C fast path uses it.
 *
 * The numbers here are the layout table's (rmqstore/layout.py, MESSAGE_FIELDS): the
 * extension modules check them against the table at import (rmqstore.native calls
 * check_layout), so a change to the table that the C code does not follow fails loudly
 * instead of writing other bytes.
 */
#ifndef RMQ_RECORD_H
#define RMQ_RECORD_H

#include <stdint.h>
#include <string.h>

#define RMQ_MESSAGE_MAGIC_CODE ((int32_t)0xDAA320A7)
#define RMQ_MESSAGE_MAGIC_CODE_V2 ((int32_t)0xDAA320AB)
#define RMQ_BLANK_MAGIC_CODE ((int32_t)0xCBD43194)
#define RMQ_BORNHOST_V6_FLAG (1 << 4)
#define RMQ_STOREHOST_V6_FLAG (1 << 5)

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

#endif
