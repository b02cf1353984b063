/* Key names. An entity's hash tag is esc_name(name) [":" esc_id(id)]:
 *   - esc_name escapes '%', ':', '{', '}' and bytes below 0x21 or 0x7f as %XX,
 *     so the first raw ':' always ends the name;
 *   - esc_id escapes the same except ':' (IPv6 addresses stay readable);
 *   - an escaped id longer than RL_ID_INLINE_MAX is replaced by "%H" and the
 *     SHA-256 of the raw id in hex ("%H" is never an escape: H is not hex).
 *   - a per-client quota (RL_SCOPE_PER_CLIENT) appends "%P" and the client's
 *     id (32 hex digits): like "%H", never an escape.
 * No '{' or '}' ever reaches the tag, so Redis Cluster hashes exactly it, and
 * distinct (name, id) pairs give distinct tags. Common names and ids ("sms",
 * "user-42", "10.0.0.1") are unchanged by escaping. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define RL_ID_INLINE_MAX 256

/* ---- SHA-256 (FIPS 180-4) --------------------------------------------- */

static const uint32_t K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

#define ROTR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))

static void sha256_block(uint32_t h[8], const unsigned char *p)
{
    uint32_t w[64], a, b, c, d, e, f, g, k;
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = ROTR(w[i - 15], 7) ^ ROTR(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = ROTR(w[i - 2], 17) ^ ROTR(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], k = h[7];
    for (int i = 0; i < 64; i++) {
        uint32_t t1 = k + (ROTR(e, 6) ^ ROTR(e, 11) ^ ROTR(e, 25)) + ((e & f) ^ (~e & g)) + K[i] + w[i];
        uint32_t t2 = (ROTR(a, 2) ^ ROTR(a, 13) ^ ROTR(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
        k = g, g = f, f = e, e = d + t1, d = c, c = b, b = a, a = t1 + t2;
    }
    h[0] += a, h[1] += b, h[2] += c, h[3] += d, h[4] += e, h[5] += f, h[6] += g, h[7] += k;
}

/* hex (65 bytes with the NUL) of the SHA-256 of data */
void rl_sha256_hex(const void *data, size_t len, char *hex)
{
    uint32_t h[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    const unsigned char *p = data;
    unsigned char tail[128];
    size_t full = len / 64 * 64, rest = len - full;
    uint64_t bits = (uint64_t)len * 8;
    for (size_t i = 0; i < full; i += 64) sha256_block(h, p + i);
    memset(tail, 0, sizeof tail);
    memcpy(tail, p + full, rest);
    tail[rest] = 0x80;
    size_t tail_len = rest + 1 + 8 <= 64 ? 64 : 128;
    for (int i = 0; i < 8; i++) tail[tail_len - 1 - i] = (unsigned char)(bits >> (8 * i));
    for (size_t i = 0; i < tail_len; i += 64) sha256_block(h, tail + i);
    for (int i = 0; i < 8; i++) snprintf(hex + 8 * i, 9, "%08x", h[i]);
}

/* ---- escaping ---------------------------------------------------------- */

/* 2: escaped in names and ids, 1: in names only (':'), 0: kept; by table,
 * as this runs on every decision */
static const unsigned char escaped[256] = { /* below 0x21, '%', ':', '{', '}', 0x7f */
    2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2,
    2, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0, 2, 0, 2,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
};

/* Writes the escaped form of s into out (when not NULL); returns its length. */
static size_t escape(const char *s, int is_name, char *out)
{
    static const char hex[] = "0123456789ABCDEF";
    const unsigned char level = is_name ? 1 : 2;
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (escaped[*p] >= level) {
            if (out) {
                out[n] = '%';
                out[n + 1] = hex[*p >> 4];
                out[n + 2] = hex[*p & 15];
            }
            n += 3;
        } else {
            if (out) out[n] = (char)*p;
            n++;
        }
    }
    return n;
}

size_t rl_entity_tag_write(const char *name, const char *id, const char *owner, char *out)
{
    size_t name_len = escape(name, 1, NULL);
    size_t id_len = id ? escape(id, 0, NULL) : 0;
    int hashed = id && id_len > RL_ID_INLINE_MAX;
    size_t owner_len = owner ? strlen(owner) : 0;
    size_t total = name_len + (id ? 1 + (hashed ? 2 + 64 : id_len) : 0) + (owner ? 2 + owner_len : 0);
    if (!out) return total;
    escape(name, 1, out);
    if (id) {
        char *p = out + name_len;
        *p++ = ':';
        if (hashed) {
            memcpy(p, "%H", 2);
            rl_sha256_hex(id, strlen(id), p + 2);
        } else {
            escape(id, 0, p);
        }
    }
    if (owner) {
        memcpy(out + total - owner_len - 2, "%P", 2);
        memcpy(out + total - owner_len, owner, owner_len);
    }
    return total;
}

char *rl_entity_tag(const char *name, const char *id, const char *owner)
{
    size_t total = rl_entity_tag_write(name, id, owner, NULL);
    char *tag = malloc(total + 1);
    if (!tag) return NULL;
    rl_entity_tag_write(name, id, owner, tag);
    tag[total] = '\0';
    return tag;
}

/* ---- keys as bindings and tools see them (ratelimit.h) ----------------- */

int rl_key_build(const rl_client *client, const char *name, const char *id, rl_algorithm algorithm,
                 rl_scope scope, int rate, char *buf, size_t size)
{
    const char *alg = rl_algorithm_name(algorithm);
    int rc, n;
    if (!client) return rl_fail(RL_ERR_INVALID, "client must not be NULL");
    if ((rc = rl_check_name("name", name)) || (rc = rl_check_id(id))) return rc;
    if (!alg) return rl_fail(RL_ERR_INVALID, "unknown algorithm %d", (int)algorithm);
    if (scope != RL_SCOPE_OVERALL && scope != RL_SCOPE_PER_CLIENT)
        return rl_fail(RL_ERR_INVALID, "unknown scope %d", (int)scope);
    if ((rc = rl_check_range("rate", rate, 0, RL_MAX_RATES - 1))) return rc;
    char *tag = rl_entity_tag(name, id, scope == RL_SCOPE_PER_CLIENT ? client->id : NULL);
    if (!tag) return rl_fail(RL_ERR_NOMEM, "out of memory");
    /* the suffix of rate i > 0 is ":<i + 1>", as the decisions write it */
    if (rate) n = snprintf(buf, size, "%s:{%s}:%s:%d", client->prefix, tag, alg, rate + 1);
    else n = snprintf(buf, size, "%s:{%s}:%s", client->prefix, tag, alg);
    free(tag);
    return n;
}

static int hex_value(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* s[0..len) with its %XX escapes undone, malloc'd; "%H" and "%P" are no
 * escapes and stay */
static char *unescape(const char *s, size_t len)
{
    char *out = malloc(len + 1), *p = out;
    if (!out) return NULL;
    for (size_t i = 0; i < len; i++) {
        int hi = i + 2 < len && s[i] == '%' ? hex_value(s[i + 1]) : -1, lo = hi < 0 ? -1 : hex_value(s[i + 2]);
        if (lo >= 0) {
            *p++ = (char)(hi << 4 | lo);
            i += 2;
        } else {
            *p++ = s[i];
        }
    }
    *p = '\0';
    return out;
}

static char *copy(const char *s, size_t len)
{
    char *out = malloc(len + 1);
    if (out) memcpy(out, s, len), out[len] = '\0';
    return out;
}

static const char *find(const char *s, const char *end, const char *what)
{
    size_t n = strlen(what);
    for (; s + n <= end; s++)
        if (!memcmp(s, what, n)) return s;
    return NULL;
}

/* An entity's tag and what follows it: "{" name [":" id ["%P" client]] "}:" suffix */
static int parse_entity(const char *s, const char *end, rl_key_parts *out)
{
    const char *close = find(s, end, "}:");
    if (*s != '{' || !close) return 0;
    const char *suffix = close + 2, *colon = memchr(s + 1, ':', (size_t)(close - s - 1));
    const char *name_end = colon ? colon : close, *owner = colon ? find(colon, close, "%P") : NULL;
    const char *rate_at = memchr(suffix, ':', (size_t)(end - suffix));
    char alg[32];
    size_t alg_len = (size_t)((rate_at ? rate_at : end) - suffix);
    int known = 0;
    if (alg_len < sizeof alg) {
        memcpy(alg, suffix, alg_len);
        alg[alg_len] = '\0';
        known = colon && colon + 1 < (owner ? owner : close) && rl_algorithm_parse(alg, &out->algorithm) == RL_OK;
    }
    if (!(out->name = unescape(s + 1, (size_t)(name_end - s - 1)))) return RL_ERR_NOMEM;
    if (!known) {
        out->kind = RL_KEY_OTHER;
        return (out->suffix = copy(suffix, (size_t)(end - suffix))) ? 1 : RL_ERR_NOMEM;
    }
    out->kind = RL_KEY_STATE;
    if (rate_at) {
        long rate = strtol(rate_at + 1, NULL, 10);
        out->rate = rate >= 2 && rate <= RL_MAX_RATES ? (int)rate - 1 : 0;
    }
    const char *id = colon + 1, *id_end = owner ? owner : close;
    int hashed = id_end - id >= 2 && !memcmp(id, "%H", 2);
    if (!(out->id = hashed ? copy(id, (size_t)(id_end - id)) : unescape(id, (size_t)(id_end - id)))) return RL_ERR_NOMEM;
    if (owner && !(out->client_id = copy(owner + 2, (size_t)(close - owner - 2)))) return RL_ERR_NOMEM;
    return 1;
}

int rl_key_parse(const char *prefix, const char *key, size_t len, rl_key_parts *out)
{
    size_t prefix_len = prefix ? strlen(prefix) : 0;
    const char *end = key + len, *rest = key + prefix_len + 1;
    int rc = 0;
    if (!out || !key || !prefix) return rl_fail(RL_ERR_INVALID, "prefix, key and out must not be NULL");
    memset(out, 0, sizeof *out);
    if (len <= prefix_len || memcmp(key, prefix, prefix_len) || key[prefix_len] != ':') return 0;
    if ((size_t)(end - rest) >= 7 && !memcmp(rest, "config:", 7)) {
        out->kind = RL_KEY_CONFIG;
        rc = (out->name = unescape(rest + 7, (size_t)(end - rest - 7))) ? 1 : RL_ERR_NOMEM;
    } else if (rest < end) {
        rc = parse_entity(rest, end, out);
    }
    if (rc == RL_ERR_NOMEM) return rl_fail(rc, "out of memory");
    return rc;
}

void rl_key_parts_free(rl_key_parts *parts)
{
    if (!parts) return;
    free(parts->name);
    free(parts->id);
    free(parts->client_id);
    free(parts->suffix);
    memset(parts, 0, sizeof *parts);
}
