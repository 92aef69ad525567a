/* Strict UTF-8, as Python's decoder takes it: no overlong forms, no surrogates, nothing past
 * U+10FFFF, no cut sequence.  A record whose topic or properties fail it is not a record
 * (rmqstore.format.walk.step decodes both with Python's strict UTF-8), so every compiled walker --
 * the walk, the decode, the dispatch -- asks this one function.
 */
#ifndef RMQ_UTF8_H
#define RMQ_UTF8_H

#include <stdint.h>
#include <string.h>

static int rmq_utf8_ok(const unsigned char *s, int64_t n)
{
    int64_t i = 0;
    while (i < n) {
        if (i + 8 <= n) { /* ASCII runs, 8 bytes at a time */
            uint64_t w;
            memcpy(&w, s + i, 8);
            if (!(w & 0x8080808080808080ull)) {
                i += 8;
                continue;
            }
        }
        unsigned c = s[i];
        if (c < 0x80) {
            i++;
        } else if (c >= 0xC2 && c <= 0xDF) {
            if (i + 1 >= n || (s[i + 1] & 0xC0) != 0x80)
                return 0;
            i += 2;
        } else if (c >= 0xE0 && c <= 0xEF) {
            if (i + 2 >= n)
                return 0;
            unsigned c1 = s[i + 1];
            unsigned lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF; /* overlong; surrogate */
            if (c1 < lo || c1 > hi || (s[i + 2] & 0xC0) != 0x80)
                return 0;
            i += 3;
        } else if (c >= 0xF0 && c <= 0xF4) {
            if (i + 3 >= n)
                return 0;
            unsigned c1 = s[i + 1];
            unsigned lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF; /* overlong; past U+10FFFF */
            if (c1 < lo || c1 > hi || (s[i + 2] & 0xC0) != 0x80 || (s[i + 3] & 0xC0) != 0x80)
                return 0;
            i += 4;
        } else {
            return 0;
        }
    }
    return 1;
}

#endif
