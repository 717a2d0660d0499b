/*
 * bpe.c — byte-level BPE as llama.cpp's llm_tokenizer_bpe does it: a
 * pre-tokenizer cuts the text into words, each word's bytes become GPT-2
 * code points (one symbol per byte), and adjacent symbols are merged by the
 * lowest merge rank first (ties: the leftmost pair). A symbol that spells no
 * token is emitted through the tokens spelling its single bytes, if any.
 *
 * Pre-tokenizers are hand-written matchers for the specific patterns of
 * llama.cpp, with the semantics its two engines give them: the gpt-2 pattern
 * is llama.cpp's custom splitter; the other patterns run as std::regex would,
 * one after another, each cutting every piece the previous ones left. Two
 * details of llama.cpp decide matches and are reproduced: patterns without
 * \p{..} see non-ASCII white space as U+000B (so it matches \s and no class),
 * and patterns with \p{..} see ASCII as itself and other code points by
 * category only.
 *
 * Invariants: text is decoded with the lax rules of unicode.h and re-encoded
 * before merging (so invalid bytes reach the merges as U+FFFD, as in
 * llama.cpp); pieces partition the fragment; merge-table entries name tokens.
 */
#include "tok_internal.h"
#include "unicode.h"

#include <stdlib.h>
#include <string.h>

/* ---- names ---- */

pi_bpe_pre pi_bpe_pre_from_name(const char *name, size_t len) {
    static const struct {
        const char *name;
        pi_bpe_pre pre;
    } k_names[] = {
        {"default", PI_PRE_DEFAULT},
        {"deepseek-llm", PI_PRE_DEEPSEEK_LLM},
        /* llama.cpp gives these the gpt-2 pattern and nothing else. */
        {"gpt-2", PI_PRE_GPT2},       {"phi-2", PI_PRE_GPT2},     {"roberta-bpe", PI_PRE_GPT2},
        {"gigachat", PI_PRE_GPT2},    {"jina-es", PI_PRE_GPT2},   {"jina-de", PI_PRE_GPT2},
        {"jina-v1-en", PI_PRE_GPT2},  {"mpt", PI_PRE_GPT2},       {"olmo", PI_PRE_GPT2},
        {"jais", PI_PRE_GPT2},
    };
    for (size_t i = 0; i < sizeof k_names / sizeof k_names[0]; i++)
        if (strlen(k_names[i].name) == len && memcmp(k_names[i].name, name, len) == 0) return k_names[i].pre;
    return PI_PRE_NONE;
}

const char *pi_bpe_pre_name(pi_bpe_pre pre) {
    switch (pre) {
    case PI_PRE_DEFAULT: return "default";
    case PI_PRE_GPT2: return "gpt-2";
    case PI_PRE_DEEPSEEK_LLM: return "deepseek-llm";
    case PI_PRE_NONE: break;
    }
    return "";
}

/* ---- merge table ---- */

static inline uint64_t pair_hash(int32_t l, int32_t r) {
    uint64_t z = (uint64_t)(uint32_t)l << 32 | (uint32_t)r;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static const pi_merge *find_merge(const pi_tokenizer *t, int32_t l, int32_t r) {
    for (size_t i = (size_t)pair_hash(l, r) & t->merge_mask;; i = (i + 1) & t->merge_mask) {
        const pi_merge *m = &t->merges[i];
        if (m->left < 0) return NULL;
        if (m->left == l && m->right == r) return m;
    }
}

#define SHOWN(len) ((int)((len) < 48 ? (len) : 48))

pi_status pi_bpe_load_merges(pi_tokenizer *t, const pi_gguf_kv *kv) {
    uint64_t n = kv->arr_n;
    if (n > (uint64_t)INT32_MAX / 4)
        return pi_error(PI_ERR_FORMAT, "tokenizer: tokenizer.ggml.merges has %llu entries, too many",
                        (unsigned long long)n);
    size_t cap = 16;
    while (cap < 2 * n) cap <<= 1;
    t->merges = malloc(cap * sizeof *t->merges);
    char *cat = malloc(2 * t->max_token_len);
    if (!t->merges || !cat) {
        free(cat);
        return pi_error(PI_ERR_NOMEM, "tokenizer: out of memory for %llu merges", (unsigned long long)n);
    }
    t->merge_mask = cap - 1;
    for (size_t i = 0; i < cap; i++) t->merges[i].left = -1;
    pi_status st = PI_OK;
    for (uint64_t i = 0; i < n; i++) {
        const char *s = kv->arr_str[i].data;
        size_t len = (size_t)kv->arr_str[i].len;
        /* llama.cpp splits at the first space after the first byte. */
        const char *sp = len > 1 ? memchr(s + 1, ' ', len - 1) : NULL;
        if (!sp) {
            st = pi_error(PI_ERR_FORMAT, "tokenizer: tokenizer.ggml.merges[%llu] ('%.*s') has no space",
                          (unsigned long long)i, SHOWN(len), s);
            break;
        }
        size_t ln = (size_t)(sp - s), rn = len - ln - 1;
        int32_t l = pi_tok_lookup(t, s, ln), r = pi_tok_lookup(t, sp + 1, rn);
        if (l < 0 || r < 0) {
            st = pi_error(PI_ERR_FORMAT, "tokenizer: tokenizer.ggml.merges[%llu] ('%.*s'): '%.*s' is not a token",
                          (unsigned long long)i, SHOWN(len), s, l < 0 ? SHOWN(ln) : SHOWN(rn), l < 0 ? s : sp + 1);
            break;
        }
        size_t i0 = (size_t)pair_hash(l, r) & t->merge_mask;
        for (size_t j = i0;; j = (j + 1) & t->merge_mask) {
            pi_merge *m = &t->merges[j];
            if (m->left == l && m->right == r) break; /* a repeat: the first rank stays */
            if (m->left < 0) {
                memcpy(cat, s, ln);
                memcpy(cat + ln, sp + 1, rn);
                *m = (pi_merge){l, r, (int32_t)i, pi_tok_lookup(t, cat, ln + rn)};
                t->n_merges++;
                break;
            }
        }
    }
    free(cat);
    return st;
}

/* ---- code point classes ---- */

enum { F_WS = 0x100 };

/* Category flags of a code point plus F_WS for white space. */
static inline unsigned cp_flags(uint32_t c) {
    if (c < 0x80) {
        unsigned f;
        if (c >= '0' && c <= '9') f = PI_UCAT_N;
        else if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') f = PI_UCAT_L;
        else if (c < 0x20 || c == 0x7F) f = PI_UCAT_C;
        else if (c == ' ') f = PI_UCAT_Z;
        else if (strchr("$+<=>^`|~", (int)c)) f = PI_UCAT_S;
        else f = PI_UCAT_P;
        return f | (pi_unicode_is_space(c) ? F_WS : 0);
    }
    return pi_unicode_cat(c) | (pi_unicode_is_space(c) ? F_WS : 0);
}

typedef struct {
    uint32_t lo, hi;
} cp_range;

static bool in_ranges(const cp_range *r, size_t n, uint32_t c) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (c < r[mid].lo) hi = mid;
        else if (c > r[mid].hi) lo = mid + 1;
        else return true;
    }
    return false;
}

/* \s of std::wregex in the C locale after llama.cpp turned non-ASCII white
   space into U+000B. */
static bool re_space(uint32_t c) {
    return c == ' ' || (c >= 0x09 && c <= 0x0D) || (c > 0x7F && pi_unicode_is_space(c));
}

/* Non-ASCII white space reaches std::wregex as U+000B, which none of the
   bracket classes below contains. */
static inline bool hidden_space(uint32_t c) { return c > 0x7F && pi_unicode_is_space(c); }

static bool cls_crlf(uint32_t c) { return c == '\r' || c == '\n'; }

/* deepseek-llm's letter class: [A-Za-zµÀ-ÖØ-öø-ƺ...] as written in llama.cpp. */
static bool cls_ds_letter(uint32_t c) {
    static const cp_range r[] = {
        {0x41, 0x5A},       {0x61, 0x7A},       {0xB5, 0xB5},       {0xC0, 0xD6},       {0xD8, 0xF6},
        {0xF8, 0x1BA},      {0x1BC, 0x1BF},     {0x1C4, 0x293},     {0x295, 0x2AF},     {0x370, 0x373},
        {0x376, 0x377},     {0x37B, 0x37D},     {0x37F, 0x37F},     {0x386, 0x386},     {0x388, 0x38A},
        {0x38C, 0x38C},     {0x38E, 0x3A1},     {0x3A3, 0x3F5},     {0x3F7, 0x481},     {0x48A, 0x52F},
        {0x531, 0x556},     {0x10A0, 0x10C5},   {0x13A0, 0x13F5},   {0x13F8, 0x13FD},   {0x1C90, 0x1CBA},
        {0x1CBD, 0x1CBF},   {0x1D00, 0x1D2B},   {0x1D6B, 0x1D77},   {0x1D79, 0x1D9A},   {0x1E00, 0x1F15},
        {0x1F18, 0x1F1D},   {0x1F20, 0x1F45},   {0x1F48, 0x1F4D},   {0x1F50, 0x1F57},   {0x1F59, 0x1F59},
        {0x1F5B, 0x1F5B},   {0x1F5D, 0x1F5D},   {0x1F5F, 0x1F7D},   {0x1F80, 0x1FB4},   {0x1FB6, 0x1FBC},
        {0x1FBE, 0x1FBE},   {0x1FC2, 0x1FC4},   {0x1FC6, 0x1FCC},   {0x1FD0, 0x1FD3},   {0x1FD6, 0x1FDB},
        {0x1FE0, 0x1FEC},   {0x1FF2, 0x1FF4},   {0x1FF6, 0x1FFC},   {0x2102, 0x2102},   {0x2107, 0x2107},
        {0x210A, 0x2113},   {0x2115, 0x2115},   {0x2119, 0x211D},   {0x2124, 0x2124},   {0x2126, 0x2126},
        {0x2128, 0x2128},   {0x212A, 0x212D},   {0x212F, 0x2134},   {0x2139, 0x2139},   {0x213C, 0x213F},
        {0x2145, 0x2149},   {0x214E, 0x214E},   {0x2183, 0x2184},   {0x2C00, 0x2C7B},   {0x2C7E, 0x2CE4},
        {0x2CEB, 0x2CEE},   {0x2CF2, 0x2CF3},   {0xA640, 0xA66D},   {0xA680, 0xA69B},   {0xA722, 0xA76F},
        {0xA771, 0xA787},   {0xA78B, 0xA78E},   {0xAB70, 0xABBF},   {0xFB00, 0xFB06},   {0xFB13, 0xFB17},
        {0xFF21, 0xFF3A},   {0xFF41, 0xFF5A},   {0x10400, 0x1044F}, {0x104B0, 0x104D3}, {0x104D8, 0x104FB},
        {0x10C80, 0x10CB2}, {0x10CC0, 0x10CF2}, {0x118A0, 0x118DF}, {0x1E900, 0x1E943},
    };
    return !hidden_space(c) && in_ranges(r, sizeof r / sizeof r[0], c);
}

/* deepseek-llm's punctuation class: [!-/:-~！-／：-～‘-‟　-。]. */
static bool cls_ds_punct(uint32_t c) {
    static const cp_range r[] = {{0x21, 0x2F},     {0x3A, 0x7E},     {0x2018, 0x201F},
                                 {0x3000, 0x3002}, {0xFF01, 0xFF0F}, {0xFF1A, 0xFF5E}};
    return !hidden_space(c) && in_ranges(r, sizeof r / sizeof r[0], c);
}

/* deepseek-llm's CJK class: [一-龥ࠀ-一가-퟿] (U+0800..U+9FA5, U+AC00..U+D7FF). */
static bool cls_ds_cjk(uint32_t c) {
    return !hidden_space(c) && ((c >= 0x800 && c <= 0x9FA5) || (c >= 0xAC00 && c <= 0xD7FF));
}

/* \p{N} as llama.cpp's category-collapsed std::regex sees it. */
static bool cls_number(uint32_t c) {
    if (c < 0x80) return c >= '0' && c <= '9';
    return !pi_unicode_is_space(c) && pi_unicode_cat(c) == PI_UCAT_N;
}

/* [\p{P}\$\+<=>\^~\|] collapsed the same way: ASCII punctuation and symbols
   except '`', or a non-ASCII code point of category P. */
static bool cls_punct_sym(uint32_t c) {
    if (c < 0x80) return c != 0 && strchr("!\"#$%&'()*+,-./:;<=>?@[\\]^_{|}~", (int)c) != NULL;
    return !pi_unicode_is_space(c) && pi_unicode_cat(c) == PI_UCAT_P;
}

static bool cls_digit(uint32_t c) { return c >= '0' && c <= '9'; }

/* ---- splitting ---- */

typedef struct {
    uint32_t *len; /* piece lengths in code points */
    size_t n;
} pieces;

static inline void piece_add(pieces *o, size_t len) {
    if (len) o->len[o->n++] = (uint32_t)len;
}

/* llama.cpp's hand-written matcher for
   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ */
static void split_gpt2(const uint32_t *cp, size_t a, size_t b, pieces *o) {
    size_t pos = a;
    while (pos < b) {
        uint32_t c = cp[pos];
        if (c == '\'' && pos + 1 < b) {
            uint32_t c1 = cp[pos + 1];
            if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') {
                piece_add(o, 2), pos += 2;
                continue;
            }
            if (pos + 2 < b) {
                uint32_t c2 = cp[pos + 2];
                if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) {
                    piece_add(o, 3), pos += 3;
                    continue;
                }
            }
        }
        /* " ?X+": a leading space joins the run that follows it. */
        size_t q = pos + (c == ' ');
        unsigned f = q < b ? cp_flags(cp[q]) : 0;
        size_t e = q;
        if (f & PI_UCAT_L) {
            while (e < b && (cp_flags(cp[e]) & PI_UCAT_L)) e++;
        } else if (f & PI_UCAT_N) {
            while (e < b && (cp_flags(cp[e]) & PI_UCAT_N)) e++;
        } else if (f && !(f & (F_WS | PI_UCAT_L | PI_UCAT_N))) {
            while (e < b && !(cp_flags(cp[e]) & (F_WS | PI_UCAT_L | PI_UCAT_N))) e++;
        } else {
            size_t nws = 0;
            while (pos + nws < b && (cp_flags(cp[pos + nws]) & F_WS)) nws++;
            if (nws > 1 && pos + nws < b) e = pos + nws - 1; /* \s+(?!\S): leave one for the next word */
            else if (nws > 0) e = pos + nws;
            else e = pos + 1;
        }
        piece_add(o, e - pos);
        pos = e;
    }
}

typedef enum {
    M_ONE,    /* C */
    M_RUN,    /* C+ */
    M_SP_RUN, /* \s?C+ */
    M_SP_END, /* \s+$ */
    M_THREE,  /* CCC */
    M_GPT2,   /* the whole gpt-2 pattern (split_gpt2) */
} match_kind;

typedef struct {
    match_kind kind;
    bool (*cls)(uint32_t);
} pattern;

/* Leftmost match of p in cp[pos..b) (the match std::regex_search finds). */
static bool find_match(pattern p, const uint32_t *cp, size_t pos, size_t b, size_t *ms, size_t *me) {
    if (p.kind == M_SP_END) {
        size_t s = b;
        while (s > pos && re_space(cp[s - 1])) s--;
        if (s == b) return false;
        *ms = s, *me = b;
        return true;
    }
    for (size_t i = pos; i < b; i++) {
        size_t e;
        if (p.kind == M_THREE) {
            if (b - i < 3 || !p.cls(cp[i]) || !p.cls(cp[i + 1]) || !p.cls(cp[i + 2])) continue;
            e = i + 3;
        } else if (p.cls(cp[i])) {
            e = i + 1;
        } else if (p.kind == M_SP_RUN && re_space(cp[i]) && i + 1 < b && p.cls(cp[i + 1])) {
            e = i + 2;
        } else {
            continue;
        }
        if (p.kind != M_ONE && p.kind != M_THREE)
            while (e < b && p.cls(cp[e])) e++;
        *ms = i, *me = e;
        return true;
    }
    return false;
}

/* Cut cp[a..b) into matches of p and the text between them. */
static void split_pattern(pattern p, const uint32_t *cp, size_t a, size_t b, pieces *o) {
    size_t pos = a, ms, me;
    while (pos < b && find_match(p, cp, pos, b, &ms, &me)) {
        piece_add(o, ms - pos);
        piece_add(o, me - ms);
        pos = me;
    }
    piece_add(o, b - pos);
}

/* Run the pre-tokenizer's patterns in order; the result is in *cur. */
static void pretokenize(pi_bpe_pre pre, const uint32_t *cp, size_t n, pieces *cur, pieces *tmp) {
    static const pattern k_gpt2[] = {{M_GPT2, NULL}};
    static const pattern k_default[] = {
        {M_RUN, cls_punct_sym}, {M_GPT2, NULL}, {M_RUN, cls_number}, {M_THREE, cls_digit}};
    static const pattern k_deepseek[] = {{M_ONE, cls_crlf},     {M_SP_RUN, cls_ds_letter}, {M_SP_RUN, cls_ds_punct},
                                         {M_SP_END, NULL},      {M_RUN, cls_ds_cjk},       {M_RUN, cls_number}};
    const pattern *ps;
    size_t np;
    switch (pre) {
    case PI_PRE_DEFAULT: ps = k_default, np = 4; break;
    case PI_PRE_DEEPSEEK_LLM: ps = k_deepseek, np = 6; break;
    default: ps = k_gpt2, np = 1; break;
    }
    cur->n = 0;
    piece_add(cur, n);
    for (size_t k = 0; k < np; k++) {
        tmp->n = 0;
        size_t a = 0;
        for (size_t i = 0; i < cur->n; i++) {
            size_t b = a + cur->len[i];
            if (ps[k].kind == M_GPT2) split_gpt2(cp, a, b, tmp);
            else split_pattern(ps[k], cp, a, b, tmp);
            a = b;
        }
        pieces x = *cur;
        *cur = *tmp;
        *tmp = x;
    }
}

/* ---- merging ---- */

typedef struct {
    int32_t prev, next; /* -1 at the ends */
    int32_t id;         /* token spelled, or -1 */
    uint32_t off, n;    /* bytes of the word; n == 0 once merged away */
} bpe_sym;

static bool try_pair(const pi_tokenizer *t, const bpe_sym *sym, int32_t l, int32_t r, pi_tok_heap *h) {
    if (l < 0 || r < 0 || sym[l].id < 0 || sym[r].id < 0) return true;
    const pi_merge *m = find_merge(t, sym[l].id, sym[r].id);
    if (!m) return true;
    return pi_tok_heap_push(h, (pi_tok_pair){(double)m->rank, l, r, m->result, sym[l].n + sym[r].n});
}

/* Merge one word (raw bytes w[0..n), n >= 1) and emit its tokens. */
static bool bpe_word(const pi_tokenizer *t, const uint8_t *w, size_t n, bpe_sym *sym, pi_tok_heap *h,
                     pi_tok_sink *sink) {
    int32_t ns = (int32_t)n;
    for (int32_t i = 0; i < ns; i++)
        sym[i] = (bpe_sym){i - 1, i + 1 < ns ? i + 1 : -1, t->byte_tok[w[i]], (uint32_t)i, 1};
    h->n = 0;
    for (int32_t i = 1; i < ns; i++)
        if (!try_pair(t, sym, i - 1, i, h)) return false;
    while (h->n) {
        pi_tok_pair p = pi_tok_heap_pop(h);
        bpe_sym *l = &sym[p.left], *r = &sym[p.right];
        if (l->n == 0 || r->n == 0 || l->n + r->n != p.size) continue; /* stale */
        l->n += r->n;
        l->id = p.id;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) sym[r->next].prev = p.left;
        if (!try_pair(t, sym, l->prev, p.left, h) || !try_pair(t, sym, p.left, l->next, h)) return false;
    }
    for (int32_t i = 0; i >= 0; i = sym[i].next) {
        const bpe_sym *y = &sym[i];
        if (y->id >= 0) {
            pi_tok_emit(sink, y->id);
            continue;
        }
        /* No token spells it: try each byte of its GPT-2 spelling alone. */
        for (uint32_t j = 0; j < y->n; j++) {
            uint8_t u[4];
            size_t k = pi_utf8_encode(pi_gpt2_byte_to_cp(w[y->off + j]), u);
            for (size_t q = 0; q < k; q++)
                if (t->single_tok[u[q]] >= 0) pi_tok_emit(sink, t->single_tok[u[q]]);
        }
    }
    return true;
}

pi_status pi_bpe_tokenize(const pi_tokenizer *t, const char *text, size_t len, pi_tok_sink *sink) {
    if (len == 0) return PI_OK;
    const uint8_t *s = (const uint8_t *)text;
    uint32_t *cp = malloc(len * sizeof *cp);
    uint32_t *boff = malloc((len + 1) * sizeof *boff); /* byte offset of each code point, re-encoded */
    uint32_t *p0 = malloc(len * sizeof *p0), *p1 = malloc(len * sizeof *p1);
    uint8_t *enc = NULL;
    bpe_sym *sym = NULL;
    pi_tok_heap h = {0};
    if (!cp || !boff || !p0 || !p1) goto nomem;
    size_t n = 0, nb = 0;
    for (size_t i = 0; i < len;) {
        size_t adv;
        uint32_t c = pi_utf8_decode(s + i, len - i, &adv);
        uint8_t u[4];
        boff[n] = (uint32_t)nb;
        cp[n++] = c;
        nb += pi_utf8_encode(c, u);
        i += adv;
    }
    boff[n] = (uint32_t)nb;
    if (!(enc = malloc(nb))) goto nomem;
    for (size_t i = 0; i < n; i++) pi_utf8_encode(cp[i], enc + boff[i]);

    pieces cur = {p0, 0}, tmp = {p1, 0};
    pretokenize(t->pre, cp, n, &cur, &tmp);
    size_t longest = 0, a = 0;
    for (size_t i = 0; i < cur.n; i++) {
        size_t b = a + cur.len[i];
        if (boff[b] - boff[a] > longest) longest = boff[b] - boff[a];
        a = b;
    }
    if (!(sym = malloc(longest * sizeof *sym))) goto nomem;
    a = 0;
    for (size_t i = 0; i < cur.n; i++) {
        size_t b = a + cur.len[i];
        if (!bpe_word(t, enc + boff[a], boff[b] - boff[a], sym, &h, sink)) goto nomem;
        a = b;
    }
    free(cp), free(boff), free(p0), free(p1), free(enc), free(sym), free(h.v);
    return PI_OK;
nomem:
    free(cp), free(boff), free(p0), free(p1), free(enc), free(sym), free(h.v);
    return pi_error(PI_ERR_NOMEM, "tokenize: out of memory for %zu bytes of text", len);
}
