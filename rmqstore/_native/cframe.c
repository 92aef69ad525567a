/* rmqstore._native._cframe: the remoting frame and header codec, compiled (see rmqstore/common/native.py).
 *
 * rmqstore.remoting.frame holds the reference codec in pure Python (the lesson: json.loads, struct);
 * this module does the same work for the frames real clients send and a broker answers, and hands
 * everything else back to that reference.  Each entry point -- decode_frame, decode_header,
 * encode_frame, encode_header, response (the reference's RemotingCommand.response) -- either produces
 * the answer itself or calls the pure function bound by setup() with the same arguments, so an answer
 * is never different: only faster or not.
 *
 * What it handles itself (everything else *falls back*, it is never guessed at):
 *   - a JSON header that is one object, JSON whitespace anywhere JSON allows it; keys and strings
 *     with the escapes \" \\ \/ \b \f \n \r \t and \uXXXX (no surrogate \u escapes in a value we keep:
 *     Python pairs them or keeps them alone, so those go to the reference); strict UTF-8;
 *   - code, opaque, flag, version: JSON integers that fit 32 bits; language: a string, or an integer
 *     (a LanguageCode's name, else OTHER); remark: a string or null; extFields: an object whose values
 *     are strings, integers, true, false or null (null drops the entry, as the reference does), or null;
 *   - any other member's value is checked and skipped: strings, integers, true/false/null, arrays and
 *     objects nested at most 64 deep (floats, NaN, Infinity fall back);
 *   - a ROCKETMQ binary header that is whole and valid;
 *   - encoding a command whose fields are plain: int code/opaque/flag/version (not bool), str
 *     language and remark (or None), a dict of str -> str, a bytes/bytearray/None body, serialize
 *     type 0 or 1, within the frame limits.
 * Any error of the bytes (bad JSON, missing code, numbers out of range, bad UTF-8, a short binary
 * header) is a fall-back too: the reference raises its own RemotingFrameError with its own words.
 *
 * cut_frames() is FrameDecoder's loop over a buffer of whole frames; it stops where the pure step must go
 * on.  CONSTANTS holds the numbers the module decides by (tests/unit/test_native_constants.py holds them
 * to Python's).  counters() says how many calls were answered here and how many fell back (a response
 * counts as an encode); the tests prove that real client traffic never falls back.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <limits.h>
#include <stdint.h>
#include <string.h>

#include "utf8.h"

#define OK 1
#define FALLBACK 0
#define ERR (-1)

#define MAX_FRAME_LENGTH (16 * 1024 * 1024)
#define RPC_TYPE_RESPONSE 1 /* flag bit 0: a response */
#define BINARY_HEADER_FIXED_SIZE 13 /* code i16, language i8, version i16, opaque i32, flag i32 */
#define MAX_DEPTH 64

/* bound by setup(): the command class, the serialize types, the language tables, the pure codec */
static PyObject *command_class, *st_json, *st_rocketmq, *language_names, *language_codes, *other_name;
static long other_code;
static PyObject *pure_decode_frame, *pure_decode_header, *pure_encode_frame, *pure_encode_header, *pure_response;
static PyObject *s_code, *s_ext_fields, *s_body, *s_remark, *s_opaque, *s_flag, *s_language, *s_version,
    *s_serialize_type, *s_java, *empty_bytes, *empty_tuple;
static unsigned long long decoded, decode_fallbacks, encoded, encode_fallbacks;

/* -- decoding: the command ------------------------------------------------------------------ */

typedef struct {
    long long code, opaque, flag, version;
    PyObject *ext, *remark, *language; /* owned; NULL: the default */
} Head;

static void head_clear(Head *h)
{
    Py_CLEAR(h->ext);
    Py_CLEAR(h->remark);
    Py_CLEAR(h->language);
}

/* A RemotingCommand as the reference's constructor makes it: the attributes set in field order.  Steals
 * the references in vals (any may be NULL after a failed allocation: then NULL). */
static PyObject *new_command(PyObject *vals[9])
{
    static PyObject **names[9] = {&s_code, &s_ext_fields, &s_body, &s_remark, &s_opaque, &s_flag, &s_language,
                                  &s_version, &s_serialize_type};
    PyTypeObject *tp = (PyTypeObject *)command_class;
    PyObject *obj = tp->tp_new(tp, empty_tuple, NULL);
    int bad = obj == NULL;
    for (int i = 0; i < 9; i++) {
        if (vals[i] == NULL || (!bad && PyObject_SetAttr(obj, *names[i], vals[i]) < 0))
            bad = 1;
        Py_XDECREF(vals[i]);
    }
    if (bad) {
        Py_XDECREF(obj);
        return NULL;
    }
    return obj;
}

static PyObject *make_command(Head *h, PyObject *body, PyObject *serialize_type)
{
    PyObject *vals[9] = {PyLong_FromLongLong(h->code), h->ext ? Py_NewRef(h->ext) : PyDict_New(),
                         Py_NewRef(body), Py_NewRef(h->remark ? h->remark : Py_None),
                         PyLong_FromLongLong(h->opaque), PyLong_FromLongLong(h->flag),
                         Py_NewRef(h->language ? h->language : s_java), PyLong_FromLongLong(h->version),
                         Py_NewRef(serialize_type)};
    return new_command(vals);
}

/* A language code's name (a new reference), OTHER for a code LanguageCode does not have. */
static PyObject *language_name(long long code)
{
    PyObject *number = PyLong_FromLongLong(code);
    if (number == NULL)
        return NULL;
    PyObject *name = PyDict_GetItemWithError(language_names, number);
    Py_DECREF(number);
    if (name == NULL && PyErr_Occurred())
        return NULL;
    return Py_NewRef(name ? name : other_name);
}

/* -- decoding: JSON ------------------------------------------------------------------------- */

typedef struct {
    const unsigned char *p, *end;
    char *scratch; /* as long as the header: a string's decoded bytes are never longer than its text */
} Json;

static void skip_ws(Json *j)
{
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r'))
        j->p++;
}

static int expect(Json *j, unsigned char c)
{
    skip_ws(j);
    if (j->p >= j->end || *j->p != c)
        return FALLBACK;
    j->p++;
    skip_ws(j);
    return OK;
}

static int hex4(const unsigned char *s, unsigned *out)
{
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        unsigned c = s[i], d;
        if (c >= '0' && c <= '9')
            d = c - '0';
        else if (c >= 'a' && c <= 'f')
            d = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F')
            d = c - 'A' + 10;
        else
            return 0;
        v = v << 4 | d;
    }
    *out = v;
    return 1;
}

static char *put_utf8(char *w, unsigned cp)
{
    if (cp < 0x80) {
        *w++ = (char)cp;
    } else if (cp < 0x800) {
        *w++ = (char)(0xC0 | cp >> 6);
        *w++ = (char)(0x80 | (cp & 0x3F));
    } else {
        *w++ = (char)(0xE0 | cp >> 12);
        *w++ = (char)(0x80 | ((cp >> 6) & 0x3F));
        *w++ = (char)(0x80 | (cp & 0x3F));
    }
    return w;
}

/* The string whose quote is at j->p: its decoded UTF-8 in out and n (the input itself when it has no
 * escape, else the scratch).  *surrogate is set when a \u escape named a surrogate: the bytes then
 * stand for nothing and only a string we skip may have one. */
static int scan_string(Json *j, const char **out, Py_ssize_t *n, int *surrogate)
{
    const unsigned char *s = j->p + 1, *e = j->end, *q = s;
    unsigned high = 0;
    *surrogate = 0;
    while (q < e && *q != '"' && *q != '\\' && *q >= 0x20)
        high |= *q++;
    if (q < e && *q == '"') {
        if ((high & 0x80) && !rmq_utf8_ok(s, q - s))
            return FALLBACK;
        *out = (const char *)s;
        *n = q - s;
        j->p = q + 1;
        return OK;
    }
    char *w = j->scratch;
    memcpy(w, s, (size_t)(q - s));
    w += q - s;
    for (;;) {
        if (q >= e || *q < 0x20)
            return FALLBACK;
        unsigned c = *q;
        if (c == '"')
            break;
        if (c != '\\') {
            high |= c;
            *w++ = (char)c;
            q++;
            continue;
        }
        if (q + 1 >= e)
            return FALLBACK;
        switch (q[1]) {
        case '"': *w++ = '"'; break;
        case '\\': *w++ = '\\'; break;
        case '/': *w++ = '/'; break;
        case 'b': *w++ = '\b'; break;
        case 'f': *w++ = '\f'; break;
        case 'n': *w++ = '\n'; break;
        case 'r': *w++ = '\r'; break;
        case 't': *w++ = '\t'; break;
        case 'u': {
            unsigned cp;
            if (e - q < 6 || !hex4(q + 2, &cp))
                return FALLBACK;
            if (cp >= 0xD800 && cp <= 0xDFFF)
                *surrogate = 1;
            else
                w = put_utf8(w, cp);
            q += 6;
            continue;
        }
        default:
            return FALLBACK;
        }
        q += 2;
    }
    /* escapes only write whole sequences, so checking the whole result checks the raw runs */
    if ((high & 0x80) && !rmq_utf8_ok((const unsigned char *)j->scratch, w - j->scratch))
        return FALLBACK;
    *out = j->scratch;
    *n = w - j->scratch;
    j->p = q + 1;
    return OK;
}

/* A string we keep, as a str (a surrogate escape: fall back). */
static int take_string(Json *j, PyObject **out)
{
    const char *s;
    Py_ssize_t n;
    int surrogate, rc = scan_string(j, &s, &n, &surrogate);
    if (rc != OK || surrogate)
        return FALLBACK;
    *out = PyUnicode_DecodeUTF8(s, n, "strict");
    return *out ? OK : ERR;
}

/* A JSON integer of at most 18 digits (a fraction or an exponent: fall back). */
static int scan_int(Json *j, long long *out)
{
    const unsigned char *p = j->p, *e = j->end;
    int neg = p < e && *p == '-';
    p += neg;
    if (p >= e || *p < '0' || *p > '9')
        return FALLBACK;
    long long v = 0;
    if (*p == '0') {
        p++;
    } else {
        const unsigned char *start = p;
        while (p < e && *p >= '0' && *p <= '9') {
            if (p - start >= 18)
                return FALLBACK;
            v = v * 10 + (*p++ - '0');
        }
    }
    if (p < e && (*p == '.' || *p == 'e' || *p == 'E' || (*p >= '0' && *p <= '9')))
        return FALLBACK;
    *out = neg ? -v : v;
    j->p = p;
    return OK;
}

static int literal(Json *j, const char *word)
{
    size_t n = strlen(word);
    if ((size_t)(j->end - j->p) < n || memcmp(j->p, word, n) != 0)
        return FALLBACK;
    j->p += n;
    return OK;
}

static int is_int_start(Json *j)
{
    return j->p < j->end && (*j->p == '-' || (*j->p >= '0' && *j->p <= '9'));
}

/* After a member or an element: the next one (1), the end (0), or neither (FALLBACK as -1). */
static int next_member(Json *j, unsigned char close)
{
    skip_ws(j);
    if (j->p < j->end && *j->p == ',') {
        j->p++;
        skip_ws(j);
        return 1;
    }
    if (j->p < j->end && *j->p == close) {
        j->p++;
        return 0;
    }
    return -1;
}

static int skip_value(Json *j, int depth);

static int skip_container(Json *j, unsigned char close, int depth)
{
    if (depth > MAX_DEPTH)
        return FALLBACK;
    j->p++;
    skip_ws(j);
    if (j->p < j->end && *j->p == close) {
        j->p++;
        return OK;
    }
    for (;;) {
        if (close == '}') {
            const char *s;
            Py_ssize_t n;
            int surrogate;
            if (j->p >= j->end || *j->p != '"' || scan_string(j, &s, &n, &surrogate) != OK || !expect(j, ':'))
                return FALLBACK;
        }
        int rc = skip_value(j, depth + 1);
        if (rc != OK)
            return rc;
        int more = next_member(j, close);
        if (more < 0)
            return FALLBACK;
        if (!more)
            return OK;
    }
}

static int skip_value(Json *j, int depth)
{
    if (j->p >= j->end)
        return FALLBACK;
    long long ignored;
    switch (*j->p) {
    case '"': {
        const char *s;
        Py_ssize_t n;
        int surrogate;
        return scan_string(j, &s, &n, &surrogate);
    }
    case '{': return skip_container(j, '}', depth);
    case '[': return skip_container(j, ']', depth);
    case 't': return literal(j, "true");
    case 'f': return literal(j, "false");
    case 'n': return literal(j, "null");
    default: return scan_int(j, &ignored);
    }
}

/* An extFields value as the reference keeps it: the string, str(int), "true"/"false"; null is Py_None. */
static int ext_value(Json *j, PyObject **out)
{
    if (j->p >= j->end)
        return FALLBACK;
    unsigned char c = *j->p;
    if (c == '"')
        return take_string(j, out);
    if (c == 'n' || c == 't' || c == 'f') {
        const char *word = c == 'n' ? "null" : c == 't' ? "true" : "false";
        if (literal(j, word) != OK)
            return FALLBACK;
        *out = c == 'n' ? Py_NewRef(Py_None) : PyUnicode_FromString(word);
        return *out ? OK : ERR;
    }
    long long v;
    if (scan_int(j, &v) != OK)
        return FALLBACK;
    *out = PyUnicode_FromFormat("%lld", v);
    return *out ? OK : ERR;
}

/* The extFields object at j->p into a new dict: null values dropped after the whole object is read,
 * so a key given twice keeps its first place and its last value, as a dict built by json does. */
static int parse_ext(Json *j, PyObject **out)
{
    PyObject *d = PyDict_New();
    if (d == NULL)
        return ERR;
    int rc = OK, nones = 0;
    j->p++;
    skip_ws(j);
    if (j->p < j->end && *j->p == '}') {
        j->p++;
        *out = d;
        return OK;
    }
    for (;;) {
        PyObject *key = NULL, *value = NULL;
        if (j->p >= j->end || *j->p != '"') {
            rc = FALLBACK;
            break;
        }
        if ((rc = take_string(j, &key)) != OK)
            break;
        if ((rc = expect(j, ':')) != OK || (rc = ext_value(j, &value)) != OK) {
            Py_DECREF(key);
            break;
        }
        nones += value == Py_None;
        int bad = PyDict_SetItem(d, key, value) < 0;
        Py_DECREF(key);
        Py_DECREF(value);
        if (bad) {
            rc = ERR;
            break;
        }
        int more = next_member(j, '}');
        if (more <= 0) {
            rc = more < 0 ? FALLBACK : OK;
            break;
        }
    }
    if (rc == OK && nones) {
        PyObject *kept = PyDict_New(), *k, *v;
        Py_ssize_t pos = 0;
        while (kept && PyDict_Next(d, &pos, &k, &v))
            if (v != Py_None && PyDict_SetItem(kept, k, v) < 0)
                Py_CLEAR(kept);
        Py_SETREF(d, kept);
        if (d == NULL)
            return ERR;
    }
    if (rc != OK) {
        Py_DECREF(d);
        return rc;
    }
    *out = d;
    return OK;
}

static int take_i32(Json *j, long long *slot)
{
    long long v;
    if (!is_int_start(j) || scan_int(j, &v) != OK || v < INT32_MIN || v > INT32_MAX)
        return FALLBACK;
    *slot = v;
    return OK;
}

static int take_language(Json *j, Head *h)
{
    PyObject *value;
    if (j->p < j->end && *j->p == '"') {
        int rc = take_string(j, &value);
        if (rc != OK)
            return rc;
    } else {
        long long v;
        if (!is_int_start(j) || scan_int(j, &v) != OK)
            return FALLBACK;
        if ((value = language_name(v)) == NULL)
            return ERR;
    }
    Py_XSETREF(h->language, value);
    return OK;
}

/* A member that is null or a value opening with `open` (read by `take`): null gives `when_null()`. */
static int take_nullable(Json *j, PyObject **slot, unsigned char open, int (*take)(Json *, PyObject **),
                         PyObject *(*when_null)(void))
{
    PyObject *value;
    if (j->p < j->end && *j->p == 'n') {
        if (literal(j, "null") != OK)
            return FALLBACK;
        if ((value = when_null()) == NULL)
            return ERR;
    } else if (j->p < j->end && *j->p == open) {
        int rc = take(j, &value);
        if (rc != OK)
            return rc;
    } else {
        return FALLBACK;
    }
    Py_XSETREF(*slot, value);
    return OK;
}

static PyObject *new_none(void)
{
    return Py_NewRef(Py_None);
}

#define KEY_IS(word) (n == (Py_ssize_t)sizeof(word) - 1 && memcmp(key, word, sizeof(word) - 1) == 0)

static int take_member(Json *j, Head *h, int *have_code)
{
    const char *key;
    Py_ssize_t n;
    int surrogate;
    if (j->p >= j->end || *j->p != '"' || scan_string(j, &key, &n, &surrogate) != OK || !expect(j, ':'))
        return FALLBACK;
    if (surrogate)
        return skip_value(j, 1); /* no member we read has a surrogate in its name */
    if (KEY_IS("code")) {
        *have_code = 1;
        return take_i32(j, &h->code);
    }
    if (KEY_IS("opaque"))
        return take_i32(j, &h->opaque);
    if (KEY_IS("flag"))
        return take_i32(j, &h->flag);
    if (KEY_IS("version"))
        return take_i32(j, &h->version);
    if (KEY_IS("language"))
        return take_language(j, h);
    if (KEY_IS("remark"))
        return take_nullable(j, &h->remark, '"', take_string, new_none);
    if (KEY_IS("extFields"))
        return take_nullable(j, &h->ext, '{', parse_ext, PyDict_New);
    return skip_value(j, 1);
}

static int parse_json_header(const unsigned char *data, Py_ssize_t len, Head *h)
{
    char small[1024];
    Json j = {data, data + len, len <= (Py_ssize_t)sizeof(small) ? small : PyMem_Malloc((size_t)len + 1)};
    if (j.scratch == NULL) {
        PyErr_NoMemory();
        return ERR;
    }
    int rc = FALLBACK, have_code = 0;
    skip_ws(&j);
    if (j.p < j.end && *j.p == '{') {
        j.p++;
        skip_ws(&j);
        for (;;) {
            rc = take_member(&j, h, &have_code);
            if (rc != OK)
                break;
            int more = next_member(&j, '}');
            if (more <= 0) {
                rc = more < 0 ? FALLBACK : OK;
                break;
            }
        }
    }
    if (rc == OK) {
        skip_ws(&j);
        if (j.p != j.end || !have_code)
            rc = FALLBACK;
    }
    if (j.scratch != small)
        PyMem_Free(j.scratch);
    return rc;
}

/* -- decoding: the ROCKETMQ binary header ---------------------------------------------------- */

static int32_t be32(const unsigned char *p)
{
    return (int32_t)((uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]);
}

static int16_t be16(const unsigned char *p)
{
    return (int16_t)((uint16_t)(p[0] << 8 | p[1]));
}

/* n bytes at *pos of data[0:len] as a str (strict UTF-8), or FALLBACK */
static int take_text(const unsigned char *data, Py_ssize_t len, Py_ssize_t *pos, int64_t n, PyObject **out)
{
    if (n < 0 || *pos + n > len || !rmq_utf8_ok(data + *pos, n))
        return FALLBACK;
    *out = PyUnicode_DecodeUTF8((const char *)data + *pos, (Py_ssize_t)n, "strict");
    *pos += n;
    return *out ? OK : ERR;
}

static int parse_binary_header(const unsigned char *data, Py_ssize_t len, Head *h)
{
    if (len < BINARY_HEADER_FIXED_SIZE + 4)
        return FALLBACK;
    h->code = be16(data);
    signed char lang = (signed char)data[2];
    h->version = be16(data + 3);
    h->opaque = be32(data + 5);
    h->flag = be32(data + 9);
    Py_ssize_t pos = BINARY_HEADER_FIXED_SIZE;
    int64_t remark_len = be32(data + pos);
    pos += 4;
    if (remark_len < 0 || pos + remark_len + 4 > len)
        return FALLBACK;
    if (remark_len > 0) {
        int rc = take_text(data, len, &pos, remark_len, &h->remark);
        if (rc != OK)
            return rc;
    }
    int64_t ext_len = be32(data + pos);
    pos += 4;
    if (ext_len < 0 || pos + ext_len != len)
        return FALLBACK;
    if ((h->ext = PyDict_New()) == NULL)
        return ERR;
    while (pos < len) {
        PyObject *key = NULL, *value = NULL;
        if (len - pos < 2)
            return FALLBACK;
        int64_t key_len = be16(data + pos);
        pos += 2;
        int rc = take_text(data, len, &pos, key_len, &key);
        if (rc != OK)
            return rc;
        if (len - pos < 4) {
            Py_DECREF(key);
            return FALLBACK;
        }
        int64_t value_len = be32(data + pos);
        pos += 4;
        rc = take_text(data, len, &pos, value_len, &value);
        if (rc == OK && PyDict_SetItem(h->ext, key, value) < 0)
            rc = ERR;
        Py_DECREF(key);
        Py_XDECREF(value);
        if (rc != OK)
            return rc;
    }
    h->language = language_name(lang);
    return h->language ? OK : ERR;
}

/* -- decoding: entry points ------------------------------------------------------------------ */

static int check_setup(void)
{
    if (command_class == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "rmqstore._native._cframe: setup() was not called");
        return 0;
    }
    return 1;
}

/* The header in its serialize type as a command with `body`; NULL with no error set: fall back. */
static PyObject *decode(int serialize_type, const unsigned char *header, Py_ssize_t n, PyObject *body)
{
    Head h = {0, 0, 0, 0, NULL, NULL, NULL};
    int rc = serialize_type == 0 ? parse_json_header(header, n, &h)
           : serialize_type == 1 ? parse_binary_header(header, n, &h) : FALLBACK;
    PyObject *out = rc == OK ? make_command(&h, body, serialize_type == 0 ? st_json : st_rocketmq) : NULL;
    head_clear(&h);
    return out;
}

/* The frame data[0:n] (after its length field) as a command; NULL with no error set: fall back. */
static PyObject *decode_frame_bytes(const unsigned char *p, Py_ssize_t n)
{
    if (n < 4)
        return NULL;
    uint32_t meta = (uint32_t)be32(p);
    Py_ssize_t header_len = meta & 0xFFFFFF;
    if (4 + header_len > n)
        return NULL;
    PyObject *body = PyBytes_FromStringAndSize((const char *)p + 4 + header_len, n - 4 - header_len);
    if (body == NULL)
        return NULL;
    PyObject *out = decode((int)(meta >> 24), p + 4, header_len, body);
    Py_DECREF(body);
    return out;
}

static PyObject *cframe_decode_frame(PyObject *self, PyObject *data)
{
    if (!check_setup())
        return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(data, &view, PyBUF_SIMPLE) < 0) {
        PyErr_Clear();
    } else {
        PyObject *out = decode_frame_bytes(view.buf, view.len);
        PyBuffer_Release(&view);
        if (out != NULL)
            decoded++;
        if (out != NULL || PyErr_Occurred())
            return out;
    }
    decode_fallbacks++;
    return PyObject_CallOneArg(pure_decode_frame, data);
}

/* FrameDecoder's loop: the whole frames at the start of buf that this module decodes by itself, as
 * ([command, ...], bytes they took).  It stops, taking nothing more, at a frame not whole yet, a bad
 * length or a frame it would hand to the reference: the caller's pure step takes that one. */
static PyObject *cframe_cut_frames(PyObject *self, PyObject *buf)
{
    if (!check_setup())
        return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    PyObject *out = PyList_New(0);
    const unsigned char *p = view.buf;
    Py_ssize_t pos = 0;
    while (out != NULL && view.len - pos >= 4) {
        int32_t length = be32(p + pos);
        if (length < 4 || (int64_t)length + 4 > MAX_FRAME_LENGTH || view.len - pos - 4 < length)
            break;
        PyObject *cmd = decode_frame_bytes(p + pos + 4, length);
        if (cmd == NULL) {
            if (PyErr_Occurred())
                Py_CLEAR(out);
            break;
        }
        decoded++;
        if (PyList_Append(out, cmd) < 0)
            Py_CLEAR(out);
        Py_DECREF(cmd);
        pos += 4 + (Py_ssize_t)length;
    }
    PyBuffer_Release(&view);
    if (out == NULL)
        return NULL;
    return Py_BuildValue("(Nn)", out, pos);
}

static PyObject *cframe_decode_header(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (!check_setup())
        return NULL;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "decode_header(serialize_type, data) takes 2 arguments");
        return NULL;
    }
    PyObject *st = args[0], *data = args[1], *out = NULL;
    if (PyLong_Check(st) && !PyBool_Check(st) && PyBytes_CheckExact(data)) {
        int overflow;
        long type = PyLong_AsLongAndOverflow(st, &overflow);
        if ((type == 0 || type == 1) && !overflow)
            out = decode((int)type, (const unsigned char *)PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data),
                         empty_bytes);
        if (out != NULL)
            decoded++;
        if (out != NULL || PyErr_Occurred())
            return out;
    }
    decode_fallbacks++;
    return PyObject_Vectorcall(pure_decode_header, args, nargs, NULL);
}

/* -- encoding --------------------------------------------------------------------------------- */

typedef struct {
    char *p;
    Py_ssize_t len, cap;
    char small[1024];
} Buf;

static void buf_init(Buf *b)
{
    b->p = b->small;
    b->len = 0;
    b->cap = sizeof(b->small);
}

static int buf_grow(Buf *b, Py_ssize_t more)
{
    if (b->len + more <= b->cap)
        return OK;
    Py_ssize_t cap = b->cap * 2 > b->len + more ? b->cap * 2 : b->len + more + 256;
    char *p = b->p == b->small ? PyMem_Malloc((size_t)cap) : PyMem_Realloc(b->p, (size_t)cap);
    if (p == NULL) {
        PyErr_NoMemory();
        return ERR;
    }
    if (b->p == b->small)
        memcpy(p, b->small, (size_t)b->len);
    b->p = p;
    b->cap = cap;
    return OK;
}

static int buf_put(Buf *b, const char *s, Py_ssize_t n)
{
    if (buf_grow(b, n) != OK)
        return ERR;
    memcpy(b->p + b->len, s, (size_t)n);
    b->len += n;
    return OK;
}

#define PUT_LIT(b, s) buf_put(b, s, (Py_ssize_t)sizeof(s) - 1)

static void buf_free(Buf *b)
{
    if (b->p != b->small)
        PyMem_Free(b->p);
}

/* An int field (not a bool) in [lo, hi]; FALLBACK for anything else. */
static int int_field(PyObject *obj, long long lo, long long hi, long long *out)
{
    if (!PyLong_Check(obj) || PyBool_Check(obj))
        return FALLBACK;
    int overflow;
    long long v = PyLong_AsLongLongAndOverflow(obj, &overflow);
    if (v == -1 && PyErr_Occurred())
        return ERR;
    if (overflow || v < lo || v > hi)
        return FALLBACK;
    *out = v;
    return OK;
}

/* A plain str's UTF-8 (a str with a lone surrogate has none: fall back, the reference raises). */
static int utf8_of(PyObject *obj, const char **s, Py_ssize_t *n)
{
    if (!PyUnicode_CheckExact(obj))
        return FALLBACK;
    *s = PyUnicode_AsUTF8AndSize(obj, n);
    if (*s == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_UnicodeEncodeError))
            return ERR;
        PyErr_Clear();
        return FALLBACK;
    }
    return OK;
}

static int put_json_int(Buf *b, PyObject *obj)
{
    long long v;
    int rc = int_field(obj, LLONG_MIN, LLONG_MAX, &v);
    if (rc != OK)
        return rc;
    char text[24];
    int n = snprintf(text, sizeof(text), "%lld", v);
    return buf_put(b, text, n);
}

/* A str as json.dumps(ensure_ascii=False) writes it: only '"', '\' and controls escaped. */
static int put_json_str(Buf *b, PyObject *obj)
{
    static const char hex[] = "0123456789abcdef";
    const char *s;
    Py_ssize_t n;
    int rc = utf8_of(obj, &s, &n);
    if (rc != OK)
        return rc;
    if (buf_grow(b, n * 6 + 2) != OK)
        return ERR;
    char *w = b->p + b->len;
    *w++ = '"';
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\') {
            *w++ = (char)c;
            continue;
        }
        *w++ = '\\';
        switch (c) {
        case '"': *w++ = '"'; break;
        case '\\': *w++ = '\\'; break;
        case '\n': *w++ = 'n'; break;
        case '\r': *w++ = 'r'; break;
        case '\t': *w++ = 't'; break;
        case '\b': *w++ = 'b'; break;
        case '\f': *w++ = 'f'; break;
        default:
            memcpy(w, "u00", 3);
            w[3] = hex[c >> 4];
            w[4] = hex[c & 15];
            w += 5;
        }
    }
    *w++ = '"';
    b->len = w - b->p;
    return OK;
}

static int put_json_ext(Buf *b, PyObject *ext)
{
    if (!PyDict_CheckExact(ext))
        return FALLBACK;
    if (PUT_LIT(b, "{") != OK)
        return ERR;
    PyObject *k, *v;
    Py_ssize_t pos = 0;
    int first = 1, rc;
    while (PyDict_Next(ext, &pos, &k, &v)) {
        if (!first && PUT_LIT(b, ",") != OK)
            return ERR;
        first = 0;
        if (!PyUnicode_CheckExact(v))
            return FALLBACK;
        if ((rc = put_json_str(b, k)) != OK || PUT_LIT(b, ":") != OK || (rc = put_json_str(b, v)) != OK)
            return rc == OK ? ERR : rc;
    }
    return PUT_LIT(b, "}");
}

typedef struct {
    PyObject *code, *ext, *remark, *opaque, *flag, *language, *version;
} Fields;

static void fields_clear(Fields *f)
{
    Py_CLEAR(f->code);
    Py_CLEAR(f->ext);
    Py_CLEAR(f->remark);
    Py_CLEAR(f->opaque);
    Py_CLEAR(f->flag);
    Py_CLEAR(f->language);
    Py_CLEAR(f->version);
}

static int fields_get(PyObject *cmd, Fields *f)
{
    PyObject **slots[7] = {&f->code, &f->ext, &f->remark, &f->opaque, &f->flag, &f->language, &f->version};
    PyObject *names[7] = {s_code, s_ext_fields, s_remark, s_opaque, s_flag, s_language, s_version};
    for (int i = 0; i < 7; i++) {
        *slots[i] = PyObject_GetAttr(cmd, names[i]);
        if (*slots[i] == NULL) {
            PyErr_Clear();
            return FALLBACK; /* the reference raises its own AttributeError */
        }
    }
    return OK;
}

static int encode_json(Buf *b, Fields *f)
{
    int rc;
#define STEP(call) if ((rc = (call)) != OK) return rc
    STEP(PUT_LIT(b, "{\"code\":"));
    STEP(put_json_int(b, f->code));
    STEP(PUT_LIT(b, ",\"extFields\":"));
    STEP(put_json_ext(b, f->ext));
    STEP(PUT_LIT(b, ",\"flag\":"));
    STEP(put_json_int(b, f->flag));
    STEP(PUT_LIT(b, ",\"language\":"));
    STEP(put_json_str(b, f->language));
    STEP(PUT_LIT(b, ",\"opaque\":"));
    STEP(put_json_int(b, f->opaque));
    STEP(PUT_LIT(b, ",\"serializeTypeCurrentRPC\":\"JSON\",\"version\":"));
    STEP(put_json_int(b, f->version));
    if (f->remark != Py_None) {
        STEP(PUT_LIT(b, ",\"remark\":"));
        STEP(put_json_str(b, f->remark));
    }
    return PUT_LIT(b, "}");
#undef STEP
}

static int put_be(Buf *b, long long v, int size)
{
    char bytes[4];
    for (int i = 0; i < size; i++)
        bytes[i] = (char)((unsigned long long)v >> (8 * (size - 1 - i)));
    return buf_put(b, bytes, size);
}

static int binary_language(PyObject *language, long long *out)
{
    if (!PyUnicode_CheckExact(language))
        return FALLBACK;
    PyObject *code = PyDict_GetItemWithError(language_codes, language);
    if (code == NULL)
        return PyErr_Occurred() ? ERR : (*out = other_code, OK);
    return int_field(code, -128, 127, out);
}

static int encode_binary(Buf *b, Fields *f)
{
    long long code, lang, version, opaque, flag;
    int rc;
#define STEP(call) if ((rc = (call)) != OK) return rc
    STEP(int_field(f->code, INT16_MIN, INT16_MAX, &code));
    STEP(binary_language(f->language, &lang));
    STEP(int_field(f->version, INT16_MIN, INT16_MAX, &version));
    STEP(int_field(f->opaque, INT32_MIN, INT32_MAX, &opaque));
    STEP(int_field(f->flag, INT32_MIN, INT32_MAX, &flag));
    STEP(put_be(b, code, 2));
    STEP(put_be(b, lang, 1));
    STEP(put_be(b, version, 2));
    STEP(put_be(b, opaque, 4));
    STEP(put_be(b, flag, 4));
    const char *s = "";
    Py_ssize_t n = 0;
    if (f->remark != Py_None)
        STEP(utf8_of(f->remark, &s, &n));
    STEP(put_be(b, n, 4));
    STEP(buf_put(b, s, n));
    if (!PyDict_CheckExact(f->ext))
        return FALLBACK;
    Py_ssize_t at = b->len, pos = 0;
    STEP(put_be(b, 0, 4)); /* the map's length, written when known */
    PyObject *k, *v;
    while (PyDict_Next(f->ext, &pos, &k, &v)) {
        const char *ks, *vs;
        Py_ssize_t kn, vn;
        STEP(utf8_of(k, &ks, &kn));
        STEP(utf8_of(v, &vs, &vn));
        if (kn > INT16_MAX)
            return FALLBACK;
        STEP(put_be(b, kn, 2));
        STEP(buf_put(b, ks, kn));
        STEP(put_be(b, vn, 4));
        STEP(buf_put(b, vs, vn));
    }
    Py_ssize_t map_len = b->len - at - 4;
    if (map_len > INT32_MAX)
        return FALLBACK;
    for (int i = 0; i < 4; i++)
        b->p[at + i] = (char)((uint64_t)map_len >> (8 * (3 - i)));
    return OK;
#undef STEP
}

/* The header of `cmd` into b; *type gets its serialize type (0 or 1). */
static int encode_header(PyObject *cmd, Buf *b, long long *type)
{
    PyObject *st = PyObject_GetAttr(cmd, s_serialize_type);
    if (st == NULL) {
        PyErr_Clear();
        return FALLBACK;
    }
    int rc = int_field(st, 0, 1, type);
    Py_DECREF(st);
    if (rc != OK)
        return rc;
    Fields f = {NULL, NULL, NULL, NULL, NULL, NULL, NULL};
    rc = fields_get(cmd, &f);
    if (rc == OK)
        rc = *type == 1 ? encode_binary(b, &f) : encode_json(b, &f);
    fields_clear(&f);
    if (rc == OK && b->len >= (1 << 24))
        rc = FALLBACK;
    return rc;
}

/* What an encode entry point answers: `out`, the error raised (ERR), or the reference's answer. */
static PyObject *encode_answer(int rc, PyObject *out, PyObject *pure, PyObject *cmd)
{
    if (out != NULL) {
        encoded++;
        return out;
    }
    if (rc == ERR)
        return NULL;
    encode_fallbacks++;
    return PyObject_CallOneArg(pure, cmd);
}

static PyObject *cframe_encode_header(PyObject *self, PyObject *cmd)
{
    if (!check_setup())
        return NULL;
    Buf b;
    buf_init(&b);
    long long type;
    int rc = encode_header(cmd, &b, &type);
    PyObject *out = rc == OK ? PyBytes_FromStringAndSize(b.p, b.len) : NULL;
    buf_free(&b);
    return encode_answer(rc == OK && out == NULL ? ERR : rc, out, pure_encode_header, cmd);
}

/* cmd.body as the reference takes it (`cmd.body or b""`): bytes, bytearray or None; else FALLBACK */
static int body_of(PyObject *cmd, PyObject **body)
{
    *body = PyObject_GetAttr(cmd, s_body);
    if (*body == NULL) {
        PyErr_Clear();
        return FALLBACK;
    }
    if (PyBytes_CheckExact(*body) || PyByteArray_CheckExact(*body))
        return OK;
    if (*body == Py_None) {
        Py_SETREF(*body, Py_NewRef(empty_bytes));
        return OK;
    }
    Py_CLEAR(*body);
    return FALLBACK;
}

static PyObject *cframe_encode_frame(PyObject *self, PyObject *cmd)
{
    if (!check_setup())
        return NULL;
    Buf b;
    buf_init(&b);
    long long type;
    PyObject *body = NULL, *out = NULL;
    int rc = body_of(cmd, &body);
    if (rc == OK)
        rc = encode_header(cmd, &b, &type);
    if (rc == OK) {
        const char *bp = PyBytes_Check(body) ? PyBytes_AS_STRING(body) : PyByteArray_AS_STRING(body);
        Py_ssize_t bn = PyBytes_Check(body) ? PyBytes_GET_SIZE(body) : PyByteArray_GET_SIZE(body);
        Py_ssize_t length = 4 + b.len + bn;
        if (length + 4 > MAX_FRAME_LENGTH) {
            rc = FALLBACK;
        } else if ((out = PyBytes_FromStringAndSize(NULL, 8 + b.len + bn)) != NULL) {
            unsigned char *w = (unsigned char *)PyBytes_AS_STRING(out);
            uint32_t meta = (uint32_t)type << 24 | (uint32_t)b.len;
            for (int i = 0; i < 4; i++) {
                w[i] = (unsigned char)((uint32_t)length >> (8 * (3 - i)));
                w[4 + i] = (unsigned char)(meta >> (8 * (3 - i)));
            }
            memcpy(w + 8, b.p, (size_t)b.len);
            memcpy(w + 8 + b.len, bp, (size_t)bn);
        } else {
            rc = ERR;
        }
    }
    Py_XDECREF(body);
    buf_free(&b);
    return encode_answer(rc, out, pure_encode_frame, cmd);
}

/* -- the answer to a request ------------------------------------------------------------------ */

/* An extFields value as RemotingCommand.response keeps it (the reference's _ext_str): a str, "true" or
 * "false", str() of an int; anything else: FALLBACK. */
static int response_value(PyObject *v, PyObject **out)
{
    if (PyUnicode_CheckExact(v)) {
        *out = Py_NewRef(v);
        return OK;
    }
    if (PyBool_Check(v)) {
        *out = PyUnicode_FromString(v == Py_True ? "true" : "false");
        return *out ? OK : ERR;
    }
    if (PyLong_CheckExact(v)) {
        *out = PyObject_Str(v);
        return *out ? OK : ERR;
    }
    return FALLBACK;
}

/* {k: str(v)} of the answer's ext fields, None values dropped; NULL with no error set: fall back. */
static PyObject *response_ext(PyObject *ext)
{
    if (ext != Py_None && !PyDict_CheckExact(ext))
        return NULL;
    PyObject *d = PyDict_New(), *k, *v;
    Py_ssize_t pos = 0;
    if (d == NULL || ext == Py_None || PyDict_GET_SIZE(ext) == 0)
        return d;
    while (PyDict_Next(ext, &pos, &k, &v)) {
        PyObject *text;
        if (v == Py_None)
            continue;
        int rc = response_value(v, &text);
        if (rc == OK) {
            rc = PyDict_SetItem(d, k, text) < 0 ? ERR : OK;
            Py_DECREF(text);
        }
        if (rc != OK) {
            Py_DECREF(d);
            return NULL;
        }
    }
    return d;
}

static PyObject *cframe_response(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (!check_setup())
        return NULL;
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "response(request, code, remark, ext_fields, body) takes 5 arguments");
        return NULL;
    }
    PyObject *req = args[0], *ext = response_ext(args[3]);
    if (ext == NULL) {
        if (PyErr_Occurred())
            return NULL;
        encode_fallbacks++;
        return PyObject_Vectorcall(pure_response, args, nargs, NULL);
    }
    PyObject *vals[9] = {Py_NewRef(args[1]), ext, Py_NewRef(args[4]), Py_NewRef(args[2]),
                         PyObject_GetAttr(req, s_opaque), PyLong_FromLong(RPC_TYPE_RESPONSE), Py_NewRef(s_java),
                         PyObject_GetAttr(req, s_version), PyObject_GetAttr(req, s_serialize_type)};
    PyObject *out = new_command(vals);
    if (out != NULL)
        encoded++;
    return out;
}

/* -- setup and counters ----------------------------------------------------------------------- */

static PyObject *cframe_setup(PyObject *self, PyObject *args)
{
    PyObject *cls, *json, *rocketmq, *names, *codes, *other, *dframe, *dheader, *eframe, *eheader, *resp;
    if (!PyArg_ParseTuple(args, "O!OOO!O!UOOOOO:setup", &PyType_Type, &cls, &json, &rocketmq, &PyDict_Type, &names,
                          &PyDict_Type, &codes, &other, &dframe, &dheader, &eframe, &eheader, &resp))
        return NULL;
    PyObject *code = PyDict_GetItemWithError(codes, other);
    if (code == NULL) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "setup(): the OTHER language has no code");
        return NULL;
    }
    other_code = PyLong_AsLong(code);
    if (other_code == -1 && PyErr_Occurred())
        return NULL;
    Py_XSETREF(command_class, Py_NewRef(cls));
    Py_XSETREF(st_json, Py_NewRef(json));
    Py_XSETREF(st_rocketmq, Py_NewRef(rocketmq));
    Py_XSETREF(language_names, Py_NewRef(names));
    Py_XSETREF(language_codes, Py_NewRef(codes));
    Py_XSETREF(other_name, Py_NewRef(other));
    Py_XSETREF(pure_decode_frame, Py_NewRef(dframe));
    Py_XSETREF(pure_decode_header, Py_NewRef(dheader));
    Py_XSETREF(pure_encode_frame, Py_NewRef(eframe));
    Py_XSETREF(pure_encode_header, Py_NewRef(eheader));
    Py_XSETREF(pure_response, Py_NewRef(resp));
    Py_RETURN_NONE;
}

static PyObject *cframe_counters(PyObject *self, PyObject *unused)
{
    return Py_BuildValue("{sKsKsKsK}", "decoded", decoded, "decode_fallbacks", decode_fallbacks, "encoded", encoded,
                         "encode_fallbacks", encode_fallbacks);
}

static PyMethodDef cframe_methods[] = {
    {"setup", cframe_setup, METH_VARARGS,
     "setup(command_class, json, rocketmq, language_names, language_codes, other_name, decode_frame,\n"
     "decode_header, encode_frame, encode_header, response): bind the command class, the serialize types,\n"
     "the language tables (code -> name, name -> code) and the pure codec this module falls back to."},
    {"cut_frames", cframe_cut_frames, METH_O,
     "cut_frames(buf) -> ([RemotingCommand, ...], used): the whole frames at buf's start decoded here, up to\n"
     "the first that is not whole, has a bad length or needs the pure codec (FrameDecoder's loop)."},
    {"response", (PyCFunction)(void (*)(void))cframe_response, METH_FASTCALL,
     "response(request, code, remark, ext_fields, body) -> RemotingCommand: RemotingCommand.response, compiled."},
    {"decode_frame", cframe_decode_frame, METH_O,
     "decode_frame(data) -> RemotingCommand: rmqstore.remoting.frame.decode_frame, compiled."},
    {"decode_header", (PyCFunction)(void (*)(void))cframe_decode_header, METH_FASTCALL,
     "decode_header(serialize_type, data) -> RemotingCommand: rmqstore.remoting.frame.decode_header, compiled."},
    {"encode_frame", cframe_encode_frame, METH_O,
     "encode_frame(cmd) -> bytes: rmqstore.remoting.frame.encode_frame, compiled."},
    {"encode_header", cframe_encode_header, METH_O,
     "encode_header(cmd) -> bytes: rmqstore.remoting.frame.encode_header, compiled."},
    {"counters", cframe_counters, METH_NOARGS,
     "counters() -> dict: calls answered here and calls that fell back to the pure codec, decoding and encoding."},
    {NULL, NULL, 0, NULL},
};

static int cframe_exec(PyObject *m)
{
    const char *names[] = {"code", "ext_fields", "body", "remark", "opaque", "flag", "language", "version",
                           "serialize_type", "JAVA"};
    PyObject **slots[] = {&s_code, &s_ext_fields, &s_body, &s_remark, &s_opaque, &s_flag, &s_language,
                          &s_version, &s_serialize_type, &s_java};
    for (int i = 0; i < 10; i++)
        if (*slots[i] == NULL && (*slots[i] = PyUnicode_InternFromString(names[i])) == NULL)
            return -1;
    if (empty_bytes == NULL && (empty_bytes = PyBytes_FromStringAndSize(NULL, 0)) == NULL)
        return -1;
    if (empty_tuple == NULL && (empty_tuple = PyTuple_New(0)) == NULL)
        return -1;
    PyObject *constants = Py_BuildValue("{sisisi}", "MAX_FRAME_LENGTH", MAX_FRAME_LENGTH, "BINARY_HEADER_FIXED_SIZE",
                                        BINARY_HEADER_FIXED_SIZE, "RPC_TYPE_RESPONSE", RPC_TYPE_RESPONSE);
    if (constants == NULL)
        return -1;
    int rc = PyModule_AddObjectRef(m, "CONSTANTS", constants);
    Py_DECREF(constants);
    return rc;
}

static PyModuleDef_Slot cframe_slots[] = {
    {Py_mod_exec, cframe_exec},
    {0, NULL},
};

static struct PyModuleDef cframe_module = {
    PyModuleDef_HEAD_INIT, "rmqstore._native._cframe", "The remoting frame and header codec, compiled.", 0,
    cframe_methods, cframe_slots, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__cframe(void)
{
    return PyModuleDef_Init(&cframe_module);
}
