/*
 * The CTF reader of `katana-trace analyze`: reads LTTng-UST CTF 1.8 traces directly and computes the analysis report
 * (per-type latencies, parallelism, nesting, the longest dispatches) as one JSON document.
 *
 * What it reads is what LTTng-UST writes: packetized or plain-text TSDL metadata (integers, bit fields, enums,
 * strings, structs, variants, arrays, sequences, byte order), packets of events in every data stream of every trace
 * found under the trace folder, merged by timestamp. It is strict: anything it does not understand (floating point,
 * an unknown declaration, a reference it cannot resolve) or anything that does not add up (a packet past the end of
 * its file, a field past the end of its packet, a magic number or UUID that does not match, an unknown event id)
 * ends the analysis with status 3 and one line saying where. Every read is bounds-checked; no loop runs longer than
 * the bytes it consumes. The reader keeps its state in this file's statics: one analysis per process.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <setjmp.h>
#include "include/katana_ctf.h"
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------------------------------------------ failure, memory */

static const char *trace_root = "?";

/* Writes `text` to `out` with control characters escaped (\n, \t, \r, else \xHH): a message quotes damaged
   input (a metadata token, the trace's path), and must still be one line. */
static void put_escaped(FILE *out, const char *text) {
    for (const unsigned char *c = (const unsigned char *)text; *c; c++) {
        if (*c == '\n') fputs("\\n", out);
        else if (*c == '\t') fputs("\\t", out);
        else if (*c == '\r') fputs("\\r", out);
        else if (*c < 0x20 || *c == 0x7f) fprintf(out, "\\x%02x", *c);
        else fputc(*c, out);
    }
}

/* Where a failure goes: the analysis entry point's jump buffer, and the one-line message it returns. */
static jmp_buf *failure_jump;
static char failure_message[1024];

__attribute__((noreturn, format(printf, 1, 2))) static void fail(const char *format, ...) {
    char message[512];
    va_list args;
    va_start(args, format);
    vsnprintf(message, sizeof message, format, args);
    va_end(args);
    char *buffer = NULL;
    size_t length = 0;
    FILE *line = open_memstream(&buffer, &length);
    if (line) {
        put_escaped(line, trace_root);
        fputs(": ", line);
        put_escaped(line, message);
        fclose(line);
        snprintf(failure_message, sizeof failure_message, "%s", buffer ? buffer : message);
        free(buffer);
    } else {
        snprintf(failure_message, sizeof failure_message, "%s", message);
    }
    if (failure_jump) longjmp(*failure_jump, 1);
    fprintf(stderr, "katana-trace: %s\n", failure_message);
    _exit(3);
}

/* The most fields a structure may have here (decoding keeps them on the stack). */
#define MAX_FIELDS 256

/* Set by `decline`: the failure is a sound construct this reader does not know (babeltrace2 may read it), not
   damage. */
static int failure_declined;

#define decline(...) (failure_declined = 1, fail(__VA_ARGS__))

static void *xrealloc(void *p, size_t size) {
    void *q = realloc(p, size ? size : 1);
    if (!q) fail("out of memory (%zu bytes)", size);
    return q;
}

static void *xcalloc(size_t n, size_t size) {
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) fail("out of memory");
    return p;
}

static char *xstrndup(const char *s, size_t n) {
    char *p = xrealloc(NULL, n + 1);
    memcpy(p, s, n);
    p[n] = 0;
    return p;
}

/* Grows *array (of *capacity elements of `size` bytes) to hold at least `need`. */
static void grow(void **array, size_t *capacity, size_t need, size_t size) {
    if (need <= *capacity) return;
    size_t c = *capacity ? *capacity : 8;
    while (c < need) {
        if (c > SIZE_MAX / 2 / size) fail("out of memory");
        c *= 2;
    }
    *array = xrealloc(*array, c * size);
    memset((char *)*array + *capacity * size, 0, (c - *capacity) * size);
    *capacity = c;
}

/* ------------------------------------------------------------------------------------------------------ TSDL types */

enum { K_INT, K_STRING, K_STRUCT, K_ARRAY, K_SEQ, K_VARIANT };
enum { ROLE_NONE, ROLE_EVENT_ID, ROLE_CLOCK };

typedef struct type type;
typedef struct { char *label; int64_t lo, hi; uint32_t interned; /* the label's string id, once asked for */ } mapping;
typedef struct {
    char *name;     /* without TSDL's leading underscore, as babeltrace2 names fields */
    type *t;
    int ref;        /* sequence length or variant tag: index of the sibling field it names */
    int role;
} field;
struct type {
    int kind;
    unsigned align;          /* bits */
    unsigned size;           /* integers: bits (1..64) */
    int is_signed, be, clock;
    int text;                /* integers: an encoding (UTF8, ASCII) other than none — an array or sequence of
                              * 8-bit ones is text, read as a string (as babeltrace2 does) */
    mapping *maps;           /* enums */
    int nmaps;
    field *fields;           /* structs, variants */
    int nfields;
    type *elem;              /* arrays, sequences */
    uint64_t length;         /* arrays */
    char *ref;               /* sequences, variants: the sibling field named */
    uint64_t minbits;        /* the fewest bits a value of this type takes */
};

static type *new_type(int kind) {
    type *t = xcalloc(1, sizeof *t);
    t->kind = kind;
    t->align = 8;
    return t;
}

static type *copy_type(const type *t) {
    type *c = new_type(t->kind);
    *c = *t;
    return c;
}

static uint64_t sat_mul(uint64_t a, uint64_t b) { return (a && b > UINT64_MAX / a) ? UINT64_MAX : a * b; }
static uint64_t sat_add(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }

/* ------------------------------------------------------------------------------------------------------- tokenizer */

enum { TK_END, TK_IDENT, TK_NUMBER, TK_STRING, TK_PUNCT };
typedef struct {
    int kind;
    const char *s;
    size_t n;
    uint64_t number;
} token;

typedef struct {
    token *tokens;
    const char *text; /* the metadata text the tokens point into, for the line a syntax error names */
    size_t length;
    size_t count, capacity, at;
    int depth;
    int byte_order_be;  /* the trace's */
    char clock_name[100]; /* the clock declared so far ("": none), which an integer's `map` must name */
} parser;

static void tokenize(parser *p, const char *text, size_t length) {
    p->text = text;
    p->length = length;
    size_t i = 0;
    while (i < length) {
        char c = text[i];
        /* TSDL's white space is these four (babeltrace2's lexer refuses a form feed or a vertical tab too). */
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r') { i++; continue; }
        if (c == '/' && i + 1 < length && text[i + 1] == '*') {
            const char *close = memmem(text + i + 2, length - i - 2, "*/", 2);
            if (!close) fail("metadata: comment not closed");
            i = (size_t)(close - text) + 2;
            continue;
        }
        if (c == '/' && i + 1 < length && text[i + 1] == '/') {
            while (i < length && text[i] != '\n') i++;
            continue;
        }
        grow((void **)&p->tokens, &p->capacity, p->count + 2, sizeof(token));
        token *t = &p->tokens[p->count++];
        t->s = text + i;
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_') {
            size_t j = i;
            while (j < length && ((text[j] >= 'a' && text[j] <= 'z') || (text[j] >= 'A' && text[j] <= 'Z') ||
                                  (text[j] >= '0' && text[j] <= '9') || text[j] == '_'))
                j++;
            t->kind = TK_IDENT;
            t->n = j - i;
            i = j;
        } else if (c >= '0' && c <= '9') {
            size_t j = i;
            uint64_t v = 0;
            int base = 10;
            if (c == '0' && j + 1 < length && (text[j + 1] == 'x' || text[j + 1] == 'X')) { base = 16; j += 2; }
            else if (c == '0' && j + 1 < length && text[j + 1] >= '0' && text[j + 1] <= '7') { base = 8; j += 1; }
            size_t digits = 0;
            for (; j < length; j++, digits++) {
                int d;
                char x = text[j];
                if (x >= '0' && x <= '9') d = x - '0';
                else if (base == 16 && x >= 'a' && x <= 'f') d = x - 'a' + 10;
                else if (base == 16 && x >= 'A' && x <= 'F') d = x - 'A' + 10;
                else break;
                if (d >= base) fail("metadata: bad digit in a number");
                if (v > (UINT64_MAX - (uint64_t)d) / (uint64_t)base) fail("metadata: number too large");
                v = v * (uint64_t)base + (uint64_t)d;
            }
            if (base == 16 && digits == 0) fail("metadata: bad hexadecimal number");
            while (j < length && (text[j] == 'u' || text[j] == 'U' || text[j] == 'l' || text[j] == 'L')) j++;
            t->kind = TK_NUMBER;
            t->number = v;
            t->n = j - i;
            i = j;
        } else if (c == '"') {
            size_t j = i + 1;
            while (j < length && text[j] != '"') j += (text[j] == '\\' && j + 1 < length) ? 2 : 1;
            if (j >= length) fail("metadata: string not closed");
            t->kind = TK_STRING;
            t->s = text + i + 1;
            t->n = j - i - 1;
            i = j + 1;
        } else {
            t->kind = TK_PUNCT;
            if (c == ':' && i + 1 < length && text[i + 1] == '=') t->n = 2;
            else if (c == '.' && i + 2 < length && text[i + 1] == '.' && text[i + 2] == '.') t->n = 3;
            else if (c && strchr("{}[]()<>;=:,.-+*", c)) t->n = 1;
            else fail("metadata: unexpected character 0x%02x", (unsigned char)c);
            i += t->n;
        }
    }
    grow((void **)&p->tokens, &p->capacity, p->count + 1, sizeof(token));
    p->tokens[p->count].kind = TK_END;
    p->tokens[p->count].s = "";
    p->tokens[p->count].n = 0;
}

static token *peek(parser *p) { return &p->tokens[p->at]; }
static token *next(parser *p) {
    token *t = &p->tokens[p->at];
    if (t->kind != TK_END) p->at++;
    return t;
}
static int is(token *t, const char *text) { return t->n == strlen(text) && memcmp(t->s, text, t->n) == 0 && t->kind != TK_STRING; }
static int accept(parser *p, const char *text) {
    if (is(peek(p), text)) { p->at++; return 1; }
    return 0;
}
/* The metadata text's line (from 1) where `t` stands: what a syntax error names, as babeltrace2's does. */
static int line_of(const parser *p, const token *t) {
    const char *end = t->kind == TK_END || t->s < p->text || t->s > p->text + p->length ? p->text + p->length : t->s;
    int line = 1;
    for (const char *c = p->text; c < end; c++) line += *c == '\n';
    return line;
}

static void expect(parser *p, const char *text) {
    token *t = peek(p);
    if (!is(t, text))
        fail("metadata line %d: expected '%s', found '%.*s'", line_of(p, t), text, (int)(t->n > 40 ? 40 : t->n), t->s);
    p->at++;
}
static char *expect_ident(parser *p) {
    token *t = next(p);
    if (t->kind != TK_IDENT)
        fail("metadata line %d: expected a name, found '%.*s'", line_of(p, t), (int)(t->n > 40 ? 40 : t->n), t->s);
    return xstrndup(t->s, t->n);
}

/* A number, optionally negative. */
static int64_t expect_number(parser *p, int *negative) {
    int neg = accept(p, "-");
    token *t = next(p);
    if (t->kind != TK_NUMBER)
        fail("metadata line %d: expected a number, found '%.*s'", line_of(p, t), (int)(t->n > 40 ? 40 : t->n), t->s);
    if (negative) *negative = neg;
    if (neg) {
        if (t->number > (uint64_t)INT64_MAX + 1) fail("metadata: number too small");
        return t->number == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)t->number;
    }
    return (int64_t)t->number;
}

/* Skips a value up to (not including) the ';' that ends it, with balanced brackets. */
/* Skips one attribute value the reader does not use: a number (signed or not), a string, a name (`a.b`),
   `true`, or a bracketed group. Only one: `tracer_minor = 13` followed by another line without its `;` is an error
   here, as it is for babeltrace2. */
static void skip_value(parser *p) {
    token *t = peek(p);
    if (t->kind == TK_END) fail("metadata: unexpected end");
    if (is(t, "{") || is(t, "(") || is(t, "[")) {
        int depth = 0;
        for (;;) {
            t = peek(p);
            if (t->kind == TK_END) fail("metadata: unexpected end");
            if (is(t, "{") || is(t, "(") || is(t, "[")) depth++;
            if (is(t, "}") || is(t, ")") || is(t, "]")) depth--;
            p->at++;
            if (depth == 0) return;
        }
    }
    if (is(t, "-") || is(t, "+")) t = (p->at++, peek(p));
    if (t->kind != TK_NUMBER && t->kind != TK_STRING && t->kind != TK_IDENT)
        fail("metadata line %d: expected a value, found '%.*s'", line_of(p, t), (int)(t->n > 40 ? 40 : t->n), t->s);
    p->at++;
    if (t->kind == TK_IDENT)
        while (is(peek(p), ".") && p->tokens[p->at + 1].kind == TK_IDENT) p->at += 2;
}

/* ----------------------------------------------------------------------------------------------- named type scopes */

typedef struct { char *name; type *t; } alias;
static alias *aliases;
static size_t alias_count, alias_capacity;

static void define_alias(const char *name, type *t) {
    for (size_t i = 0; i < alias_count; i++)
        if (strcmp(aliases[i].name, name) == 0) { aliases[i].t = t; return; }
    grow((void **)&aliases, &alias_capacity, alias_count + 1, sizeof(alias));
    aliases[alias_count].name = xstrndup(name, strlen(name));
    aliases[alias_count++].t = t;
}

static type *find_alias(const char *name) {
    for (size_t i = alias_count; i-- > 0;)
        if (strcmp(aliases[i].name, name) == 0) return aliases[i].t;
    return NULL;
}

/* ------------------------------------------------------------------------------------------------- type specifiers */

static type *parse_type(parser *p);
static void parse_fields(parser *p, type *container);

static void finish_minbits(type *t) {
    switch (t->kind) {
    case K_INT: t->minbits = t->size; break;
    case K_STRING: t->minbits = 8; break;
    case K_STRUCT:
        t->minbits = 0;
        for (int i = 0; i < t->nfields; i++) t->minbits = sat_add(t->minbits, t->fields[i].t->minbits);
        break;
    case K_ARRAY: t->minbits = sat_mul(t->length, t->elem->minbits); break;
    case K_SEQ: t->minbits = 0; break;
    case K_VARIANT:
        t->minbits = UINT64_MAX;
        for (int i = 0; i < t->nfields; i++)
            if (t->fields[i].t->minbits < t->minbits) t->minbits = t->fields[i].t->minbits;
        if (!t->nfields) t->minbits = 0;
        break;
    }
}

/* An integer attribute's name: an identifier, or a chain of them (`a.b`, `a->b`), which babeltrace2 reads as its
   first identifier (`size.q = 64` sets the size; `e.coding = none` is an unknown attribute, warned about and read
   past). Campaign seed 12307. */
static char *expect_attribute_name(parser *p) {
    char *key = expect_ident(p);
    for (;;) {
        if (accept(p, ".")) {
        } else if (is(peek(p), "-") && is(&p->tokens[p->at + 1], ">")) {
            p->at += 2;
        } else {
            return key;
        }
        token *t = next(p);
        if (t->kind != TK_IDENT)
            fail("metadata line %d: expected a name after '.' or '->', found '%.*s'", line_of(p, t), (int)(t->n > 40 ? 40 : t->n), t->s);
    }
}

static type *parse_integer_body(parser *p) {
    type *t = new_type(K_INT);
    t->be = p->byte_order_be;
    int have_size = 0, have_align = 0;
    expect(p, "{");
    while (!accept(p, "}")) {
        char *key = expect_attribute_name(p);
        expect(p, "=");
        if (strcmp(key, "size") == 0) {
            int64_t v = expect_number(p, NULL);
            if (v < 1 || v > 64) decline("metadata: integer size %" PRId64 " is not read here (1 to 64 bits)", v);
            t->size = (unsigned)v;
            have_size = 1;
        } else if (strcmp(key, "align") == 0) {
            int64_t v = expect_number(p, NULL);
            if (v < 1 || v > 4096 || (v & (v - 1))) fail("metadata: bad alignment %" PRId64, v);
            t->align = (unsigned)v;
            have_align = 1;
        } else if (strcmp(key, "signed") == 0) {
            token *v = next(p);
            if (!(is(v, "true") || is(v, "TRUE") || is(v, "false") || is(v, "FALSE") || v->kind == TK_NUMBER))
                fail("metadata line %d: `signed` must be true or false, found '%.*s'", line_of(p, v), (int)(v->n > 40 ? 40 : v->n), v->s);
            t->is_signed = is(v, "true") || is(v, "TRUE") || (v->kind == TK_NUMBER && v->number != 0);
        } else if (strcmp(key, "byte_order") == 0) {
            token *v = next(p);
            if (is(v, "le")) t->be = 0;
            else if (is(v, "be") || is(v, "network")) t->be = 1;
            else if (is(v, "native")) t->be = p->byte_order_be;
            else fail("metadata: unknown byte order");
        } else if (strcmp(key, "map") == 0) {
            /* `clock.NAME.value`, NAME a clock declared before it: babeltrace2 refuses any other. */
            t->clock = 1;
            token *at = peek(p), *name = NULL;
            if (!(is(next(p), "clock") && accept(p, ".") && (name = next(p))->kind == TK_IDENT && accept(p, ".") &&
                  is(next(p), "value")))
                fail("metadata line %d: `map` must be clock.NAME.value", line_of(p, at));
            if (!p->clock_name[0] || strlen(p->clock_name) != name->n || memcmp(p->clock_name, name->s, name->n) != 0)
                fail("metadata line %d: `map` names clock '%.*s', which is not declared before it", line_of(p, at),
                     (int)(name->n > 40 ? 40 : name->n), name->s);
        } else if (strcmp(key, "encoding") == 0) {
            token *v = next(p);
            if (is(v, "none") || is(v, "NONE")) t->text = 0;
            else if (is(v, "UTF8") || is(v, "utf8") || is(v, "ASCII") || is(v, "ascii")) t->text = 1;
            else fail("metadata: unknown integer encoding '%.*s'", (int)(v->n > 40 ? 40 : v->n), v->s);
        } else if (strcmp(key, "base") == 0) {
            token *v = next(p);
            static const char *const bases[] = {"decimal", "dec", "d", "i", "u", "hexadecimal", "hex", "x", "X", "p",
                                                "octal", "oct", "o", "binary", "b"};
            int known = v->kind == TK_NUMBER && (v->number == 2 || v->number == 8 || v->number == 10 || v->number == 16);
            for (size_t i = 0; !known && i < sizeof bases / sizeof bases[0]; i++) known = is(v, bases[i]);
            if (!known) fail("metadata: unknown integer base '%.*s'", (int)(v->n > 40 ? 40 : v->n), v->s);
        } else {
            skip_value(p);  /* an attribute CTF readers ignore (babeltrace2 warns and reads on) */
        }
        free(key);
        expect(p, ";");
    }
    if (!have_size) fail("metadata: integer without a size");
    if (!have_align) t->align = (t->size % 8) ? 1 : 8;
    finish_minbits(t);
    return t;
}

static type *parse_enum_body(parser *p, type *base) {
    if (base->kind != K_INT) fail("metadata: enum over a type that is not an integer");
    type *t = copy_type(base);
    t->maps = NULL;
    t->nmaps = 0;
    size_t capacity = 0;
    int64_t next_value = 0;
    expect(p, "{");
    while (!accept(p, "}")) {
        token *l = next(p);
        if (l->kind != TK_IDENT && l->kind != TK_STRING) fail("metadata: bad enum label");
        char *label = xstrndup(l->s, l->n);
        int64_t lo = next_value, hi = next_value;
        if (accept(p, "=")) {
            lo = hi = expect_number(p, NULL);
            if (accept(p, "...")) hi = expect_number(p, NULL);
        }
        if (hi < lo) fail("metadata: enum range ends before it starts");
        next_value = hi == INT64_MAX ? hi : hi + 1;
        grow((void **)&t->maps, &capacity, (size_t)t->nmaps + 1, sizeof(mapping));
        t->maps[t->nmaps++] = (mapping){label, lo, hi, 0};
        if (!accept(p, ",")) { expect(p, "}"); break; }
    }
    return t;
}

/* `struct [name] { fields } [align(n)]` or `struct name`; the same for variants (with `<tag>`). */
static type *parse_compound(parser *p, int kind) {
    char *name = NULL;
    if (peek(p)->kind == TK_IDENT) name = expect_ident(p);
    char *tag = NULL;
    if (kind == K_VARIANT && accept(p, "<")) {
        tag = expect_ident(p);
        while (accept(p, ".")) decline("metadata: a variant tag outside its structure is not read here");
        expect(p, ">");
    }
    char key[300];
    if (name) snprintf(key, sizeof key, "%s %s", kind == K_STRUCT ? "struct" : "variant", name);
    if (!is(peek(p), "{")) {
        if (!name) fail("metadata: anonymous %s without a body", kind == K_STRUCT ? "struct" : "variant");
        type *known = find_alias(key);
        if (!known) fail("metadata: unknown %s", key);
        free(name);
        if (tag) {
            known = copy_type(known);
            known->ref = tag;
        }
        return known;
    }
    type *t = new_type(kind);
    t->ref = tag;
    t->align = kind == K_STRUCT ? 1 : 1;
    expect(p, "{");
    parse_fields(p, t);
    expect(p, "}");
    if (kind == K_STRUCT && accept(p, "align")) {
        expect(p, "(");
        int64_t v = expect_number(p, NULL);
        if (v < 1 || v > 4096 || (v & (v - 1))) fail("metadata: bad alignment");
        expect(p, ")");
        if ((unsigned)v > t->align) t->align = (unsigned)v;
    }
    if (kind == K_VARIANT && !tag && name == NULL) decline("metadata: a variant without a tag is not read here");
    finish_minbits(t);
    if (name) {
        define_alias(key, t);
        free(name);
    }
    return t;
}

static type *parse_type(parser *p) {
    if (++p->depth > 64) fail("metadata: declarations nested too deeply");
    type *t = NULL;
    token *first = peek(p);
    if (accept(p, "integer")) {
        t = parse_integer_body(p);
    } else if (accept(p, "string")) {
        t = new_type(K_STRING);
        if (is(peek(p), "{")) {  /* { encoding = UTF8; } */
            next(p);
            while (!accept(p, "}")) {
                if (peek(p)->kind == TK_END) fail("metadata: unexpected end");
                next(p);
            }
        }
        finish_minbits(t);
    } else if (accept(p, "struct")) {
        t = parse_compound(p, K_STRUCT);
    } else if (accept(p, "variant")) {
        t = parse_compound(p, K_VARIANT);
    } else if (accept(p, "enum")) {
        char *name = NULL;
        if (peek(p)->kind == TK_IDENT && !is(peek(p), "integer")) name = expect_ident(p);
        type *base;
        if (accept(p, ":")) base = parse_type(p);
        else {
            base = find_alias("int");
            if (!base) fail("metadata: enum without a container type");
        }
        if (!is(peek(p), "{")) {
            char key[300];
            snprintf(key, sizeof key, "enum %s", name ? name : "");
            t = find_alias(key);
            if (!t) fail("metadata: unknown enum");
        } else {
            t = parse_enum_body(p, base);
            finish_minbits(t);
            if (name) {
                char key[300];
                snprintf(key, sizeof key, "enum %s", name);
                define_alias(key, t);
            }
        }
        free(name);
    } else if (is(first, "floating_point")) {
        decline("metadata: floating-point fields are not read here");
    } else if (first->kind == TK_IDENT) {
        /* A type name of one or more words (`uint32_t`, `unsigned long`): the longest run that names an alias. */
        char name[300] = "";
        size_t best_at = 0;
        type *best = NULL;
        size_t at = p->at;
        for (int words = 0; words < 4 && p->tokens[at].kind == TK_IDENT; words++, at++) {
            if (words) strncat(name, " ", sizeof name - strlen(name) - 1);
            strncat(name, p->tokens[at].s, p->tokens[at].n < 200 ? p->tokens[at].n : 200);
            type *found = find_alias(name);
            if (found) { best = found; best_at = at + 1; }
        }
        if (!best) fail("metadata: unknown type '%.*s'", (int)(first->n > 40 ? 40 : first->n), first->s);
        p->at = best_at;
        t = best;
    } else {
        fail("metadata: expected a type, found '%.*s'", (int)(first->n > 40 ? 40 : first->n), first->s);
    }
    p->depth--;
    return t;
}

/* Field declarations up to the closing brace: `TYPE name[dims]...;`, plus typealiases inside structures. */
static char *strip_name(char *name) {
    if (name[0] == '_') memmove(name, name + 1, strlen(name));
    return name;
}

static void add_field(type *container, char *name, type *t) {
    for (int i = 0; i < container->nfields; i++)
        if (strcmp(container->fields[i].name, name) == 0) fail("metadata: field '%s' declared twice", name);
    if (container->nfields >= MAX_FIELDS) decline("metadata: a structure of more than %d fields is not read here", MAX_FIELDS);
    container->fields = xrealloc(container->fields, ((size_t)container->nfields + 1) * sizeof(field));
    field *f = &container->fields[container->nfields];
    f->name = name;
    f->t = t;
    f->role = ROLE_NONE;
    f->ref = -1;
    /* A sequence's length or a variant's tag is a field declared before it in the same structure. */
    const char *ref = t->kind == K_SEQ || t->kind == K_VARIANT ? t->ref : NULL;
    if (container->kind == K_STRUCT && ref) {
        char stripped[256];
        snprintf(stripped, sizeof stripped, "%s", ref[0] == '_' ? ref + 1 : ref);
        for (int i = 0; i < container->nfields; i++)
            if (strcmp(container->fields[i].name, stripped) == 0) f->ref = i;
        if (f->ref < 0) fail("metadata: '%s' refers to '%s', which is not a field before it", name, ref);
        type *target = container->fields[f->ref].t;
        if (target->kind != K_INT) fail("metadata: '%s' refers to '%s', which is not an integer", name, ref);
        if (t->kind == K_VARIANT && !target->nmaps) fail("metadata: variant tag '%s' is not an enum", ref);
    } else if (ref) {
        decline("metadata: a variant or sequence directly inside a variant is not read here");
    }
    container->nfields++;
    if (container->kind == K_STRUCT) {
        unsigned a = t->kind == K_ARRAY || t->kind == K_SEQ ? t->elem->align : t->align;
        if (t->kind != K_VARIANT && a > container->align) container->align = a;
    }
}

/* `typealias TYPE := NAME WORDS;` (after the keyword): the name may be several words (`unsigned long`). */
static void parse_typealias(parser *p) {
    type *t = parse_type(p);
    expect(p, ":=");
    char name[300] = "";
    while (peek(p)->kind == TK_IDENT) {
        token *w = next(p);
        if (name[0]) strncat(name, " ", sizeof name - strlen(name) - 1);
        strncat(name, w->s, w->n < 200 ? w->n : 200);
    }
    if (!name[0]) fail("metadata: typealias without a name");
    define_alias(name, t);
    expect(p, ";");
}

static void parse_fields(parser *p, type *container) {
    while (!is(peek(p), "}")) {
        if (peek(p)->kind == TK_END) fail("metadata: unexpected end in a structure");
        if (accept(p, "typealias")) {
            parse_typealias(p);
            continue;
        }
        type *t = parse_type(p);
        if (accept(p, ";")) continue;  /* a named struct/enum/variant declared inside: no field */
        for (;;) {
            char *name = strip_name(expect_ident(p));
            type *declared = t;
            /* Dimensions apply right to left: a[2][3] is an array of 2 arrays of 3. */
            type *dims[8];
            int ndims = 0;
            while (accept(p, "[")) {
                if (ndims == 8) fail("metadata: too many dimensions");
                type *d;
                if (peek(p)->kind == TK_NUMBER) {
                    d = new_type(K_ARRAY);
                    d->length = next(p)->number;
                } else {
                    d = new_type(K_SEQ);
                    d->ref = expect_ident(p);
                    if (is(peek(p), ".")) decline("metadata: a sequence length outside its structure is not read here");
                }
                expect(p, "]");
                dims[ndims++] = d;
            }
            for (int i = ndims; i-- > 0;) {
                dims[i]->elem = declared;
                dims[i]->align = declared->align;
                if (declared->minbits == 0) decline("metadata: an array of empty elements is not read here");
                finish_minbits(dims[i]);
                declared = dims[i];
            }
            for (int i = 1; i < ndims; i++)
                if (dims[i]->kind == K_SEQ) decline("metadata: a sequence inside an array is not read here");
            if (ndims && (t->kind == K_VARIANT || t->kind == K_SEQ)) decline("metadata: arrays of variants are not read here");
            if (declared->kind == K_VARIANT && !declared->ref) fail("metadata: variant '%s' without a tag", name);
            add_field(container, name, declared);
            if (accept(p, ",")) continue;
            expect(p, ";");
            break;
        }
    }
}

/* ------------------------------------------------------------------------------------------------ trace structure */

typedef struct event_class event_class;
struct event_class {
    char *name;
    uint64_t id, stream_id;
    type *context, *fields;
    int role;        /* which katana event (see the analysis) */
    int katana;      /* the provider is katana */
    uint32_t label;  /* the event's name without the provider, interned (katana events) */
    int slot[16];    /* the analysis' fields: index among the payload's or (+1000) the context's fields */
    int extra[16];   /* the other payload fields (integers, strings) a dump shows */
    int extra_count;
    /* A field its role needs that the class lacks (NULL: none). Valid CTF — babeltrace2 reads such a trace — so the
       events are read and a dump shows them; what needs the field (the analysis, a check, an export) refuses them. */
    const char *missing;
};

typedef struct {
    uint64_t id;
    int defined;
    type *header, *packet_context, *event_context;
    event_class **by_id;
    size_t by_id_capacity;
} stream_class;

typedef struct {
    char *dir;
    int be;
    type *packet_header;
    uint64_t freq;
    int64_t offset_s, offset;
    int has_clock;
    int64_t origin_ns;  /* clock value 0, in ns from the epoch */
    stream_class *streams;
    size_t stream_count, stream_capacity;
} trace;

static int parse_uuid(const char *s, size_t n, unsigned char out[16]) {
    size_t k = 0;
    for (size_t i = 0; i < n && k < 32; i++) {
        char c = s[i];
        if (c == '-') continue;
        int d = (c >= '0' && c <= '9') ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : (c >= 'A' && c <= 'F') ? c - 'A' + 10 : -1;
        if (d < 0) return 0;
        if (k % 2 == 0) out[k / 2] = (unsigned char)(d << 4);
        else out[k / 2] |= (unsigned char)d;
        k++;
    }
    return k == 32;
}

static stream_class *stream_class_for(trace *tr, uint64_t id, int create) {
    for (size_t i = 0; i < tr->stream_count; i++)
        if (tr->streams[i].id == id) return &tr->streams[i];
    if (!create) return NULL;
    if (tr->stream_count >= 1024) fail("metadata: too many stream classes");
    grow((void **)&tr->streams, &tr->stream_capacity, tr->stream_count + 1, sizeof(stream_class));
    stream_class *s = &tr->streams[tr->stream_count++];
    memset(s, 0, sizeof *s);
    s->id = id;
    return s;
}

/* `key.sub = value;` or `key.sub := type;` inside trace/stream/event/clock blocks. */
static void parse_key(parser *p, char *key, size_t size) {
    key[0] = 0;
    do {
        token *t = next(p);
        if (t->kind != TK_IDENT) fail("metadata: expected an attribute name, found '%.*s'", (int)(t->n > 40 ? 40 : t->n), t->s);
        if (key[0]) strncat(key, ".", size - strlen(key) - 1);
        strncat(key, t->s, t->n < 100 ? t->n : 100);
    } while (accept(p, "."));
}

static void assign_event_class(trace *tr, event_class *ec);

static void parse_metadata(trace *tr, const char *text, size_t length) {
    parser p = {0};
    tokenize(&p, text, length);
    while (peek(&p)->kind != TK_END) {
        if (accept(&p, ";")) continue;
        if (accept(&p, "typealias")) {
            parse_typealias(&p);
            continue;
        }
        if (is(peek(&p), "struct") || is(peek(&p), "variant") || is(peek(&p), "enum")) {
            parse_type(&p);
            expect(&p, ";");
            continue;
        }
        char *block = expect_ident(&p);
        if (strcmp(block, "typedef") == 0) decline("metadata: typedef is not read here");
        expect(&p, "{");
        event_class *ec = NULL;
        stream_class scratch = {0};
        int stream_has_id = 0;
        uint64_t clock_freq = 1000000000;
        int64_t clock_offset = 0, clock_offset_s = 0;
        char clock_name[100] = "";
        if (strcmp(block, "trace") != 0 && strcmp(block, "stream") != 0 && strcmp(block, "event") != 0 &&
            strcmp(block, "clock") != 0 && strcmp(block, "env") != 0 && strcmp(block, "callsite") != 0)
            fail("metadata line %d: unknown block '%s'", line_of(&p, &p.tokens[p.at - 2]), block);
        if (strcmp(block, "event") == 0) ec = xcalloc(1, sizeof *ec);
        while (!accept(&p, "}")) {
            char key[256];
            parse_key(&p, key, sizeof key);
            if (accept(&p, ":=")) {
                type *t = parse_type(&p);
                int known = 1;
                if (strcmp(block, "trace") == 0 && strcmp(key, "packet.header") == 0) tr->packet_header = t;
                else if (strcmp(block, "stream") == 0 && strcmp(key, "event.header") == 0) scratch.header = t;
                else if (strcmp(block, "stream") == 0 && strcmp(key, "packet.context") == 0) scratch.packet_context = t;
                else if (strcmp(block, "stream") == 0 && strcmp(key, "event.context") == 0) scratch.event_context = t;
                else if (ec && strcmp(key, "fields") == 0) ec->fields = t;
                else if (ec && strcmp(key, "context") == 0) ec->context = t;
                /* An event's or stream's declaration CTF does not define: babeltrace2 warns and reads on. */
                else if (ec || strcmp(block, "stream") == 0) known = 0;
                else fail("metadata: unknown declaration %s.%s", block, key);
                if (known && t->kind != K_STRUCT) fail("metadata: %s.%s is not a structure", block, key);
            } else {
                expect(&p, "=");
                token *v = peek(&p);
                if (strcmp(block, "trace") == 0 && strcmp(key, "byte_order") == 0) {
                    if (is(v, "be") || is(v, "network")) tr->be = 1;
                    else if (is(v, "le")) tr->be = 0;
                    else fail("metadata: unknown byte order");
                    p.byte_order_be = tr->be;
                    next(&p);
                } else if (strcmp(block, "trace") == 0 && strcmp(key, "uuid") == 0 && v->kind == TK_STRING) {
                    unsigned char uuid[16]; /* checked, not kept: packets are not held to it (babeltrace2 does not) */
                    if (!parse_uuid(v->s, v->n, uuid)) fail("metadata: bad trace UUID");
                    next(&p);
                } else if (strcmp(block, "trace") == 0 && strcmp(key, "major") == 0) {
                    if (expect_number(&p, NULL) != 1) fail("metadata: not CTF 1");
                } else if (strcmp(block, "trace") == 0 && strcmp(key, "minor") == 0) {
                    if (expect_number(&p, NULL) != 8) fail("metadata: not CTF 1.8");
                } else if (strcmp(block, "trace") == 0) {
                    fail("metadata: unknown trace attribute '%s'", key);
                } else if (strcmp(block, "clock") == 0 && strcmp(key, "freq") == 0) {
                    int64_t f = expect_number(&p, NULL);
                    if (f <= 0) fail("metadata: bad clock frequency");
                    clock_freq = (uint64_t)f;
                } else if (strcmp(block, "clock") == 0 && strcmp(key, "offset") == 0) {
                    clock_offset = expect_number(&p, NULL);
                } else if (strcmp(block, "clock") == 0 && strcmp(key, "offset_s") == 0) {
                    clock_offset_s = expect_number(&p, NULL);
                } else if (strcmp(block, "clock") == 0 && strcmp(key, "name") == 0) {
                    token *n = next(&p);
                    snprintf(clock_name, sizeof clock_name, "%.*s", (int)(n->n < 90 ? n->n : 90), n->s);
                } else if (strcmp(block, "clock") == 0 && strcmp(key, "uuid") == 0) {
                    unsigned char uuid[16];
                    token *u = next(&p);
                    if (u->kind != TK_STRING || !parse_uuid(u->s, u->n, uuid))
                        fail("metadata line %d: a clock's uuid that is not a UUID", line_of(&p, u));
                } else if (strcmp(block, "clock") == 0 && (strcmp(key, "absolute") == 0 ||
                                                           strcmp(key, "description") == 0 ||
                                                           strcmp(key, "precision") == 0)) {
                    skip_value(&p);
                } else if (strcmp(block, "clock") == 0) {
                    fail("metadata: unknown clock attribute '%s'", key);
                } else if (strcmp(block, "stream") == 0 && strcmp(key, "id") == 0) {
                    scratch.id = (uint64_t)expect_number(&p, NULL);
                    stream_has_id = 1;
                } else if (ec && strcmp(key, "name") == 0) {
                    token *n = next(&p);
                    if (n->kind != TK_STRING && n->kind != TK_IDENT) fail("metadata: bad event name");
                    ec->name = xstrndup(n->s, n->n);
                } else if (ec && strcmp(key, "id") == 0) {
                    int neg;
                    ec->id = (uint64_t)expect_number(&p, &neg);
                    if (neg) fail("metadata: negative event id");
                } else if (ec && strcmp(key, "stream_id") == 0) {
                    ec->stream_id = (uint64_t)expect_number(&p, NULL);
                } else {
                    skip_value(&p);
                }
            }
            expect(&p, ";");
        }
        accept(&p, ";");
        if (strcmp(block, "clock") == 0) {
            if (tr->has_clock) decline("metadata: more than one clock is not read here");
            tr->has_clock = 1;
            snprintf(p.clock_name, sizeof p.clock_name, "%s", clock_name);
            tr->freq = clock_freq;
            tr->offset = clock_offset;
            tr->offset_s = clock_offset_s;
        } else if (strcmp(block, "stream") == 0) {
            stream_class *s = stream_class_for(tr, stream_has_id ? scratch.id : 0, 1);
            if (s->defined) fail("metadata: stream %" PRIu64 " declared twice", s->id);
            s->defined = 1;
            s->header = scratch.header;
            s->packet_context = scratch.packet_context;
            s->event_context = scratch.event_context;
        } else if (ec) {
            if (!ec->name) fail("metadata: event without a name");
            assign_event_class(tr, ec);
        } else if (strcmp(block, "trace") != 0 && strcmp(block, "env") != 0 && strcmp(block, "callsite") != 0) {
            fail("metadata: unknown block '%s'", block);
        }
        free(block);
    }
    free(p.tokens);
}

static void assign_event_class(trace *tr, event_class *ec) {
    stream_class *s = stream_class_for(tr, ec->stream_id, 1);
    if (ec->id >= (1u << 20)) decline("metadata: event id %" PRIu64 " is not read here", ec->id);
    grow((void **)&s->by_id, &s->by_id_capacity, (size_t)ec->id + 1, sizeof(event_class *));
    if (s->by_id[ec->id]) fail("metadata: event id %" PRIu64 " declared twice", ec->id);
    s->by_id[ec->id] = ec;
}

/* The metadata file: packetized (LTTng's usual form: a 37-byte header per packet, then TSDL text) or plain text. */
static char *read_metadata(const char *path, size_t *length) {
    int fd = open(path, O_RDONLY | O_NONBLOCK);
    if (fd < 0) fail("cannot open %s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) fail("%s is not a regular file", path);
    if (st.st_size <= 0) fail("%s is empty", path);
    if (st.st_size > 256 << 20) fail("%s is larger than 256 MB", path);
    size_t size = (size_t)st.st_size;
    unsigned char *raw = xrealloc(NULL, size);
    size_t got = 0;
    while (got < size) {
        ssize_t n = read(fd, raw + got, size - got);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) fail("cannot read %s", path);
        got += (size_t)n;
    }
    close(fd);
    char *text = xrealloc(NULL, size + 1);
    size_t out = 0;
    uint32_t magic_le = size < 4 ? 0 : (uint32_t)raw[0] | (uint32_t)raw[1] << 8 | (uint32_t)raw[2] << 16 | (uint32_t)raw[3] << 24;
    if (magic_le == 0x75d11d57 || magic_le == 0x571dd175) {
        /* Packets as babeltrace2 reads them (the differential test, TraceReaderAgreementTests, holds the two
           together): the magic is the first packet's only; a header cut short at the end, or missing padding after
           the last content, ends the metadata quietly; a packet smaller than its content is the last one; but a
           content that runs past the file (babeltrace2 then waits for the rest for ever), another version than
           1.8, another UUID, compression, encryption or a checksum is refused. */
        int be = magic_le == 0x571dd175;
        size_t at = 0;
        unsigned char first_uuid[16];
        for (int index = 0; size - at >= 37; index++) {
            const unsigned char *h = raw + at;
            uint32_t checksum, content, packet;
            const unsigned char *k = h + 20, *c = h + 24, *q = h + 28;
            checksum = be ? (uint32_t)k[0] << 24 | (uint32_t)k[1] << 16 | (uint32_t)k[2] << 8 | k[3]
                          : (uint32_t)k[0] | (uint32_t)k[1] << 8 | (uint32_t)k[2] << 16 | (uint32_t)k[3] << 24;
            content = be ? (uint32_t)c[0] << 24 | (uint32_t)c[1] << 16 | (uint32_t)c[2] << 8 | c[3]
                         : (uint32_t)c[0] | (uint32_t)c[1] << 8 | (uint32_t)c[2] << 16 | (uint32_t)c[3] << 24;
            packet = be ? (uint32_t)q[0] << 24 | (uint32_t)q[1] << 16 | (uint32_t)q[2] << 8 | q[3]
                        : (uint32_t)q[0] | (uint32_t)q[1] << 8 | (uint32_t)q[2] << 16 | (uint32_t)q[3] << 24;
            if (h[32] || h[33] || h[34] || checksum)
                fail("metadata: packet %d is compressed, encrypted or checksummed (CTF readers do not read such packets)", index);
            if (h[35] != 1 || h[36] != 8) fail("metadata: packet %d has version %u.%u, not 1.8", index, h[35], h[36]);
            if (index == 0) memcpy(first_uuid, h + 4, 16);
            else if (memcmp(first_uuid, h + 4, 16) != 0) fail("metadata: packet %d belongs to another trace (its UUID differs)", index);
            if (content / 8 < 37) fail("metadata: packet %d has a content size of %u bits, less than its header", index, content);
            size_t n = content / 8 - 37;
            if (n > size - at - 37) fail("metadata: packet %d's content runs past the end of the file", index);
            memcpy(text + out, h + 37, n);
            out += n;
            if (packet < content) break;
            size_t padding = (packet - content) / 8;
            at += 37 + n;
            if (padding >= size - at) break;
            at += padding;
        }
    } else {
        if (size < 10 || memcmp(raw, "/* CTF 1.8", 10) != 0) fail("metadata: neither packetized nor CTF 1.8 text");
        memcpy(text, raw, size);
        out = size;
    }
    free(raw);
    if (memchr(text, 0, out)) out = strlen(text);
    text[out] = 0;
    *length = out;
    return text;
}

/* Marks the event header's `id` fields and clock-mapped integers, at any depth. */
static void mark_header(type *t) {
    if (t->kind == K_STRUCT || t->kind == K_VARIANT)
        for (int i = 0; i < t->nfields; i++) {
            field *f = &t->fields[i];
            if (f->t->kind == K_INT && strcmp(f->name, "id") == 0) f->role = ROLE_EVENT_ID;
            else if (f->t->kind == K_INT && f->t->clock) f->role = ROLE_CLOCK;
            else mark_header(f->t);
        }
}

/* ------------------------------------------------------------------------------------------------------- decoding */

typedef struct {
    uint64_t u;        /* integers and enums (as read; sign-extended when signed) */
    const char *s;     /* strings: into the packet buffer */
    uint32_t n;
    unsigned char kind;
} value;

typedef struct {
    const uint8_t *buf;
    uint64_t pos, end;  /* bits */
    uint64_t clock;
    uint64_t event_id;
    int have_event_id;
} cursor;


static void align_to(cursor *c, unsigned align) {
    if (align > 1) {
        uint64_t aligned = (c->pos + align - 1) & ~(uint64_t)(align - 1);
        if (aligned > c->end) fail("a field's alignment passes the end of its packet");
        c->pos = aligned;
    }
}

static uint64_t read_int(cursor *c, const type *t) {
    align_to(c, t->align);
    unsigned size = t->size;
    if (c->end - c->pos < size) fail("a field passes the end of its packet");
    uint64_t pos = c->pos, v;
    c->pos += size;
    const uint8_t *b = c->buf + (pos >> 3);
    unsigned shift = (unsigned)(pos & 7);
    if (!t->be) {
        if (shift == 0 && (size & 7) == 0) {
            v = 0;
            memcpy(&v, b, size >> 3);  /* little-endian host */
        } else if (shift + size <= 64) {
            unsigned bytes = (shift + size + 7) >> 3;
            v = 0;
            memcpy(&v, b, bytes);
            v >>= shift;
            if (size < 64) v &= (UINT64_C(1) << size) - 1;
        } else {
            v = 0;
            for (unsigned i = 0; i < size; i++) v |= (uint64_t)((c->buf[(pos + i) >> 3] >> ((pos + i) & 7)) & 1) << i;
        }
    } else {
        v = 0;
        if (shift == 0 && (size & 7) == 0)
            for (unsigned i = 0; i < size >> 3; i++) v = v << 8 | b[i];
        else
            for (unsigned i = 0; i < size; i++) v = v << 1 | ((c->buf[(pos + i) >> 3] >> (7 - ((pos + i) & 7))) & 1);
    }
    if (t->is_signed && size < 64 && (v >> (size - 1)) & 1) v |= ~UINT64_C(0) << size;
    return v;
}

static void update_clock(cursor *c, uint64_t v, unsigned size) {
    if (size >= 64) { c->clock = v; return; }
    uint64_t mask = (UINT64_C(1) << size) - 1;
    uint64_t low = c->clock & mask;
    uint64_t updated = (c->clock & ~mask) | v;
    if (v < low) updated += UINT64_C(1) << size;
    c->clock = updated;
}

static mapping *enum_label(const type *t, uint64_t v) {
    for (int i = 0; i < t->nmaps; i++) {
        mapping *m = &t->maps[i];
        if (t->is_signed ? ((int64_t)v >= m->lo && (int64_t)v <= m->hi)
                         : (m->lo >= 0 && v >= (uint64_t)m->lo && m->hi >= 0 && v <= (uint64_t)m->hi))
            return m;
    }
    return NULL;
}

static void decode_struct(cursor *c, const type *t, value *out);

static void skip_elements(cursor *c, const type *elem, uint64_t count) {
    if (count == 0) return;
    if (sat_mul(count, elem->minbits) > c->end - c->pos) fail("an array or sequence passes the end of its packet");
    if (elem->kind == K_INT && elem->size % 8 == 0 && elem->align <= elem->size) {
        align_to(c, elem->align);
        if (count * elem->size > c->end - c->pos) fail("an array passes the end of its packet");
        c->pos += count * elem->size;
        return;
    }
    value scratch[MAX_FIELDS];
    for (uint64_t i = 0; i < count; i++) {
        field f = {.name = "", .t = (type *)elem, .ref = -1, .role = ROLE_NONE};
        type wrapper = {.kind = K_STRUCT, .align = 1, .fields = &f, .nfields = 1};
        decode_struct(c, &wrapper, scratch);
    }
}

static void decode_field(cursor *c, const field *f, value *values, int index) {
    const type *t = f->t;
    value *v = &values[index];
    v->kind = (unsigned char)t->kind;
    switch (t->kind) {
    case K_INT:
        v->u = read_int(c, t);
        if (f->role == ROLE_EVENT_ID) { c->event_id = v->u; c->have_event_id = 1; }
        else if (f->role == ROLE_CLOCK) update_clock(c, v->u, t->size);
        break;
    case K_STRING: {
        align_to(c, 8);
        uint64_t start = c->pos >> 3, stop = c->end >> 3;
        const uint8_t *nul = memchr(c->buf + start, 0, stop - start);
        if (!nul) fail("a string passes the end of its packet");
        v->s = (const char *)(c->buf + start);
        if ((uint64_t)(nul - (c->buf + start)) > UINT32_MAX) fail("a string too long");
        v->n = (uint32_t)(nul - (c->buf + start));
        c->pos = ((uint64_t)(nul - c->buf) + 1) << 3;
        break;
    }
    case K_STRUCT: {
        value nested[MAX_FIELDS];
        decode_struct(c, t, nested);
        break;
    }
    case K_ARRAY:
    case K_SEQ: {
        uint64_t count = t->kind == K_ARRAY ? t->length : values[f->ref].u;
        align_to(c, t->elem->align);
        if (t->elem->kind == K_INT && t->elem->text && t->elem->size == 8 && t->elem->align <= 8) {
            /* Text (LTTng's *_text fields): a string of `count` bytes, up to its first NUL if it has one. */
            if (count > (c->end - c->pos) / 8) fail("a text array or sequence passes the end of its packet");
            if (count > UINT32_MAX) fail("a text field too long");
            const uint8_t *start = c->buf + (c->pos >> 3);
            const uint8_t *nul = memchr(start, 0, count);
            v->kind = K_STRING;
            v->s = (const char *)start;
            v->n = (uint32_t)(nul ? (uint64_t)(nul - start) : count);
            c->pos += count * 8;
            break;
        }
        skip_elements(c, t->elem, count);
        break;
    }
    case K_VARIANT:  /* decode_struct selects the option: it knows the tag's type */
        break;
    }
}

/* Variants need the tag's type, which is the sibling's: decode_struct handles them. */
static void decode_struct(cursor *c, const type *t, value *out) {
    if (t->nfields > MAX_FIELDS) decline("a structure of more than %d fields is not read here", MAX_FIELDS);
    align_to(c, t->align);
    for (int i = 0; i < t->nfields; i++) {
        const field *f = &t->fields[i];
        if (f->t->kind == K_VARIANT) {
            const field *tag = &t->fields[f->ref];
            const mapping *m = enum_label(tag->t, out[f->ref].u);
            if (!m) fail("a variant's tag has no label for value %" PRIu64, out[f->ref].u);
            const field *option = NULL;
            for (int k = 0; k < f->t->nfields; k++)
                if (strcmp(f->t->fields[k].name, m->label[0] == '_' ? m->label + 1 : m->label) == 0)
                    option = &f->t->fields[k];
            if (!option) fail("a variant has no option '%s'", m->label);
            value one[1];
            field copy = *option;
            copy.ref = -1;
            if (copy.t->kind == K_STRUCT) {
                value nested[MAX_FIELDS];
                decode_struct(c, copy.t, nested);
            } else if (copy.t->kind == K_SEQ || copy.t->kind == K_VARIANT) {
                decline("a sequence or variant directly inside a variant is not read here");
            } else {
                decode_field(c, &copy, one, 0);
            }
            out[i].kind = K_VARIANT;
            continue;
        }
        decode_field(c, f, out, i);
    }
}

/* ---------------------------------------------------------------------------------------------------------- streams */

typedef struct {
    trace *tr;
    char *path;
    int fd;
    uint64_t size, next_packet;  /* bytes */
    uint8_t *buf;
    size_t capacity;
    cursor c;
    int in_packet;
    stream_class *sc;
    uint64_t discarded_before;
    /* The open packet's timestamp_end (raw clock), when it has one: no event of the packet may be later. */
    int has_packet_end;
    uint64_t packet_end;
    uint64_t packet_offset;
    /* The clock at the stream's last event or packet beginning (raw): no later one may be earlier. */
    uint64_t last_clock;
    int packets;
    /* the current event */
    int64_t ts;
    event_class *ec;
    value payload[MAX_FIELDS], context[MAX_FIELDS];
} stream;

static uint64_t discarded_events;

/* A read of a time range (katana_ctf_set_range): once every stream's first event is known, packets that end before
   `from` are skipped without reading their events, and the read ends at the first event after `to`. */
static struct {
    int has_from, has_to;
    double from_s, to_s;
    int active;              /* set once the streams' first events are read: `origin`, `from_ns` and `to_ns` hold */
    int64_t origin, from_ns, to_ns;  /* absolute */
    uint64_t skipped_packets, skipped_bytes;
    uint64_t katana_events;  /* read, handed on or not */
} range;

void katana_ctf_set_range(int has_from, double from_s, int has_to, double to_s) {
    range.has_from = has_from;
    range.from_s = from_s;
    range.has_to = has_to;
    range.to_s = to_s;
}

int katana_ctf_origin(int64_t *origin) {
    if (range.active) *origin = range.origin;
    return range.active;
}

void katana_ctf_skipped(uint64_t *packets, uint64_t *bytes) {
    *packets = range.skipped_packets;
    *bytes = range.skipped_bytes;
}

static int64_t to_ns(const trace *tr, uint64_t cycles) {
    __int128 ns;
    if (tr->freq == 1000000000) ns = (__int128)cycles;
    else ns = (__int128)cycles * 1000000000 / tr->freq;
    ns += tr->origin_ns;
    if (ns > INT64_MAX || ns < INT64_MIN) fail("a timestamp out of range");
    return (int64_t)ns;
}

static int find_field(const type *t, const char *name) {
    if (!t) return -1;
    for (int i = 0; i < t->nfields; i++)
        if (strcmp(t->fields[i].name, name) == 0) return i;
    return -1;
}

static void read_exact(stream *s, uint64_t offset, size_t length) {
    if (length > s->capacity) {
        if (length > (size_t)1 << 30) fail("%s: a packet larger than 1 GB", s->path);
        s->buf = xrealloc(s->buf, length + 8);
        s->capacity = length;
    }
    size_t got = 0;
    while (got < length) {
        ssize_t n = pread(s->fd, s->buf + got, length - got, (off_t)(offset + got));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) fail("%s: cannot read (%s)", s->path, n < 0 ? strerror(errno) : "file shrank");
        got += (size_t)n;
    }
    memset(s->buf + length, 0, 8);  /* the bit reader may load up to 7 bytes past a field at the end */
}

/* Reads the next packet's header and context; returns 0 at the end of the file. */
static int open_packet(stream *s) {
    while (s->next_packet < s->size) {
        trace *tr = s->tr;
        uint64_t offset = s->next_packet, left = s->size - offset;
        size_t first = left < 4096 ? (size_t)left : 4096;
        read_exact(s, offset, first);
        cursor c = {.buf = s->buf, .pos = 0, .end = (uint64_t)first * 8};
        value header[MAX_FIELDS], context[MAX_FIELDS];
        memset(header, 0, sizeof header);
        memset(context, 0, sizeof context);
        stream_class *sc = NULL;
        if (tr->packet_header) {
            decode_struct(&c, tr->packet_header, header);
            int magic = find_field(tr->packet_header, "magic");
            if (magic >= 0 && header[magic].u != 0xC1FC1FC1) fail("%s: bad packet magic at byte %" PRIu64, s->path, offset);
            /* A packet's UUID is not checked against the trace's: babeltrace2 reads such packets too. */
            int id = find_field(tr->packet_header, "stream_id");
            if (id >= 0) {
                sc = stream_class_for(tr, header[id].u, 0);
                if (!sc) fail("%s: a packet of stream %" PRIu64 ", which the metadata does not declare", s->path, header[id].u);
            }
        }
        if (!sc) {
            if (tr->stream_count == 1) sc = &tr->streams[0];
            else fail("%s: a packet of an unknown stream", s->path);
        }
        if (!sc->defined || !sc->header) fail("%s: stream %" PRIu64 " has no event header", s->path, sc->id);
        if (s->sc && s->sc != sc) fail("%s: packets of different streams in one file", s->path);
        s->sc = sc;
        uint64_t content = left * 8, packet = left * 8;
        uint64_t clock = s->c.clock;
        c.clock = clock;
        if (sc->packet_context) {
            type *pc = sc->packet_context;
            /* timestamp_begin sets the clock; nothing else in the packet context does. */
            decode_struct(&c, pc, context);
            int f;
            if ((f = find_field(pc, "timestamp_begin")) >= 0) c.clock = context[f].u;
            else c.clock = clock;
            if (s->packets && c.clock < s->last_clock)
                fail("%s: the packet at byte %" PRIu64 " begins before the stream's previous event: timestamps go "
                     "backwards", s->path, offset);
            s->last_clock = c.clock;
            s->has_packet_end = 0;
            if ((f = find_field(pc, "timestamp_end")) >= 0 && context[f].u >= c.clock) {
                s->has_packet_end = 1;
                s->packet_end = context[f].u;
            }
            if ((f = find_field(pc, "packet_size")) >= 0) packet = context[f].u;
            if ((f = find_field(pc, "content_size")) >= 0) content = context[f].u;
            else content = packet;
            if ((f = find_field(pc, "events_discarded")) >= 0) {
                uint64_t now = context[f].u, delta = now - s->discarded_before;
                if (now != s->discarded_before) discarded_events += (delta > 0 && delta < (UINT64_C(1) << 40)) ? delta : 1;
                s->discarded_before = now;
            }
        }
        if (packet % 8 || packet / 8 > left || content > packet || content < c.pos)
            fail("%s: packet at byte %" PRIu64 " has sizes that do not add up (content %" PRIu64 " bits, packet %" PRIu64
                 " bits, %" PRIu64 " bytes left in the file)", s->path, offset, content, packet, left);
        if (packet == 0) fail("%s: an empty packet", s->path);
        if (range.active && range.has_from && s->has_packet_end && to_ns(tr, s->packet_end) < range.from_ns) {
            /* Wholly before the range: its header was checked, its events are not read. */
            range.skipped_packets++;
            range.skipped_bytes += packet / 8;
            s->last_clock = s->packet_end;
            s->next_packet = offset + packet / 8;
            s->packets++;
            continue;
        }
        uint64_t header_bits = c.pos;
        read_exact(s, offset, (size_t)((content + 7) / 8));
        s->c = (cursor){.buf = s->buf, .pos = header_bits, .end = content, .clock = c.clock};
        s->next_packet = offset + packet / 8;
        s->packet_offset = offset;
        s->packets++;
        if (s->c.pos < s->c.end) return 1;
    }
    return 0;
}

/* Decodes the stream's next event into s->ts/ec/payload/context; returns 0 at the end of the stream. */
static int next_event(stream *s) {
    for (;;) {
        if (s->in_packet && s->c.pos < s->c.end) break;
        s->in_packet = open_packet(s);
        if (!s->in_packet) return 0;
    }
    cursor *c = &s->c;
    stream_class *sc = s->sc;
    value header[MAX_FIELDS];
    c->have_event_id = 0;
    decode_struct(c, sc->header, header);
    if (!c->have_event_id) fail("%s: an event header without an id", s->path);
    uint64_t id = c->event_id;
    event_class *ec = id < sc->by_id_capacity ? sc->by_id[id] : NULL;
    if (!ec) fail("%s: an event of unknown id %" PRIu64, s->path, id);
    if (sc->event_context) decode_struct(c, sc->event_context, s->context);
    if (ec->context) {
        value scratch[MAX_FIELDS];
        decode_struct(c, ec->context, scratch);
    }
    if (ec->fields) decode_struct(c, ec->fields, s->payload);
    s->ec = ec;
    /* The event header's timestamp field holds the clock's low bits; a value below the previous one means the field
       wrapped. A damaged field wraps it falsely, and the event then lands after its packet's end. */
    if (s->has_packet_end && c->clock > s->packet_end)
        fail("%s: an event in the packet at byte %" PRIu64 " is timed after the packet's end (%" PRIu64 " > %" PRIu64
             " clock cycles): a damaged event header", s->path, s->packet_offset, c->clock, s->packet_end);
    /* A full-width timestamp field sets the clock outright: one that goes back is damage (babeltrace2 refuses the
       trace there too; a reader merging streams by time needs each in order). */
    if (c->clock < s->last_clock)
        fail("%s: an event in the packet at byte %" PRIu64 " is timed before the stream's previous event: timestamps "
             "go backwards", s->path, s->packet_offset);
    s->last_clock = c->clock;
    s->ts = to_ns(s->tr, c->clock);
    return 1;
}

/* ------------------------------------------------------------------------------------------- strings, hash tables */

typedef struct { char *s; uint32_t n; uint64_t hash; } interned;
static interned *strings;           /* id 0: none */
static size_t string_count = 1, string_capacity;
static uint32_t *string_slots;
static size_t string_slot_count;

static uint64_t hash_bytes(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ULL;
    return h ^ (h >> 29);
}

uint32_t katana_ctf_string_count(void) { return (uint32_t)string_count; }

static uint32_t intern(const char *s, size_t n) {
    if (!string_slot_count || string_count * 2 >= string_slot_count) {
        size_t count = string_slot_count ? string_slot_count * 2 : 1024;
        uint32_t *slots = xcalloc(count, sizeof *slots);
        for (size_t i = 1; i < string_count; i++) {
            size_t at = strings[i].hash & (count - 1);
            while (slots[at]) at = (at + 1) & (count - 1);
            slots[at] = (uint32_t)i;
        }
        free(string_slots);
        string_slots = slots;
        string_slot_count = count;
    }
    uint64_t h = hash_bytes(s, n);
    size_t at = h & (string_slot_count - 1);
    while (string_slots[at]) {
        interned *e = &strings[string_slots[at]];
        if (e->hash == h && e->n == n && memcmp(e->s, s, n) == 0) return string_slots[at];
        at = (at + 1) & (string_slot_count - 1);
    }
    if (string_count >= UINT32_MAX / 2) fail("too many distinct names");
    grow((void **)&strings, &string_capacity, string_count + 1, sizeof(interned));
    strings[string_count] = (interned){xstrndup(s, n), (uint32_t)n, h};
    string_slots[at] = (uint32_t)string_count;
    return (uint32_t)string_count++;
}

/* Open addressing from a (a, b) key to a uint32 value; deletion by backward shift. */
typedef struct { uint64_t a, b; uint32_t value; uint32_t used; } slot;
typedef struct { slot *slots; size_t capacity, count; } table;

static uint64_t mix(uint64_t a, uint64_t b) {
    uint64_t h = a * 0x9E3779B97F4A7C15ULL ^ (b + 0x632BE59BD9B4E019ULL + (a << 6) + (a >> 2));
    h ^= h >> 32;
    h *= 0xD6E8FEB86659FD93ULL;
    return h ^ (h >> 32);
}

static void table_put(table *t, uint64_t a, uint64_t b, uint32_t value);

static void table_resize(table *t, size_t capacity) {
    slot *old = t->slots;
    size_t old_capacity = t->capacity;
    t->slots = xcalloc(capacity, sizeof(slot));
    t->capacity = capacity;
    t->count = 0;
    for (size_t i = 0; i < old_capacity; i++)
        if (old[i].used) table_put(t, old[i].a, old[i].b, old[i].value);
    free(old);
}

static slot *table_find(table *t, uint64_t a, uint64_t b) {
    if (!t->count) return NULL;
    size_t at = mix(a, b) & (t->capacity - 1);
    while (t->slots[at].used) {
        if (t->slots[at].a == a && t->slots[at].b == b) return &t->slots[at];
        at = (at + 1) & (t->capacity - 1);
    }
    return NULL;
}

static void table_put(table *t, uint64_t a, uint64_t b, uint32_t value) {
    if ((t->count + 1) * 2 > t->capacity) table_resize(t, t->capacity ? t->capacity * 2 : 64);
    size_t at = mix(a, b) & (t->capacity - 1);
    while (t->slots[at].used) {
        if (t->slots[at].a == a && t->slots[at].b == b) { t->slots[at].value = value; return; }
        at = (at + 1) & (t->capacity - 1);
    }
    t->slots[at] = (slot){a, b, value, 1};
    t->count++;
}

static void table_remove(table *t, slot *s) {
    size_t mask = t->capacity - 1, hole = (size_t)(s - t->slots), at = hole;
    s->used = 0;
    t->count--;
    for (;;) {
        at = (at + 1) & mask;
        if (!t->slots[at].used) return;
        size_t home = mix(t->slots[at].a, t->slots[at].b) & mask;
        /* Move the entry into the hole unless its home lies cyclically in (hole, at]. */
        if ((at > hole && (home <= hole || home > at)) || (at < hole && home <= hole && home > at)) {
            t->slots[hole] = t->slots[at];
            t->slots[at].used = 0;
            hole = at;
        }
    }
}

/* ------------------------------------------------------------------------------------------------------ statistics */

/* The analysis' histogram: log-linear buckets (64 per power of two), exact min/max, Welford mean and deviation. */
typedef struct {
    uint64_t *buckets;
    size_t capacity;
    uint64_t count, min, max;
    double mean, m2;
} histogram;

static size_t bucket_index(uint64_t v) {
    if (v < 64) return (size_t)v;
    unsigned shift = (unsigned)(64 - __builtin_clzll(v)) - 6;
    return 64 + (size_t)(shift - 1) * 32 + (size_t)((v >> shift) - 32);
}

static uint64_t bucket_key(size_t index) {
    if (index < 64) return index;
    unsigned shift = (unsigned)((index - 64) / 32) + 1;
    uint64_t top = 32 + (index - 64) % 32;
    return (top << shift) | ((UINT64_C(1) << shift) >> 1);
}

static void hist_add(histogram *h, int64_t signed_value) {
    uint64_t v = signed_value < 0 ? 0 : (uint64_t)signed_value;
    size_t index = bucket_index(v);
    if (index >= h->capacity) grow((void **)&h->buckets, &h->capacity, index + 1, sizeof(uint64_t));
    h->buckets[index]++;
    h->count++;
    if (h->count == 1 || v < h->min) h->min = v;
    if (v > h->max) h->max = v;
    double delta = (double)v - h->mean;
    h->mean += delta / (double)h->count;
    h->m2 += delta * ((double)v - h->mean);
}

static uint64_t hist_percentile(const histogram *h, double p) {
    if (!h->count) return 0;
    if (p >= 100) return h->max;
    double r = nearbyint(p / 100.0 * (double)h->count + 0.5);  /* Python's round: half to even */
    uint64_t rank = r < 1 ? 1 : (uint64_t)r;
    uint64_t seen = 0;
    for (size_t i = 0; i < h->capacity; i++) {
        seen += h->buckets[i];
        if (h->buckets[i] && seen >= rank) {
            uint64_t key = bucket_key(i);
            if (key < h->min) key = h->min;
            if (key > h->max) key = h->max;
            return key;
        }
    }
    return h->max;
}

static double hist_stddev(const histogram *h) { return h->count > 1 ? sqrt(h->m2 / (double)(h->count - 1)) : 0.0; }

/* The analysis' timeline: side effects in flight, in at most 2 * LIMIT equal buckets, widths doubling. */
#define TIMELINE_LIMIT 2048
typedef struct {
    int started;
    int64_t start, width, level, last;
    double *area;
    int64_t *peak;
    size_t length, capacity;
} timeline;

static size_t timeline_grow(timeline *t, int64_t upto) {
    int64_t index = (upto - t->start) / t->width;
    while (index >= 2 * TIMELINE_LIMIT) {
        size_t merged = 0;
        for (size_t i = 0; i < t->length; i += 2) {
            double a = t->area[i] + (i + 1 < t->length ? t->area[i + 1] : 0);
            int64_t p = t->peak[i];
            int64_t q = i + 1 < t->length ? t->peak[i + 1] : 0;
            t->area[merged] = a;
            t->peak[merged] = p > q ? p : q;
            merged++;
        }
        t->length = merged;
        t->width *= 2;
        index = (upto - t->start) / t->width;
    }
    while (t->length <= (size_t)index) {
        if (t->length == t->capacity) {
            size_t c = t->capacity ? t->capacity * 2 : 64;
            t->area = xrealloc(t->area, c * sizeof(double));
            t->peak = xrealloc(t->peak, c * sizeof(int64_t));
            t->capacity = c;
        }
        t->area[t->length] = 0.0;
        t->peak[t->length] = 0;
        t->length++;
    }
    return (size_t)index;
}

static void timeline_advance(timeline *t, int64_t ts) {
    if (!t->started) {
        t->started = 1;
        t->start = t->last = ts;
        t->width = 1000;
    }
    if (ts < t->last) ts = t->last;
    size_t last_index = timeline_grow(t, ts);
    size_t first = (size_t)((t->last - t->start) / t->width);
    for (size_t index = first; index <= last_index; index++) {
        int64_t lo = t->start + (int64_t)index * t->width, hi = t->start + (int64_t)(index + 1) * t->width;
        if (t->last > lo) lo = t->last;
        if (ts < hi) hi = ts;
        if (hi > lo) {
            t->area[index] += (double)(t->level * (hi - lo));
            if (t->level > t->peak[index]) t->peak[index] = t->level;
        }
    }
    t->last = ts;
}

static void timeline_change(timeline *t, int64_t ts, int delta) {
    timeline_advance(t, ts);
    t->level += delta;
    size_t index = timeline_grow(t, ts);
    if (t->level > t->peak[index]) t->peak[index] = t->level;
}

/* ------------------------------------------------------------------------------------------------------- analysis */

enum { EV_OTHER, EV_ENQUEUE, EV_BEGIN, EV_END, EV_BUDGET, EV_INTERVAL_BEGIN, EV_INTERVAL_END, EV_TRANSITION_BEGIN,
       EV_TRANSITION_END, EV_INLINE };
enum { F_ID, F_PARENT_ID, F_KIND, F_NAME, F_QUEUE, F_PARALLELISM, F_OUTCOME, F_INTERVAL_ID, F_TRANSITION_ID,
       F_BUDGET_NS, F_ACTUAL_NS, F_VPID, F_VTID, F_DURATION_NS, F_PROCNAME, F_COUNT };
static const char *field_names[F_COUNT] = {"id", "parent_id", "kind", "name", "queue", "parallelism", "outcome",
                                           "interval_id", "transition_id", "budget_ns", "actual_ns", "vpid", "vtid",
                                           "duration_ns", "procname"};

#define CHAIN 16
typedef struct { uint64_t id; uint32_t name; } ancestor;
typedef struct {
    uint64_t id, vpid_key;
    int64_t vpid;
    int has_vpid;
    uint32_t name, kind, queue, outcome;
    unsigned have;  /* 1 enqueue, 2 begin, 4 end */
    int64_t enqueue, begin, end;
    int64_t vtid, parallelism;
    int has_vtid, has_parallelism, has_chain;
    int chain_length;
    ancestor chain[CHAIN];
} dispatch;

typedef struct { uint32_t label; uint64_t count; } tally;
typedef struct { tally *items; size_t length, capacity; } tallies;

static void tally_add(tallies *t, uint32_t label) {
    for (size_t i = 0; i < t->length; i++)
        if (t->items[i].label == label) { t->items[i].count++; return; }
    grow((void **)&t->items, &t->capacity, t->length + 1, sizeof(tally));
    t->items[t->length++] = (tally){label, 1};
}

typedef struct {
    int used;
    uint32_t kind;
    uint64_t count;
    tallies outcomes;
    histogram wait, service;
} type_stats;

typedef struct {
    int used;
    uint64_t count;
    tallies outcomes, parents;  /* parents: name ids, 0 = top level */
    histogram duration;
} named_stats;

typedef struct { uint64_t id, vpid_key; int64_t vpid; int has_vpid; uint32_t name, parent; int64_t begin; int has_parent_id; } open_interval;
typedef struct { uint32_t name, outcome; unsigned have; int64_t begin, end; } open_transition;

typedef struct { int64_t service; uint64_t order; dispatch d; } ranked;

typedef struct {
    uint64_t at_ns_index;
    int64_t ts;
    uint64_t id, budget, actual;
    int64_t vpid, vtid;
    int has_vpid, has_vtid;
    uint32_t name, kind;
    int chain_length;
    ancestor chain[CHAIN];
    int has_wait;
    int64_t wait;
} budget_item;

static struct {
    int top;
    int has_begin, has_end;
    double begin_s, end_s;
    int64_t min_duration;
    int progress_fd;
    katana_ctf_progress_handler progress;
    void *progress_context;
    double *windows;  /* keep dispatches that began within one of these [from, to] pairs (seconds); none: all */
    int window_count;
    char **types;    /* keep dispatches of these types only (and no intervals or transitions); none: all */
    int type_count;
    unsigned char *type_kept;  /* by name id: 0 not asked yet, 1 kept, 2 not */
    size_t type_kept_capacity;
} options = {.progress_fd = -1};

/* Whether dispatches of the type named by string id `name` are kept (`--type`). */
static int type_kept(uint32_t name) {
    if (!options.type_count) return 1;
    grow((void **)&options.type_kept, &options.type_kept_capacity, (size_t)name + 1, 1);
    if (!options.type_kept[name]) {
        options.type_kept[name] = 2;
        for (int i = 0; i < options.type_count; i++)
            if (name && strcmp(strings[name].s, options.types[i]) == 0) options.type_kept[name] = 1;
    }
    return options.type_kept[name] == 1;
}

static struct {
    uint64_t events, seen, whole, kept;
    int have_origin;
    int64_t origin, stop, max_parallelism;
    /* open dispatches */
    table open;
    dispatch *pool;
    size_t pool_capacity;
    uint32_t *free_list;
    size_t free_count, free_capacity, pool_used;
    /* per type (by name id) */
    type_stats *types;
    size_t types_capacity;
    uint32_t *type_order;  /* name ids in first-seen order */
    size_t type_order_length, type_order_capacity;
    /* nesting */
    uint64_t *roots;
    size_t roots_capacity;
    uint32_t *root_order;
    size_t root_order_length, root_order_capacity;
    table edges;
    uint64_t *edge_counts;
    size_t edge_count, edge_capacity;
    uint64_t *edge_keys;
    size_t edge_keys_capacity;
    timeline line;
    /* top */
    ranked *longest;
    size_t longest_length, longest_capacity;
    uint64_t order;
    /* intervals, transitions, budgets */
    table open_intervals;
    open_interval *intervals;
    size_t intervals_capacity, intervals_used;
    uint32_t *interval_free;
    size_t interval_free_count, interval_free_capacity;
    named_stats *interval_stats;
    size_t interval_stats_capacity;
    uint32_t *interval_order;
    size_t interval_order_length, interval_order_capacity;
    table open_transitions;
    open_transition *transitions;
    size_t transitions_capacity, transitions_used;
    uint32_t *transition_free;
    size_t transition_free_count, transition_free_capacity;
    named_stats *transition_stats;
    size_t transition_stats_capacity;
    uint32_t *transition_order;
    size_t transition_order_length, transition_order_capacity;
    budget_item *budgets;
    size_t budget_length, budget_capacity;
    uint64_t budget_count;
} A;

static uint32_t side_effect_label;

static void classify(event_class *ec, const stream_class *sc) {
    const char *n = ec->name;
    ec->katana = strncmp(n, "katana:", 7) == 0;
    ec->role = EV_OTHER;
    if (!ec->katana) return;
    const char *e = n + 7;
    ec->label = intern(e, strlen(e));
    if (strcmp(e, "dispatch_enqueue") == 0) ec->role = EV_ENQUEUE;
    else if (strcmp(e, "dispatch_begin") == 0) ec->role = EV_BEGIN;
    else if (strcmp(e, "dispatch_end") == 0) ec->role = EV_END;
    else if (strcmp(e, "budget_exceeded") == 0) ec->role = EV_BUDGET;
    else if (strcmp(e, "interval_begin") == 0) ec->role = EV_INTERVAL_BEGIN;
    else if (strcmp(e, "interval_end") == 0) ec->role = EV_INTERVAL_END;
    else if (strcmp(e, "transition_begin") == 0) ec->role = EV_TRANSITION_BEGIN;
    else if (strcmp(e, "transition_end") == 0) ec->role = EV_TRANSITION_END;
    else if (strcmp(e, "updater_inline") == 0) ec->role = EV_INLINE;
    for (int f = 0; f < F_COUNT; f++) {
        int at = find_field(ec->fields, field_names[f]);
        if (at >= 0) ec->slot[f] = at;
        else if ((at = find_field(sc->event_context, field_names[f])) >= 0) ec->slot[f] = 1000 + at;
        else ec->slot[f] = -1;
    }
    /* An event class may have no payload (`fields` absent): nothing beyond the known fields to list. */
    for (int i = 0; ec->fields && i < ec->fields->nfields && ec->extra_count < 16; i++) {
        int known = 0;
        for (int f = 0; f < F_COUNT; f++) known |= ec->slot[f] == i;
        int kind = ec->fields->fields[i].t->kind;
        if (!known && (kind == K_INT || kind == K_STRING)) ec->extra[ec->extra_count++] = i;
    }
    static const int needs[][8] = {
        [EV_ENQUEUE] = {F_ID, F_PARENT_ID, F_KIND, F_NAME, F_QUEUE, -1},
        [EV_BEGIN] = {F_ID, F_PARENT_ID, F_KIND, F_NAME, F_QUEUE, F_PARALLELISM, -1},
        [EV_END] = {F_ID, F_KIND, F_NAME, F_OUTCOME, -1},
        [EV_BUDGET] = {F_ID, F_KIND, F_NAME, F_BUDGET_NS, F_ACTUAL_NS, -1},
        [EV_INTERVAL_BEGIN] = {F_INTERVAL_ID, F_PARENT_ID, F_NAME, -1},
        [EV_INTERVAL_END] = {F_INTERVAL_ID, F_NAME, F_OUTCOME, -1},
        [EV_TRANSITION_BEGIN] = {F_TRANSITION_ID, F_NAME, -1},
        [EV_TRANSITION_END] = {F_TRANSITION_ID, F_NAME, F_OUTCOME, -1},
        [EV_INLINE] = {F_ID, F_PARENT_ID, F_NAME, F_PARALLELISM, F_DURATION_NS, F_OUTCOME, -1},
    };
    if (ec->role != EV_OTHER)
        for (int i = 0; !ec->missing && needs[ec->role][i] >= 0; i++)
            if (ec->slot[needs[ec->role][i]] < 0) ec->missing = field_names[needs[ec->role][i]];
}

static const value *get(const stream *s, int f) {
    int at = s->ec->slot[f];
    if (at < 0) return NULL;
    return at >= 1000 ? &s->context[at - 1000] : &s->payload[at];
}

static const type *field_type(const stream *s, int f) {
    int at = s->ec->slot[f];
    return at >= 1000 ? s->sc->event_context->fields[at - 1000].t : s->ec->fields->fields[at].t;
}

/* The getters of a role's fields give 0 (no value) for a field the class lacks: its events carry `missing`. */
static uint64_t get_uint(const stream *s, int f) {
    const value *v = get(s, f);
    if (!v) return 0;
    if (v->kind != K_INT) fail("event %s: field '%s' is not an integer", s->ec->name, field_names[f]);
    return v->u;
}

static uint32_t get_string(const stream *s, int f) {
    const value *v = get(s, f);
    if (!v) return 0;
    if (v->kind != K_STRING) fail("event %s: field '%s' is not a string", s->ec->name, field_names[f]);
    return intern(v->s, v->n);
}

/* An enum field's label, or the number as text (a plain integer, or a value its enumeration does not label). */
static uint32_t get_label(const stream *s, int f) {
    const value *v = get(s, f);
    if (!v) return 0;
    const type *t = field_type(s, f);
    if (v->kind != K_INT) fail("event %s: field '%s' is not an enum", s->ec->name, field_names[f]);
    if (t->nmaps) {
        mapping *m = enum_label(t, v->u);
        if (m) {
            if (!m->interned) m->interned = intern(m->label, strlen(m->label));
            return m->interned;
        }
        /* A value without a label is valid CTF (babeltrace2 prints it as a number): data, as below. */
    }
    char text[32];
    int n = t->is_signed ? snprintf(text, sizeof text, "%" PRId64, (int64_t)v->u) : snprintf(text, sizeof text, "%" PRIu64, v->u);
    return intern(text, (size_t)n);
}

static int get_context_int(const stream *s, int f, int64_t *out) {
    const value *v = get(s, f);
    if (!v || v->kind != K_INT) return 0;
    *out = (int64_t)v->u;
    return 1;
}

#define NO_VPID (UINT64_C(1) << 63)

static dispatch *dispatch_new(uint64_t id, uint64_t vpid_key) {
    uint32_t index;
    if (A.free_count) index = A.free_list[--A.free_count];
    else {
        grow((void **)&A.pool, &A.pool_capacity, A.pool_used + 1, sizeof(dispatch));
        index = (uint32_t)A.pool_used++;
    }
    table_put(&A.open, vpid_key, id, index);
    dispatch *d = &A.pool[index];
    memset(d, 0, sizeof *d);
    A.seen++;
    return d;
}

static void dispatch_free(slot *s) {
    grow((void **)&A.free_list, &A.free_capacity, A.free_count + 1, sizeof(uint32_t));
    A.free_list[A.free_count++] = s->value;
    table_remove(&A.open, s);
}

static int keep(int64_t begin, int64_t end) {
    /* As Python compares an int with a float: the limit is a double, the comparison exact (long double holds
     * both an int64 and a double exactly). */
    if (options.has_begin) {
        double limit = (double)A.origin + options.begin_s * 1e9;
        if ((long double)begin < (long double)limit) return 0;
    }
    if (options.has_end) {
        double limit = (double)A.origin + options.end_s * 1e9;
        if ((long double)begin > (long double)limit) return 0;
    }
    if (options.window_count) {
        int within = 0;
        for (int i = 0; !within && i < options.window_count; i++)
            within = (long double)begin >= (long double)A.origin + (long double)options.windows[2 * i] * 1e9L &&
                     (long double)begin <= (long double)A.origin + (long double)options.windows[2 * i + 1] * 1e9L;
        if (!within) return 0;
    }
    return end - begin >= options.min_duration;
}

static int ranked_less(const ranked *a, const ranked *b) {
    /* Python compares (service, -order): less when the service is shorter, or equal and the order later. */
    if (a->service != b->service) return a->service < b->service;
    return a->order > b->order;
}

static void heap_down(ranked *h, size_t n, size_t i) {
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < n && ranked_less(&h[l], &h[m])) m = l;
        if (r < n && ranked_less(&h[r], &h[m])) m = r;
        if (m == i) return;
        ranked t = h[i];
        h[i] = h[m];
        h[m] = t;
        i = m;
    }
}

static void heap_up(ranked *h, size_t i) {
    while (i) {
        size_t parent = (i - 1) / 2;
        if (!ranked_less(&h[i], &h[parent])) return;
        ranked t = h[i];
        h[i] = h[parent];
        h[parent] = t;
        i = parent;
    }
}

static void on_whole(const dispatch *d) {
    A.whole++;
    if (d->kind == side_effect_label) timeline_change(&A.line, d->end, -1);
    if (!keep(d->begin, d->end) || !type_kept(d->name)) return;
    A.kept++;
    int64_t parallelism = d->has_parallelism ? d->parallelism : 0;
    if (parallelism > A.max_parallelism) A.max_parallelism = parallelism;
    int64_t wait = d->begin - d->enqueue, service = d->end - d->begin;
    grow((void **)&A.types, &A.types_capacity, d->name + 1, sizeof(type_stats));
    type_stats *t = &A.types[d->name];
    if (!t->used) {
        t->used = 1;
        t->kind = d->kind;
        grow((void **)&A.type_order, &A.type_order_capacity, A.type_order_length + 1, sizeof(uint32_t));
        A.type_order[A.type_order_length++] = d->name;
    }
    t->count++;
    tally_add(&t->outcomes, d->outcome);
    hist_add(&t->wait, wait);
    hist_add(&t->service, service);
    if (!d->has_chain || d->chain_length == 0 || d->chain[0].name == 0) {
        grow((void **)&A.roots, &A.roots_capacity, d->name + 1, sizeof(uint64_t));
        if (A.roots[d->name]++ == 0) {
            grow((void **)&A.root_order, &A.root_order_capacity, A.root_order_length + 1, sizeof(uint32_t));
            A.root_order[A.root_order_length++] = d->name;
        }
    } else {
        slot *e = table_find(&A.edges, d->chain[0].name, d->name);
        if (e) A.edge_counts[e->value]++;
        else {
            grow((void **)&A.edge_counts, &A.edge_capacity, A.edge_count + 1, sizeof(uint64_t));
            grow((void **)&A.edge_keys, &A.edge_keys_capacity, 2 * A.edge_count + 2, sizeof(uint64_t));
            A.edge_counts[A.edge_count] = 1;
            A.edge_keys[2 * A.edge_count] = d->chain[0].name;
            A.edge_keys[2 * A.edge_count + 1] = d->name;
            table_put(&A.edges, d->chain[0].name, d->name, (uint32_t)A.edge_count);
            A.edge_count++;
        }
    }
    if (options.top) {
        ranked item = {service, ++A.order, *d};
        if (A.longest_length < (size_t)options.top) {
            grow((void **)&A.longest, &A.longest_capacity, A.longest_length + 1, sizeof(ranked));
            A.longest[A.longest_length] = item;
            heap_up(A.longest, A.longest_length++);
        } else if (ranked_less(&A.longest[0], &item)) {
            A.longest[0] = item;
            heap_down(A.longest, A.longest_length, 0);
        }
    }
}

static void vpid_of(const katana_ctf_event *e, int64_t *vpid, int *has, uint64_t *key) {
    *has = e->has_vpid;
    *vpid = e->vpid;
    *key = *has ? (uint64_t)(uint32_t)*vpid : NO_VPID;
}

/* One stage of a dispatch (what Python's Dispatches.add does with one event): `role` EV_ENQUEUE, EV_BEGIN or EV_END. */
typedef struct {
    uint64_t id, key, parent;
    int64_t vpid, vtid, parallelism, ts;
    int has_vpid, has_vtid;
    uint32_t name, kind, queue, outcome;
} stage_event;

/* `found`: the open dispatch with this (key, id), as the caller looked it up (NULL: none). */
static void on_stage(const stage_event *e, int role, slot *found) {
    unsigned stage = role == EV_ENQUEUE ? 1 : role == EV_BEGIN ? 2 : 4;
    dispatch *d;
    if (found && !(A.pool[found->value].have & stage)) {
        d = &A.pool[found->value];
    } else {
        /* New, or a second event of the same stage (an id reused, or damaged data): start again. */
        if (found) dispatch_free(found);
        d = dispatch_new(e->id, e->key);
        d->id = e->id;
        d->vpid_key = e->key;
        d->vpid = e->vpid;
        d->has_vpid = e->has_vpid;
        d->name = e->name;
        d->kind = e->kind;
    }
    d->have |= stage;
    if (role == EV_ENQUEUE) {
        d->enqueue = e->ts;
        if (e->parent) {
            d->has_chain = 1;
            slot *up = table_find(&A.open, e->key, e->parent);
            d->chain[0] = (ancestor){e->parent, 0};
            d->chain_length = 1;
            if (up) {
                const dispatch *u = &A.pool[up->value];
                d->chain[0].name = u->name;
                int n = u->has_chain ? u->chain_length : 0;
                if (n > CHAIN - 1) n = CHAIN - 1;
                memcpy(&d->chain[1], u->chain, (size_t)n * sizeof(ancestor));
                d->chain_length = 1 + n;
            }
        }
    } else if (role == EV_BEGIN) {
        d->begin = e->ts;
        d->queue = e->queue;
        d->has_vtid = e->has_vtid;
        d->vtid = e->vtid;
        d->parallelism = e->parallelism;
        d->has_parallelism = 1;
    } else {
        d->end = e->ts;
        d->outcome = e->outcome;
    }
    if (d->have == 7) {
        dispatch whole = *d;
        dispatch_free(table_find(&A.open, e->key, e->id));
        on_whole(&whole);
    }
}

static void on_dispatch_event(const katana_ctf_event *k, int role) {
    stage_event e = {.id = k->id, .ts = k->timestamp_ns, .name = k->name_id, .kind = k->kind_id};
    vpid_of(k, &e.vpid, &e.has_vpid, &e.key);
    slot *found = table_find(&A.open, e.key, e.id);
    if (role == EV_ENQUEUE) e.parent = k->parent_id;
    else if (role == EV_BEGIN) {
        e.queue = k->queue_id;
        e.has_vtid = k->has_vtid;
        e.vtid = k->vtid;
        e.parallelism = k->parallelism;
    } else e.outcome = k->outcome_id;
    on_stage(&e, role, found);
}

static uint32_t inline_queue_label, state_updater_label;

/* katana:updater_inline — an updater applied inline, one event at its end: the enqueue and begin it stands for are
 * at (its time − duration_ns). */
static void on_inline(const katana_ctf_event *k) {
    uint64_t duration = k->duration_ns;
    int64_t end = k->timestamp_ns;
    int64_t begin = duration > (uint64_t)end ? 0 : end - (int64_t)duration;
    if (!A.have_origin) { A.have_origin = 1; A.origin = begin; }
    stage_event e = {.id = k->id, .name = k->name_id, .kind = state_updater_label,
                     .queue = inline_queue_label, .parent = k->parent_id};
    vpid_of(k, &e.vpid, &e.has_vpid, &e.key);
    e.has_vtid = k->has_vtid;
    e.vtid = k->vtid;
    e.parallelism = k->parallelism;
    e.outcome = k->outcome_id;
    e.ts = begin;
    on_stage(&e, EV_ENQUEUE, table_find(&A.open, e.key, e.id));
    on_stage(&e, EV_BEGIN, table_find(&A.open, e.key, e.id));
    e.ts = end;
    on_stage(&e, EV_END, table_find(&A.open, e.key, e.id));
}

static void on_budget(const katana_ctf_event *k) {
    if (!type_kept(k->name_id)) return;
    A.budget_count++;
    if (A.budget_length >= 1000) return;
    grow((void **)&A.budgets, &A.budget_capacity, A.budget_length + 1, sizeof(budget_item));
    budget_item *b = &A.budgets[A.budget_length++];
    memset(b, 0, sizeof *b);
    uint64_t key;
    b->ts = k->timestamp_ns;
    b->id = k->id;
    vpid_of(k, &b->vpid, &b->has_vpid, &key);
    b->has_vtid = k->has_vtid;
    b->vtid = k->vtid;
    b->name = k->name_id;
    b->kind = k->kind_id;
    b->budget = k->budget_ns;
    b->actual = k->actual_ns;
    slot *found = table_find(&A.open, key, b->id);
    if (found) {
        const dispatch *d = &A.pool[found->value];
        if (d->has_chain) {
            b->chain_length = d->chain_length;
            memcpy(b->chain, d->chain, sizeof b->chain);
        }
        if ((d->have & 3) == 3) { b->has_wait = 1; b->wait = d->begin - d->enqueue; }
    }
}

static named_stats *named(named_stats **array, size_t *capacity, uint32_t **order, size_t *order_length,
                          size_t *order_capacity, uint32_t name) {
    grow((void **)array, capacity, name + 1, sizeof(named_stats));
    named_stats *n = &(*array)[name];
    if (!n->used) {
        n->used = 1;
        grow((void **)order, order_capacity, *order_length + 1, sizeof(uint32_t));
        (*order)[(*order_length)++] = name;
    }
    return n;
}

static void on_interval_event(const katana_ctf_event *k, int role) {
    uint64_t id = k->id, key;
    int64_t vpid = 0;
    int has_vpid;
    vpid_of(k, &vpid, &has_vpid, &key);
    slot *found = table_find(&A.open_intervals, key, id);
    if (role == EV_INTERVAL_BEGIN) {
        uint32_t index;
        if (found) index = found->value;
        else if (A.interval_free_count) index = A.interval_free[--A.interval_free_count];
        else {
            grow((void **)&A.intervals, &A.intervals_capacity, A.intervals_used + 1, sizeof(open_interval));
            index = (uint32_t)A.intervals_used++;
        }
        open_interval *i = &A.intervals[index];
        memset(i, 0, sizeof *i);
        i->name = k->name_id;
        i->begin = k->timestamp_ns;
        uint64_t parent = k->parent_id;
        if (parent) {
            slot *up = table_find(&A.open, key, parent);
            i->parent = up ? A.pool[up->value].name : 0;
        }
        if (!found) table_put(&A.open_intervals, key, id, index);
        return;
    }
    if (!found) return;
    open_interval entry = A.intervals[found->value];
    grow((void **)&A.interval_free, &A.interval_free_capacity, A.interval_free_count + 1, sizeof(uint32_t));
    A.interval_free[A.interval_free_count++] = found->value;
    table_remove(&A.open_intervals, found);
    uint32_t outcome = k->outcome_id;
    if (!keep(entry.begin, k->timestamp_ns) || options.type_count) return;
    named_stats *n = named(&A.interval_stats, &A.interval_stats_capacity, &A.interval_order, &A.interval_order_length,
                           &A.interval_order_capacity, entry.name);
    n->count++;
    tally_add(&n->outcomes, outcome);
    hist_add(&n->duration, k->timestamp_ns - entry.begin);
    /* Python: `i.get("parent") or "(top level)"` — an empty name is top level too. */
    uint32_t parent = entry.parent && strings[entry.parent].n ? entry.parent : 0;
    tally_add(&n->parents, parent);
}

static void on_transition_event(const katana_ctf_event *k, int role) {
    uint64_t id = k->id, key;
    int64_t vpid = 0;
    int has_vpid;
    vpid_of(k, &vpid, &has_vpid, &key);
    slot *found = table_find(&A.open_transitions, key, id);
    uint32_t index;
    if (found) index = found->value;
    else {
        if (A.transition_free_count) index = A.transition_free[--A.transition_free_count];
        else {
            grow((void **)&A.transitions, &A.transitions_capacity, A.transitions_used + 1, sizeof(open_transition));
            index = (uint32_t)A.transitions_used++;
        }
        memset(&A.transitions[index], 0, sizeof(open_transition));
        A.transitions[index].name = k->name_id;
        table_put(&A.open_transitions, key, id, index);
        found = table_find(&A.open_transitions, key, id);
    }
    open_transition *t = &A.transitions[index];
    if (role == EV_TRANSITION_BEGIN) { t->begin = k->timestamp_ns; t->have |= 1; }
    else { t->end = k->timestamp_ns; t->outcome = k->outcome_id; t->have |= 2; }
    if (t->have == 3) {
        if (!options.type_count) {  /* --type keeps no transitions */
            named_stats *n = named(&A.transition_stats, &A.transition_stats_capacity, &A.transition_order,
                                   &A.transition_order_length, &A.transition_order_capacity, t->name);
            n->count++;
            tally_add(&n->outcomes, t->outcome);
            hist_add(&n->duration, t->end - t->begin);
        }
        grow((void **)&A.transition_free, &A.transition_free_capacity, A.transition_free_count + 1, sizeof(uint32_t));
        A.transition_free[A.transition_free_count++] = index;
        table_remove(&A.open_transitions, found);
    }
}

/* One katana event, decoded from the trace or handed in (katana_ctf_analyze_events). */
static void on_event(const katana_ctf_event *k) {
    if (k->missing) fail("event katana:%s has no field '%s'", k->event, k->missing);
    int role = k->role;
    A.events++;
    if (options.progress_fd >= 0 && A.events % 20000 == 0) {
        ssize_t ignored = write(options.progress_fd, ".", 1);
        (void)ignored;
    }
    if (options.progress && A.events % KATANA_CTF_PROGRESS_EVERY == 0) options.progress(A.events, options.progress_context);
    if (!A.have_origin && role != EV_INLINE) { A.have_origin = 1; A.origin = k->timestamp_ns; }
    A.stop = k->timestamp_ns;
    switch (role) {
    case EV_BUDGET: on_budget(k); break;
    case EV_ENQUEUE: case EV_END: on_dispatch_event(k, role); break;
    case EV_BEGIN:
        if (k->kind_id == side_effect_label) timeline_change(&A.line, k->timestamp_ns, 1);
        on_dispatch_event(k, role);
        break;
    case EV_INTERVAL_BEGIN: case EV_INTERVAL_END: on_interval_event(k, role); break;
    case EV_TRANSITION_BEGIN: case EV_TRANSITION_END: on_transition_event(k, role); break;
    case EV_INLINE: on_inline(k); break;
    default: break;
    }
}

/* ---------------------------------------------------------------------------------------------------------- output */

static void json_string(FILE *out, uint32_t id) {
    if (!id) { fputs("null", out); return; }
    const unsigned char *s = (const unsigned char *)strings[id].s;
    size_t n = strings[id].n;
    fputc('"', out);
    for (size_t i = 0; i < n;) {
        unsigned char c = s[i];
        if (c == '"' || c == '\\') { fputc('\\', out); fputc(c, out); i++; }
        else if (c < 0x20) { fprintf(out, "\\u%04x", c); i++; }
        else if (c < 0x80) { fputc(c, out); i++; }
        else {
            /* Valid UTF-8 passes; anything else becomes U+FFFD, as Python's errors="replace" decoding does. */
            size_t len = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
            int ok = len && i + len <= n && c >= 0xC2 && c <= 0xF4;
            for (size_t k = 1; ok && k < len; k++) ok = (s[i + k] & 0xC0) == 0x80;
            if (ok && len == 3 && ((c == 0xE0 && s[i + 1] < 0xA0) || (c == 0xED && s[i + 1] >= 0xA0))) ok = 0;
            if (ok && len == 4 && ((c == 0xF0 && s[i + 1] < 0x90) || (c == 0xF4 && s[i + 1] >= 0x90))) ok = 0;
            if (ok) { fwrite(s + i, 1, len, out); i += len; }
            else { fputs("\\ufffd", out); i++; }
        }
    }
    fputc('"', out);
}

static void json_tallies(FILE *out, const tallies *t, int top_level_for_zero) {
    fputc('{', out);
    for (size_t i = 0; i < t->length; i++) {
        if (i) fputs(", ", out);
        if (!t->items[i].label && top_level_for_zero) fputs("\"(top level)\"", out);
        else json_string(out, t->items[i].label);
        fprintf(out, ": %" PRIu64, t->items[i].count);
    }
    fputc('}', out);
}

static void json_summary(FILE *out, const histogram *h) {
    fprintf(out, "{\"p50\": %" PRIu64 ", \"p90\": %" PRIu64 ", \"p99\": %" PRIu64 ", \"max\": %" PRIu64
                 ", \"mean\": %.1f, \"stddev\": %.1f}",
            hist_percentile(h, 50), hist_percentile(h, 90), hist_percentile(h, 99), h->max, h->mean, hist_stddev(h));
}

static void json_chain(FILE *out, const ancestor *chain, int length) {
    fputc('[', out);
    for (int i = 0; i < length; i++) {
        fprintf(out, "%s{\"id\": %" PRIu64 ", \"name\": ", i ? ", " : "", chain[i].id);
        json_string(out, chain[i].name);
        fputc('}', out);
    }
    fputc(']', out);
}

static void json_optional(FILE *out, int has, int64_t v) {
    if (has) fprintf(out, "%" PRId64, v);
    else fputs("null", out);
}

static int cmp_count_name(uint64_t ca, uint32_t na, uint64_t cb, uint32_t nb) {
    if (ca != cb) return ca > cb ? -1 : 1;
    int c = strcmp(strings[na].s, strings[nb].s);
    return c;
}

static int by_type(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return cmp_count_name(A.types[x].count, x, A.types[y].count, y);
}
static named_stats *sorting_stats;
static int by_named(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return cmp_count_name(sorting_stats[x].count, x, sorting_stats[y].count, y);
}
static int by_edge(const void *a, const void *b) {
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    if (A.edge_counts[x] != A.edge_counts[y]) return A.edge_counts[x] > A.edge_counts[y] ? -1 : 1;
    int c = strcmp(strings[A.edge_keys[2 * x]].s, strings[A.edge_keys[2 * y]].s);
    if (c) return c;
    return strcmp(strings[A.edge_keys[2 * x + 1]].s, strings[A.edge_keys[2 * y + 1]].s);
}
static int by_rank(const void *a, const void *b) {
    const ranked *x = a, *y = b;
    return ranked_less(x, y) ? 1 : ranked_less(y, x) ? -1 : 0;
}

/* qsort, which must not be given a null array even when it is empty. */
static void sort(void *base, size_t count, size_t size, int (*compare)(const void *, const void *)) {
    if (count > 1) qsort(base, count, size, compare);
}

static void write_timeline(FILE *out) {
    timeline *t = &A.line;
    fputc('[', out);
    if (t->started) {
        timeline_advance(t, A.stop);
        const int buckets = 10;
        int64_t span = A.stop - t->start;
        if (span < 1) span = 1;
        double width = (double)span / buckets;
        double area[10] = {0};
        int64_t peak[10] = {0};
        for (size_t index = 0; index < t->length; index++) {
            double a = t->area[index];
            int64_t p = t->peak[index];
            int64_t lo = (int64_t)index * t->width, hi = (int64_t)(index + 1) * t->width;
            int first = (int)((double)lo / width), last = (int)((double)hi / width);
            if (first > buckets - 1) first = buckets - 1;
            if (last > buckets - 1) last = buckets - 1;
            for (int target = first; target <= last; target++) {
                double top = (double)hi < (target + 1) * width ? (double)hi : (target + 1) * width;
                double bottom = (double)lo > target * width ? (double)lo : target * width;
                double overlap = top - bottom;
                if (overlap > 0 || first == last) {
                    area[target] += a * (first != last ? overlap / (double)t->width : 1);
                    if (p && overlap > 0 && p > peak[target]) peak[target] = p;
                }
            }
        }
        for (int i = 0; i < buckets; i++)
            fprintf(out, "%s{\"from_ms\": %.3f, \"to_ms\": %.3f, \"mean_in_flight\": %.3f, \"max_in_flight\": %" PRId64 "}",
                    i ? ", " : "", i * width / 1e6, (i + 1) * width / 1e6, area[i] / width, peak[i]);
    }
    fputc(']', out);
}

/* Which reader decoded the events: this one, or babeltrace2 (events handed in by katana_ctf_analyze_events). */
static const char *reader_name = "native";

static void write_report(FILE *out) {
    fprintf(out, "{\"reader\": \"%s\", \"dispatches\": %" PRIu64 ", \"complete\": %" PRIu64
                 ", \"discarded_events\": %" PRIu64 ", \"events\": %" PRIu64 ", \"window\": {\"begin_s\": ",
            reader_name, A.seen, A.whole, discarded_events, A.events);
    if (options.has_begin) fprintf(out, "%.17g", options.begin_s); else fputs("null", out);
    fputs(", \"end_s\": ", out);
    if (options.has_end) fprintf(out, "%.17g", options.end_s); else fputs("null", out);
    if (options.window_count) fprintf(out, ", \"windows\": %d", options.window_count);
    if (options.type_count) {
        fprintf(out, ", \"types\": [");
        for (int i = 0; i < options.type_count; i++) {
            fprintf(out, i ? ", " : "");
            json_string(out, intern(options.types[i], strlen(options.types[i])));
        }
        fprintf(out, "]");
    }
    fprintf(out, ", \"min_duration_ns\": %" PRId64 ", \"dispatches\": %" PRIu64 "}, \"types\": [",
            options.min_duration, A.kept);
    sort(A.type_order, A.type_order_length, sizeof(uint32_t), by_type);
    for (size_t i = 0; i < A.type_order_length; i++) {
        uint32_t name = A.type_order[i];
        type_stats *t = &A.types[name];
        fputs(i ? ", {\"name\": " : "{\"name\": ", out);
        json_string(out, name);
        fputs(", \"kind\": ", out);
        json_string(out, t->kind);
        fprintf(out, ", \"count\": %" PRIu64 ", \"outcomes\": ", t->count);
        json_tallies(out, &t->outcomes, 0);
        fputs(", \"queue_wait_ns\": ", out);
        json_summary(out, &t->wait);
        fputs(", \"service_ns\": ", out);
        json_summary(out, &t->service);
        fputs(", \"service_distribution\": [", out);
        /* Counts per power-of-two range, [2^(e-1), 2^e), empty ranges inside the span included. */
        uint64_t per[66] = {0};
        int low = 99, high = -1;
        for (size_t k = 0; k < t->service.capacity; k++) {
            if (!t->service.buckets[k]) continue;
            uint64_t key = bucket_key(k);
            int e = key ? 64 - __builtin_clzll(key) : 0;
            per[e] += t->service.buckets[k];
            if (e < low) low = e;
            if (e > high) high = e;
        }
        for (int e = low; e <= high; e++) {
            uint64_t from = e ? UINT64_C(1) << (e - 1) : 0;
            fprintf(out, "%s{\"from_ns\": %" PRIu64 ", \"to_ns\": ", e == low ? "" : ", ", from);
            if (e < 64) fprintf(out, "%" PRIu64, UINT64_C(1) << e);
            else fputs("18446744073709551616", out);
            fprintf(out, ", \"count\": %" PRIu64 "}", per[e]);
        }
        fputs("]}", out);
    }
    fputs("], \"parallelism_timeline\": ", out);
    write_timeline(out);
    fprintf(out, ", \"max_parallelism\": %" PRId64 ", \"nesting\": {\"roots\": {", A.max_parallelism);
    for (size_t i = 0; i < A.root_order_length; i++) {
        if (i) fputs(", ", out);
        json_string(out, A.root_order[i]);
        fprintf(out, ": %" PRIu64, A.roots[A.root_order[i]]);
    }
    fputs("}, \"children\": [", out);
    size_t *edges = xcalloc(A.edge_count, sizeof(size_t));
    for (size_t i = 0; i < A.edge_count; i++) edges[i] = i;
    sort(edges, A.edge_count, sizeof(size_t), by_edge);
    for (size_t i = 0; i < A.edge_count; i++) {
        size_t e = edges[i];
        fputs(i ? ", {\"parent\": " : "{\"parent\": ", out);
        json_string(out, (uint32_t)A.edge_keys[2 * e]);
        fputs(", \"child\": ", out);
        json_string(out, (uint32_t)A.edge_keys[2 * e + 1]);
        fprintf(out, ", \"count\": %" PRIu64 "}", A.edge_counts[e]);
    }
    free(edges);
    fputs("]}", out);
    if (A.budget_count) {
        fprintf(out, ", \"over_budget\": {\"count\": %" PRIu64 ", \"dispatches\": [", A.budget_count);
        for (size_t i = 0; i < A.budget_length; i++) {
            budget_item *b = &A.budgets[i];
            fprintf(out, "%s{\"at_s\": %.9f, \"ts_ns\": %" PRId64 ", \"id\": %" PRIu64 ", \"vpid\": ", i ? ", " : "",
                    (double)(b->ts - A.origin) / 1e9, b->ts, b->id);
            json_optional(out, b->has_vpid, b->vpid);
            fputs(", \"vtid\": ", out);
            json_optional(out, b->has_vtid, b->vtid);
            fputs(", \"name\": ", out);
            json_string(out, b->name);
            fputs(", \"kind\": ", out);
            json_string(out, b->kind);
            fprintf(out, ", \"budget_ns\": %" PRIu64 ", \"actual_ns\": %" PRIu64 ", \"parents\": ", b->budget, b->actual);
            json_chain(out, b->chain, b->chain_length);
            fputs(", \"queue_wait_ns\": ", out);
            json_optional(out, b->has_wait, b->wait);
            fputc('}', out);
        }
        fputs("]}", out);
    }
    if (A.interval_order_length) {
        sorting_stats = A.interval_stats;
        sort(A.interval_order, A.interval_order_length, sizeof(uint32_t), by_named);
        fputs(", \"intervals\": [", out);
        for (size_t i = 0; i < A.interval_order_length; i++) {
            named_stats *n = &A.interval_stats[A.interval_order[i]];
            fputs(i ? ", {\"name\": " : "{\"name\": ", out);
            json_string(out, A.interval_order[i]);
            fprintf(out, ", \"count\": %" PRIu64 ", \"outcomes\": ", n->count);
            json_tallies(out, &n->outcomes, 0);
            fputs(", \"duration_ns\": ", out);
            json_summary(out, &n->duration);
            fputs(", \"parents\": ", out);
            json_tallies(out, &n->parents, 1);
            fputc('}', out);
        }
        fputc(']', out);
    }
    if (A.transition_order_length) {
        sorting_stats = A.transition_stats;
        sort(A.transition_order, A.transition_order_length, sizeof(uint32_t), by_named);
        fputs(", \"transitions\": [", out);
        for (size_t i = 0; i < A.transition_order_length; i++) {
            named_stats *n = &A.transition_stats[A.transition_order[i]];
            fputs(i ? ", {\"name\": " : "{\"name\": ", out);
            json_string(out, A.transition_order[i]);
            fprintf(out, ", \"count\": %" PRIu64 ", \"outcomes\": ", n->count);
            json_tallies(out, &n->outcomes, 0);
            fprintf(out, ", \"duration_ns\": {\"p50\": %" PRIu64 ", \"max\": %" PRIu64 "}}",
                    hist_percentile(&n->duration, 50), n->duration.max);
        }
        fputc(']', out);
    }
    if (options.top) {
        sort(A.longest, A.longest_length, sizeof(ranked), by_rank);
        fputs(", \"top\": [", out);
        for (size_t i = 0; i < A.longest_length; i++) {
            const dispatch *d = &A.longest[i].d;
            fprintf(out, "%s{\"rank\": %zu, \"service_ns\": %" PRId64 ", \"queue_wait_ns\": %" PRId64
                         ", \"begin_s\": %.9f, \"begin_ns\": %" PRId64 ", \"id\": %" PRIu64 ", \"vpid\": ",
                    i ? ", " : "", i + 1, A.longest[i].service, d->begin - d->enqueue,
                    (double)(d->begin - A.origin) / 1e9, d->begin, d->id);
            json_optional(out, d->has_vpid, d->vpid);
            fputs(", \"vtid\": ", out);
            json_optional(out, d->has_vtid, d->vtid);
            fputs(", \"name\": ", out);
            json_string(out, d->name);
            fputs(", \"kind\": ", out);
            json_string(out, d->kind);
            fputs(", \"outcome\": ", out);
            json_string(out, d->outcome);
            fputs(", \"queue\": ", out);
            json_string(out, d->queue);
            fputs(", \"parents\": ", out);
            json_chain(out, d->chain, d->has_chain ? d->chain_length : 0);
            fputc('}', out);
        }
        fputc(']', out);
    }
    fputs("}\n", out);
}

/* ------------------------------------------------------------------------------------------------- finding traces */

static trace **traces;
static size_t trace_count, trace_capacity;
static stream **streams;
static size_t stream_count, stream_capacity;

void katana_ctf_bytes(uint64_t *read, uint64_t *total) {
    uint64_t done = 0, all = 0;
    for (size_t i = 0; i < stream_count; i++) {
        all += streams[i]->size;
        done += streams[i]->next_packet < streams[i]->size ? streams[i]->next_packet : streams[i]->size;
    }
    *read = done;
    *total = all;
}

static void load_trace(const char *dir) {
    char path[4096];
    if (snprintf(path, sizeof path, "%s/metadata", dir) >= (int)sizeof path) fail("path too long");
    size_t length;
    char *text = read_metadata(path, &length);
    trace *tr = xcalloc(1, sizeof *tr);
    tr->dir = xstrndup(dir, strlen(dir));
    tr->freq = 1000000000;
    alias_count = 0;  /* each trace's metadata names its own types */
    parse_metadata(tr, text, length);
    free(text);
    if (tr->stream_count == 0) fail("%s: no stream in the metadata: nothing was recorded (a traced process that started before lttng-sessiond registered it runs unrecorded)", dir);
    __int128 origin = (__int128)tr->offset_s * 1000000000;
    origin += tr->freq == 1000000000 ? (__int128)tr->offset : (__int128)tr->offset * 1000000000 / (__int128)tr->freq;
    if (origin > INT64_MAX || origin < INT64_MIN) fail("%s: clock offset out of range", dir);
    tr->origin_ns = (int64_t)origin;
    for (size_t i = 0; i < tr->stream_count; i++) {
        stream_class *sc = &tr->streams[i];
        if (!sc->defined) fail("%s: events of stream %" PRIu64 ", which is not declared", dir, sc->id);
        if (sc->header) mark_header(sc->header);
        for (size_t k = 0; k < sc->by_id_capacity; k++)
            if (sc->by_id[k]) classify(sc->by_id[k], sc);
    }
    grow((void **)&traces, &trace_capacity, trace_count + 1, sizeof(trace *));
    traces[trace_count++] = tr;

    DIR *d = opendir(dir);
    if (!d) fail("cannot list %s", dir);
    struct dirent *entry;
    while ((entry = readdir(d))) {
        if (entry->d_name[0] == '.' || strcmp(entry->d_name, "metadata") == 0) continue;
        char file[4096];
        if (snprintf(file, sizeof file, "%s/%s", dir, entry->d_name) >= (int)sizeof file) fail("path too long");
        struct stat st;
        if (lstat(file, &st) != 0) fail("cannot stat %s", file);
        if (S_ISDIR(st.st_mode)) continue;
        if (!S_ISREG(st.st_mode)) fail("%s is not a regular file", file);
        if (st.st_size == 0) continue;
        int fd = open(file, O_RDONLY | O_NONBLOCK);
        if (fd < 0) fail("cannot open %s", file);
        if (stream_count >= 65536) fail("too many data streams");
        stream *s = xcalloc(1, sizeof *s);
        s->tr = tr;
        s->path = xstrndup(file, strlen(file));
        s->fd = fd;
        s->size = (uint64_t)st.st_size;
        grow((void **)&streams, &stream_capacity, stream_count + 1, sizeof(stream *));
        streams[stream_count++] = s;
    }
    closedir(d);
}

/* Every directory under root (itself included) that holds a `metadata` file is a trace, as for babeltrace2. */
static void find_traces(const char *dir, int depth) {
    if (depth > 32) fail("directories nested too deeply");
    char path[4096];
    struct stat st;
    if (snprintf(path, sizeof path, "%s/metadata", dir) >= (int)sizeof path) fail("path too long");
    if (lstat(path, &st) == 0) {
        if (!S_ISREG(st.st_mode)) fail("%s is not a regular file", path);
        load_trace(dir);
        return;
    }
    DIR *d = opendir(dir);
    if (!d) fail("cannot list %s", dir);
    char **children = NULL;
    size_t count = 0, capacity = 0;
    struct dirent *entry;
    while ((entry = readdir(d))) {
        if (entry->d_name[0] == '.') continue;
        if (snprintf(path, sizeof path, "%s/%s", dir, entry->d_name) >= (int)sizeof path) fail("path too long");
        if (lstat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
            grow((void **)&children, &capacity, count + 1, sizeof(char *));
            children[count++] = xstrndup(path, strlen(path));
        }
    }
    closedir(d);
    for (size_t i = 0; i < count; i++) {
        find_traces(children[i], depth + 1);
        free(children[i]);
    }
    free(children);
}

/* ------------------------------------------------------------------------------------------------------------ main */

static int earlier(const stream *a, const stream *b) { return a->ts < b->ts || (a->ts == b->ts && a < b); }

static void sift(stream **h, size_t n, size_t i) {
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < n && earlier(h[l], h[m])) m = l;
        if (r < n && earlier(h[r], h[m])) m = r;
        if (m == i) return;
        stream *t = h[i];
        h[i] = h[m];
        h[m] = t;
        i = m;
    }
}

/* The labels the analysis compares with, by id (whichever reader hands it the events). */
static void intern_labels(void) {
    side_effect_label = intern("side_effect", 11);
    state_updater_label = intern("state_updater", 13);
    inline_queue_label = intern("updater_inline", 14);
}

/* Set when the consumer wants no more events: the read ends there. */
static int read_stopped;

/* Finds the traces under `root` and hands every event of them to `each`, merged by timestamp. */
static void read_all(const char *root, void (*each)(const stream *s, void *context), void *context) {
    trace_root = root;
    struct stat st;
    if (stat(trace_root, &st) != 0 || !S_ISDIR(st.st_mode)) fail("not a directory");
    intern_labels();
    find_traces(trace_root, 0);
    if (!trace_count) fail("no metadata file in it");

    /* Merge the streams by timestamp: a heap of each stream's next event. */
    stream **heap = xcalloc(stream_count, sizeof(stream *));
    size_t n = 0;
    for (size_t i = 0; i < stream_count; i++)
        if (next_event(streams[i])) heap[n++] = streams[i];
    for (size_t i = n / 2; i-- > 0;) sift(heap, n, i);
    if (n && (range.has_from || range.has_to)) {
        /* The range is in seconds after the trace's first event: the earliest of the streams' first events (an
           inline updater's from its beginning, as the analysis counts). */
        int64_t origin = heap[0]->ts;
        if (heap[0]->ec->role == EV_INLINE && heap[0]->ec->slot[F_DURATION_NS] >= 0) {
            const value *duration = get(heap[0], F_DURATION_NS);
            if (duration && duration->kind == K_INT && duration->u <= (uint64_t)origin) origin -= (int64_t)duration->u;
        }
        range.origin = origin;
        long double from = (long double)origin + (long double)range.from_s * 1e9L;
        long double to = (long double)origin + (long double)range.to_s * 1e9L;
        range.from_ns = from > (long double)INT64_MAX ? INT64_MAX : from < (long double)INT64_MIN ? INT64_MIN : (int64_t)from;
        range.to_ns = to > (long double)INT64_MAX ? INT64_MAX : to < (long double)INT64_MIN ? INT64_MIN : (int64_t)to;
        range.active = 1;
    }
    while (n && !read_stopped) {
        stream *s = heap[0];
        /* The first event past the range is handed on too: it tells the consumer the range is over. */
        int last = range.active && range.has_to && s->ts > range.to_ns;
        /* Events before the range are not handed on (the streams' first packets, read for the origin, hold some):
           what began there is unknown, as what began in the packets skipped. */
        if (s->ec->katana) range.katana_events++;
        if (!(range.active && range.has_from && s->ts < range.from_ns)) each(s, context);
        if (last) break;
        if (!next_event(s)) heap[0] = heap[--n];
        sift(heap, n, 0);
    }
}

/* Katana events handed on so far, by any entry point. */
static uint64_t delivered;

/* Guards the entry points: one call per process (the reader's state is in statics) — except that after a decline
   before any event, katana_ctf_analyze_events may analyse events read elsewhere (it uses no trace state). */
static int enter_once(const char *root, char *error, size_t error_size, int after_decline) {
    static int used;
    if (used && !(after_decline && failure_declined && !delivered)) {
        snprintf(error, error_size, "%s: one read per process", root);
        return 0;
    }
    used = 1;
    return 1;
}

/* ------------------------------------------------------------------------------------------------- event reading */

/* `intern` for a string field whose value mostly repeats (a type's name, a thread's name): the last id this cache
   gave is checked first, with one comparison instead of a hash. */
typedef struct { uint32_t id; } repeat_cache;

static uint32_t intern_repeating(repeat_cache *cache, const char *s, size_t n) {
    if (cache->id && strings[cache->id].n == n && memcmp(strings[cache->id].s, s, n) == 0) return cache->id;
    cache->id = intern(s, n);
    return cache->id;
}

static uint32_t get_string_repeating(const stream *s, int f, repeat_cache *cache) {
    const value *v = get(s, f);
    if (!v) return 0;
    if (v->kind != K_STRING) fail("event %s: field '%s' is not a string", s->ec->name, field_names[f]);
    return intern_repeating(cache, v->s, v->n);
}

typedef struct {
    katana_ctf_event_handler handler;
    void *context;
    uint64_t events;
    int stopped;
    repeat_cache names[EV_INLINE + 1], procname;
} event_reading;

static const char *label_text(uint32_t id) { return id ? strings[id].s : NULL; }

static void deliver_event(const stream *s, void *context) {
    event_reading *reading = context;
    const event_class *ec = s->ec;
    if (reading->stopped || !ec->katana) return;
    reading->events++;
    delivered++;
    katana_ctf_event e = {.role = ec->role, .event = ec->name + 7, .event_id = ec->label, .timestamp_ns = s->ts,
                          .missing = ec->missing};
    switch (ec->role) {
    case EV_ENQUEUE: case EV_BEGIN: case EV_END: case EV_BUDGET: case EV_INLINE:
        e.id = get_uint(s, F_ID);
        e.name_id = get_string_repeating(s, F_NAME, &reading->names[ec->role]);
        if (ec->role != EV_INLINE) e.kind_id = get_label(s, F_KIND);
        else e.kind_id = state_updater_label;  /* interned by read_all before any event */
        break;
    case EV_INTERVAL_BEGIN: case EV_INTERVAL_END:
        e.id = get_uint(s, F_INTERVAL_ID);
        e.name_id = get_string(s, F_NAME);
        break;
    case EV_TRANSITION_BEGIN: case EV_TRANSITION_END:
        e.id = get_uint(s, F_TRANSITION_ID);
        e.name_id = get_string(s, F_NAME);
        break;
    default: {
        /* An event of the provider the analysis does not know (a renamed one, a newer one): its name, kind and
           outcome as they are, as babeltrace2's reader gives them (`dump` shows them). */
        const value *v = get(s, F_NAME);
        if (v && v->kind == K_STRING) e.name_id = intern(v->s, v->n);
        if ((v = get(s, F_KIND)) && v->kind == K_INT) e.kind_id = get_label(s, F_KIND);
        break;
    }
    }
    if (ec->role == EV_OTHER && (get(s, F_OUTCOME) ? get(s, F_OUTCOME)->kind == K_INT : 0))
        e.outcome_id = get_label(s, F_OUTCOME);
    if ((ec->role == EV_ENQUEUE || ec->role == EV_BEGIN || ec->role == EV_INLINE || ec->role == EV_INTERVAL_BEGIN)
        && ec->slot[F_PARENT_ID] >= 0) {
        e.parent_id = get_uint(s, F_PARENT_ID);
        e.has_parent_id = 1;
    }
    if (ec->role == EV_ENQUEUE || ec->role == EV_BEGIN || (ec->role == EV_END && ec->slot[F_QUEUE] >= 0))
        e.queue_id = get_label(s, F_QUEUE);
    if ((ec->role == EV_BEGIN || ec->role == EV_INLINE) && ec->slot[F_PARALLELISM] >= 0) {
        e.parallelism = (int64_t)get_uint(s, F_PARALLELISM);
        e.has_parallelism = 1;
    }
    if (ec->role == EV_END || ec->role == EV_INLINE || ec->role == EV_INTERVAL_END || ec->role == EV_TRANSITION_END)
        e.outcome_id = get_label(s, F_OUTCOME);
    if (ec->role == EV_INLINE) e.duration_ns = get_uint(s, F_DURATION_NS);
    if (ec->role == EV_BUDGET) {
        e.budget_ns = get_uint(s, F_BUDGET_NS);
        e.actual_ns = get_uint(s, F_ACTUAL_NS);
    }
    e.has_vpid = get_context_int(s, F_VPID, &e.vpid);
    e.has_vtid = get_context_int(s, F_VTID, &e.vtid);
    const value *procname = get(s, F_PROCNAME);
    if (procname && procname->kind == K_STRING) e.procname_id = intern_repeating(&reading->procname, procname->s, procname->n);
    static katana_ctf_field extra[16];
    for (int i = 0; i < ec->extra_count; i++) {
        const field *f = &ec->fields->fields[ec->extra[i]];
        const value *v = &s->payload[ec->extra[i]];
        katana_ctf_field *x = &extra[i];
        *x = (katana_ctf_field){.name = f->name, .is_signed = f->t->is_signed, .value = v->u};
        if (v->kind == K_STRING) {
            x->is_text = 1;
            /* Interned first: `intern` may move `strings`, which `strings[intern(…)]` could read before the call. */
            uint32_t id = intern(v->s, v->n);
            x->text = strings[id].s;
        } else if (f->t->nmaps) {
            mapping *m = enum_label(f->t, v->u);
            if (m) {
                if (!m->interned) m->interned = intern(m->label, strlen(m->label));
                x->is_text = 1;
                x->text = strings[m->interned].s;
            }
        }
    }
    e.extra = extra;
    e.extra_count = ec->extra_count;
    e.name = label_text(e.name_id);
    e.kind = label_text(e.kind_id);
    e.queue = label_text(e.queue_id);
    e.outcome = label_text(e.outcome_id);
    e.procname = label_text(e.procname_id);
    if (reading->handler(&e, reading->context) != 0) reading->stopped = read_stopped = 1;
}

/* The entry points' failure: the message in `error`, and 4 when the reader declined a sound construct, else 3. */
static int failed(char *error, size_t error_size) {
    failure_jump = NULL;
    snprintf(error, error_size, "%s", failure_message);
    /* Declined only before any event: a reader that falls back must not hand on an event twice. */
    if (delivered) failure_declined = 0;
    return failure_declined ? 4 : 3;
}

int katana_ctf_read(const char *root, katana_ctf_event_handler handler, void *context, uint64_t *discarded,
                    char *error, size_t error_size) {
    if (!enter_once(root, error, error_size, 0)) return 3;
    jmp_buf jump;
    if (setjmp(jump)) return failed(error, error_size);
    failure_jump = &jump;
    event_reading reading = {.handler = handler, .context = context};
    read_all(root, deliver_event, &reading);
    if (!range.katana_events) fail("no katana events");
    if (discarded) *discarded = discarded_events;
    failure_jump = NULL;
    return 0;
}

static void take_options(const katana_ctf_options *given) {
    options.top = given->top;
    options.has_begin = given->has_begin;
    options.begin_s = given->begin_s;
    options.has_end = given->has_end;
    options.end_s = given->end_s;
    options.min_duration = given->min_duration_ns;
    options.progress_fd = given->progress_fd;
    options.progress = given->progress;
    options.progress_context = given->progress_context;
    options.window_count = given->window_count > 0 ? given->window_count : 0;
    options.windows = options.window_count ? xcalloc((size_t)options.window_count * 2, sizeof(double)) : NULL;
    for (int i = 0; i < 2 * options.window_count; i++) options.windows[i] = given->windows[i];
    options.type_count = given->type_count > 0 ? given->type_count : 0;
    options.types = options.type_count ? xcalloc((size_t)options.type_count, sizeof(char *)) : NULL;
    for (int i = 0; i < options.type_count; i++) options.types[i] = xstrndup(given->types[i], strlen(given->types[i]));
}

static int analyze_event(const katana_ctf_event *event, void *context) {
    (void)context;
    on_event(event);
    return 0;
}

static void finish_report(FILE *out) {
    if (!A.events) fail("no katana events");
    write_report(out);
    if (fflush(out) != 0 || ferror(out)) fail("cannot write the report");
    failure_jump = NULL;
}

int katana_ctf_analyze(const char *root, const katana_ctf_options *given, FILE *out, char *error, size_t error_size) {
    if (!enter_once(root, error, error_size, 0)) return 3;
    jmp_buf jump;
    if (setjmp(jump)) return failed(error, error_size);
    failure_jump = &jump;
    take_options(given);
    event_reading reading = {.handler = analyze_event};
    read_all(root, deliver_event, &reading);
    finish_report(out);
    return 0;
}

/* An id for a handed-in string (0 for NULL), through a cache of the last one. */
static uint32_t handed_in(repeat_cache *cache, const char *text) {
    return text ? intern_repeating(cache, text, strlen(text)) : 0;
}

static repeat_cache handed_in_caches[6];

int katana_ctf_analysis_begin(const char *root, const katana_ctf_options *given, char *error, size_t error_size) {
    if (!enter_once(root, error, error_size, 1)) return 3;
    trace_root = root;
    jmp_buf jump;
    if (setjmp(jump)) return failed(error, error_size);
    failure_jump = &jump;
    failure_declined = 0;
    take_options(given);
    reader_name = "babeltrace2";
    intern_labels();
    failure_jump = NULL;
    return 0;
}

int katana_ctf_analysis_add(const katana_ctf_event *given, char *error, size_t error_size) {
    if (given->role < KATANA_CTF_OTHER || given->role > KATANA_CTF_INLINE) return 0;
    jmp_buf jump;
    if (setjmp(jump)) return failed(error, error_size);
    failure_jump = &jump;
    katana_ctf_event event = *given;
    event.event_id = handed_in(&handed_in_caches[0], event.event);
    event.name_id = handed_in(&handed_in_caches[1], event.name);
    event.kind_id = event.role == KATANA_CTF_INLINE ? state_updater_label : handed_in(&handed_in_caches[2], event.kind);
    event.queue_id = handed_in(&handed_in_caches[3], event.queue);
    event.outcome_id = handed_in(&handed_in_caches[4], event.outcome);
    event.procname_id = handed_in(&handed_in_caches[5], event.procname);
    on_event(&event);
    failure_jump = NULL;
    return 0;
}

int katana_ctf_analysis_end(uint64_t discarded, FILE *out, char *error, size_t error_size) {
    jmp_buf jump;
    if (setjmp(jump)) return failed(error, error_size);
    failure_jump = &jump;
    discarded_events = discarded;
    finish_report(out);
    return 0;
}
