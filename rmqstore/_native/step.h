/* step.h: rmqstore.format.walk.step in C -- the one decision table of the compiled walkers.
 *
 * What starts at byte `pos` of a segment: a message record, a blank (END_OF_FILE), unwritten
 * space, the end of the readable bytes, or corruption -- decided in walk.step's order, by the
 * same checks.  The walk with CRC (_cwalk), the dispatch parse (_cdispatch) and the full decode
 * (_cdecode) all take their records from rmq_step; none of them frames a record itself (Rule 1:
 * one segment walk, one set of end kinds).  Where one stops, the Python walk.step re-runs at that
 * position and words the end.
 *
 * Positions are absolute in the buffer `p`; `size` is the segment's size and `lim` how far it is
 * readable (a record crossing `lim` but inside `size` is OUT_OF_BYTES, beyond `size` CORRUPT).
 */
#ifndef RMQ_STEP_H
#define RMQ_STEP_H

#include <stdint.h>

#include "crc32.h"
#include "record.h"
#include "utf8.h"

/* the End kinds, as rmqstore.format.walk numbers them (walk._KIND_OF_CODE); RMQ_RECORD: not an end */
enum { RMQ_RECORD = -1, RMQ_STOPPED = 0, RMQ_BLANK = 1, RMQ_UNWRITTEN = 2, RMQ_OUT_OF_BYTES = 3, RMQ_CORRUPT = 4 };
#define RMQ_MIN_RECORD_SIZE 91

typedef struct {
    int kind;         /* RMQ_* */
    int64_t size;     /* a record's total size; a blank's declared size; else 0 */
    int32_t magic, sys_flag, body_len, topic_len, props_len;
    int64_t body_at;  /* the body's first byte */
    int64_t topic_at; /* the topic's first byte (after its length) */
    int64_t props_at; /* the properties' first byte (after their length) */
    int crc_ok;       /* -1: not computed, 0, 1 */
} rmq_step_t;

#define RMQ_STEP_END(k) \
    do {                 \
        s->kind = (k);   \
        return;          \
    } while (0)

/* walk.step at `pos`.  `crc`: compute the body CRC (crc_ok); `strict`: a record whose CRC does not
 * match (non-empty body) or whose PHYSICALOFFSET is not `base + pos` is CORRUPT. */
static inline void rmq_step(const unsigned char *p, int64_t size, int64_t lim, int64_t pos, int64_t base, int crc,
                            int strict, rmq_step_t *s)
{
    s->crc_ok = -1;
    s->size = 0;
    if (pos < 0 || pos + 8 > lim)
        RMQ_STEP_END(RMQ_OUT_OF_BYTES);
    const unsigned char *r = p + pos;
    int32_t total = rmq_get_i32(r + RMQ_POS_TOTALSIZE);
    int32_t magic = rmq_get_i32(r + RMQ_POS_MAGIC);
    s->magic = magic;
    if (magic == RMQ_BLANK_MAGIC_CODE) {
        s->size = total;
        RMQ_STEP_END(RMQ_BLANK);
    }
    if (magic != RMQ_MESSAGE_MAGIC_CODE && magic != RMQ_MESSAGE_MAGIC_CODE_V2)
        RMQ_STEP_END((total == 0 && magic == 0) ? RMQ_UNWRITTEN : RMQ_CORRUPT);
    int64_t rec_end = pos + (int64_t)total;
#if defined(__GNUC__)
    if (total >= RMQ_MIN_RECORD_SIZE && rec_end + 64 <= lim) {
        __builtin_prefetch(p + rec_end);      /* the next record's head */
        __builtin_prefetch(p + rec_end - 64); /* this record's topic and properties */
    }
#endif
    if (total < RMQ_MIN_RECORD_SIZE)
        RMQ_STEP_END(RMQ_CORRUPT);
    if (rec_end > lim)
        RMQ_STEP_END(rec_end <= size ? RMQ_OUT_OF_BYTES : RMQ_CORRUPT);
    /* from here the whole record [pos, rec_end) is readable, and it holds the 40-byte head */
    int32_t sys_flag = rmq_get_i32(r + RMQ_POS_SYSFLAG);
    int v2 = magic == RMQ_MESSAGE_MAGIC_CODE_V2;
    int64_t tl = v2 ? 2 : 1;
    int64_t body_at = pos + rmq_pos_body_length(sys_flag) + 4;
    if (body_at + tl + 2 > rec_end)
        RMQ_STEP_END(RMQ_CORRUPT);
    int32_t body_len = rmq_get_i32(p + body_at - 4);
    int64_t topic_at = body_at + body_len;
    if (body_len < 0 || topic_at + tl + 2 > rec_end)
        RMQ_STEP_END(RMQ_CORRUPT);
    int32_t topic_len = v2 ? (int32_t)(int16_t)rmq_get_u16(p + topic_at) : (int32_t)(int8_t)p[topic_at];
    int64_t props_at = topic_at + tl + topic_len;
    if (topic_len < 0 || props_at + 2 > rec_end)
        RMQ_STEP_END(RMQ_CORRUPT);
    int32_t props_len = (int16_t)rmq_get_u16(p + props_at);
    if (props_at + 2 + props_len != rec_end)
        RMQ_STEP_END(RMQ_CORRUPT);
    if (!rmq_utf8_ok(p + topic_at + tl, topic_len) || !rmq_utf8_ok(p + props_at + 2, props_len))
        RMQ_STEP_END(RMQ_CORRUPT);
    if (crc) {
        uint32_t c = rmq_crc32(0, p + body_at, (size_t)body_len) & 0x7FFFFFFFu;
        s->crc_ok = (int64_t)c == (int64_t)rmq_get_i32(r + RMQ_POS_BODYCRC);
    }
    if (strict && ((s->crc_ok == 0 && body_len > 0) || rmq_get_i64(r + RMQ_POS_PHYSICALOFFSET) != base + pos))
        RMQ_STEP_END(RMQ_CORRUPT);
    s->kind = RMQ_RECORD;
    s->size = total;
    s->sys_flag = sys_flag;
    s->body_at = body_at;
    s->body_len = body_len;
    s->topic_at = topic_at + tl;
    s->topic_len = topic_len;
    s->props_at = props_at + 2;
    s->props_len = props_len;
}

#undef RMQ_STEP_END

#endif
