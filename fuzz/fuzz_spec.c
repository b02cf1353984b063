/* Spec and request validation, and the entity's hash tag, from bytes mapped
 * to fields:
 *   algorithm, op, then limit, period_ms, burst, permits, max_wait_ms, now_ms
 *   (each a selector byte and its operand: a small value, a power of two
 *   plus a delta, a boundary the validation uses plus a delta, or 8 raw
 *   bytes), then name 0xFF id (C strings: both end at a NUL).
 * A spec or request that validates keeps every number the scripts form
 * exact in Lua's doubles; an everyday one validates. The tag never holds
 * '{', '}', a space or a control byte, decodes back to the exact (name, id)
 * (so no two entities share a key), and every key of the entity hashes to
 * one cluster slot. */
#include "fuzz.h"
#include "internal.h"

#define MAX_PERIOD_MS ((int64_t)100 * 365 * 24 * 3600 * 1000)
#define MAX_NOW_MS (RL_MAX_EXACT / 1000 / 4)

typedef struct {
    const uint8_t *p;
    size_t n;
} input;

static uint8_t take_byte(input *in)
{
    if (!in->n) return 0;
    in->n--;
    return *in->p++;
}

static int64_t take_int(input *in)
{
    static const int64_t boundaries[] = {
        0, 1, RL_MAX_EXACT / 2, RL_MAX_EXACT, RL_MAX_PRODUCT, 1000000000000000LL, MAX_PERIOD_MS, MAX_NOW_MS,
        INT64_MAX, INT64_MIN, 1000, 60000, 3600000, 86400000, 94906265 /* ~sqrt(2^53) */, 1 << 20};
    uint8_t sel = take_byte(in), arg = take_byte(in);
    uint64_t delta = (uint64_t)(int64_t)((sel >> 2) - 32); /* wraps, as the raw bytes may */
    switch (sel & 3) {
    case 0: return (int8_t)arg;
    case 1: return (int64_t)(((uint64_t)1 << (arg & 63)) + delta);
    case 2: return (int64_t)((uint64_t)boundaries[arg % (sizeof boundaries / sizeof boundaries[0])] + delta);
    default: {
        uint64_t v = arg;
        for (int i = 0; i < 7; i++) v = v << 8 | take_byte(in);
        return (int64_t)v;
    }
    }
}

static int has_burst(rl_algorithm a)
{
    return a == RL_TOKEN_BUCKET || a == RL_GCRA;
}

static __int128 rate_capacity(rl_algorithm a, const rl_rate *r)
{
    return has_burst(a) && r->burst > 0 ? r->burst : r->limit;
}

static rl_rate rate_of(const rl_spec *s, size_t i)
{
    return i == 0 ? (rl_rate){s->limit, s->period_ms, s->burst} : s->more[i - 1];
}

/* what a request may ask for: what every rate can hold */
static __int128 capacity(const rl_spec *s)
{
    __int128 least = -1;
    for (size_t i = 0; i <= s->more_count && i < RL_MAX_RATES; i++) {
        rl_rate r = rate_of(s, i);
        if (least < 0 || rate_capacity(s->algorithm, &r) < least) least = rate_capacity(s->algorithm, &r);
    }
    return least;
}

static void check_valid_rate(rl_algorithm algorithm, const rl_rate *rate);

/* What a spec that validates guarantees the scripts (docs/semantics.md). */
static void check_valid_spec(const rl_spec *s)
{
    FUZZ_CHECK(s->algorithm >= 0 && s->algorithm < RL_ALGORITHM_COUNT);
    FUZZ_CHECK(s->more_count <= RL_MAX_RATES - 1);
    for (size_t i = 0; i <= s->more_count; i++) {
        rl_rate r = rate_of(s, i);
        check_valid_rate(s->algorithm, &r);
    }
    FUZZ_CHECK(s->scope == RL_SCOPE_OVERALL || s->scope == RL_SCOPE_PER_CLIENT);
    if (s->initial_tokens != 0) {
        FUZZ_CHECK(s->algorithm == RL_TOKEN_BUCKET || s->algorithm == RL_GCRA || s->algorithm == RL_LEAKY_BUCKET);
        FUZZ_CHECK(s->initial_tokens == RL_EMPTY || (s->initial_tokens >= 1 && s->initial_tokens <= RL_MAX_EXACT / 2));
    }
}

static void check_valid_rate(rl_algorithm algorithm, const rl_rate *rate)
{
    rl_spec one = {.algorithm = algorithm, .limit = rate->limit, .period_ms = rate->period_ms, .burst = rate->burst};
    const rl_spec *s = &one;
    __int128 cap = rate_capacity(algorithm, rate), product = 0;
    FUZZ_CHECK(s->limit >= 1 && s->limit <= RL_MAX_EXACT / 2);
    FUZZ_CHECK(s->period_ms >= 1 && s->period_ms <= MAX_PERIOD_MS);
    FUZZ_CHECK(cap >= 1 && cap <= RL_MAX_EXACT / 2);
    if (has_burst(s->algorithm)) FUZZ_CHECK(s->burst >= 0);
    else FUZZ_CHECK(s->burst == 0 || s->burst == s->limit);
    switch (s->algorithm) {
    case RL_SLIDING_LOG: FUZZ_CHECK(s->limit <= 1000000000000000LL); break;
    case RL_SLIDING_WINDOW:
    case RL_LEAKY_BUCKET: product = (__int128)s->limit * s->period_ms; break;
    case RL_TOKEN_BUCKET: product = cap * s->period_ms; break;
    case RL_GCRA: product = cap * (((__int128)s->period_ms * 1000 + s->limit - 1) / s->limit); break;
    default: break;
    }
    FUZZ_CHECK(product <= RL_MAX_PRODUCT);
}

static void check_valid_request(const rl_request *r)
{
    check_valid_spec(&r->spec);
    FUZZ_CHECK(r->name && r->name[0] && strlen(r->name) <= 1024);
    FUZZ_CHECK(r->id && r->id[0] && strlen(r->id) <= RL_ID_MAX);
    /* acquire up to n asks for any number: the script takes at most what is there */
    if (r->op == RL_OP_ACQUIRE_UP_TO) FUZZ_CHECK(r->permits >= 1 && r->permits <= RL_MAX_EXACT / 2);
    else FUZZ_CHECK(r->permits >= 1 && r->permits <= capacity(&r->spec));
    /* a count below the limit plus the permits stays below 2^53 */
    FUZZ_CHECK((__int128)r->spec.limit + r->permits <= RL_MAX_EXACT);
    FUZZ_CHECK(r->op >= RL_OP_ACQUIRE && r->op <= RL_OP_REFUND);
    if (r->op == RL_OP_RESERVE) {
        FUZZ_CHECK(r->spec.algorithm == RL_TOKEN_BUCKET || r->spec.algorithm == RL_LEAKY_BUCKET ||
                   r->spec.algorithm == RL_GCRA);
        FUZZ_CHECK(r->max_wait_ms >= 0 && r->max_wait_ms <= MAX_PERIOD_MS);
        for (size_t i = 0; r->spec.algorithm == RL_TOKEN_BUCKET && i <= r->spec.more_count; i++)
            FUZZ_CHECK((__int128)r->max_wait_ms * rate_of(&r->spec, i).limit <= RL_MAX_PRODUCT);
    } else {
        FUZZ_CHECK(r->max_wait_ms == 0);
    }
    FUZZ_CHECK(r->now_ms >= 0 && r->now_ms <= MAX_NOW_MS);
}

static int hexdigit(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* Decodes [s, s+n) (escapes are %XX, upper-case hex) into out; -1 if it is
 * not a well-formed escaped string. */
static long unescape(const char *s, size_t n, char *out)
{
    size_t j = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] != '%') {
            out[j++] = s[i];
            continue;
        }
        if (i + 2 >= n) return -1;
        int hi = hexdigit(s[i + 1]), lo = hexdigit(s[i + 2]);
        if (hi < 0 || lo < 0) return -1;
        out[j++] = (char)(hi * 16 + lo);
        i += 2;
    }
    return (long)j;
}

static void check_tag(const char *name, const char *id)
{
    char *tag = rl_entity_tag(name, id, NULL);
    FUZZ_CHECK(tag != NULL);
    size_t len = strlen(tag);
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)tag[i];
        FUZZ_CHECK(ch != '{' && ch != '}' && ch > 0x20 && ch != 0x7f);
    }
    /* the first ':' ends the name */
    const char *colon = memchr(tag, ':', len);
    size_t name_part = colon ? (size_t)(colon - tag) : len;
    char *decoded = malloc(len + 1);
    FUZZ_CHECK(decoded != NULL);
    long n = unescape(tag, name_part, decoded);
    FUZZ_CHECK(n == (long)strlen(name) && !memcmp(decoded, name, (size_t)n));
    if (!id) {
        FUZZ_CHECK(!colon);
    } else {
        const char *id_part = colon + 1;
        size_t id_len = len - name_part - 1;
        FUZZ_CHECK(colon != NULL);
        if (id_len >= 2 && !memcmp(id_part, "%H", 2)) {
            /* long ids: "%H" and the SHA-256 of the id */
            char hex[65];
            rl_sha256_hex(id, strlen(id), hex);
            FUZZ_CHECK(id_len == 66 && !memcmp(id_part + 2, hex, 64));
            FUZZ_CHECK(strlen(id) * 3 > 256); /* only ids too long to keep inline */
        } else {
            FUZZ_CHECK(id_len <= 256);
            n = unescape(id_part, id_len, decoded);
            FUZZ_CHECK(n == (long)strlen(id) && !memcmp(decoded, id, (size_t)n));
        }
    }
    free(decoded);

    /* every key of the entity hashes to the tag's slot; both key writers agree */
    static char prefix[] = "rl";
    rl_client client;
    memset(&client, 0, sizeof client);
    client.prefix = prefix;
    int slot = rl_key_slot(tag, len);
    for (int a = 0; id && strlen(name) <= 1024 && a < RL_ALGORITHM_COUNT; a++) {
        int klen = rl_key(&client, name, id, (rl_algorithm)a, NULL, 0);
        FUZZ_CHECK(klen == (int)(len + strlen(prefix) + 4 + strlen(rl_algorithm_name((rl_algorithm)a))));
        char *key = malloc((size_t)klen + 1);
        FUZZ_CHECK(key != NULL);
        FUZZ_CHECK(rl_key(&client, name, id, (rl_algorithm)a, key, (size_t)klen + 1) == klen);
        FUZZ_CHECK(rl_key_slot(key, (size_t)klen) == slot);
        rl_cmd cmd;
        rl_cmd_init(&cmd);
        rl_cmd_key(&cmd, &client, name, id, rl_algorithm_name((rl_algorithm)a));
        FUZZ_CHECK(!cmd.failed && cmd.argc == 1 && cmd.lens[0] == (size_t)klen);
        FUZZ_CHECK(!memcmp(cmd.argv[0], key, (size_t)klen));
        FUZZ_CHECK(cmd.slot == slot);
        rl_cmd_free(&cmd);
        free(key);
    }
    free(tag);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    input in = {data, size};
    rl_request req;
    memset(&req, 0, sizeof req);
    req.spec.algorithm = (rl_algorithm)((int8_t)take_byte(&in) % 8);
    req.op = (rl_op)((int8_t)take_byte(&in) % 6);
    req.spec.limit = take_int(&in);
    req.spec.period_ms = take_int(&in);
    req.spec.burst = take_int(&in);
    /* the rarer fields: a byte says which are set */
    uint8_t extras = take_byte(&in);
    if (extras & 1) {
        req.spec.more_count = (size_t)(take_byte(&in) % 10);
        for (size_t i = 0; i < req.spec.more_count && i < RL_MAX_RATES - 1; i++)
            req.spec.more[i] = (rl_rate){take_int(&in), take_int(&in), take_int(&in)};
    }
    if (extras & 2) req.spec.initial_tokens = take_int(&in);
    if (extras & 4) req.spec.scope = (rl_scope)((int8_t)take_byte(&in) % 3);
    req.permits = take_int(&in);
    req.max_wait_ms = take_int(&in);
    req.now_ms = take_int(&in);

    const uint8_t *sep = memchr(in.p, 0xFF, in.n);
    size_t name_len = sep ? (size_t)(sep - in.p) : in.n;
    char *name = fuzz_cstr(in.p, name_len);
    char *id = sep ? fuzz_cstr(sep + 1, in.n - name_len - 1) : fuzz_cstr((const uint8_t *)"", 0);
    req.name = name;
    req.id = id;

    int spec_rc = rl_spec_validate(&req.spec);
    FUZZ_CHECK(spec_rc == RL_OK || spec_rc == RL_ERR_INVALID);
    FUZZ_CHECK((spec_rc == RL_OK) == (rl_errmsg()[0] == '\0'));
    if (spec_rc == RL_OK) check_valid_spec(&req.spec);
    /* everyday specs validate */
    if (!extras && req.spec.algorithm >= 0 && req.spec.algorithm < RL_ALGORITHM_COUNT && req.spec.limit >= 1 &&
        req.spec.limit <= 100000 && req.spec.period_ms >= 1 && req.spec.period_ms <= 86400000 &&
        (req.spec.burst == 0 ||
         (has_burst(req.spec.algorithm) && req.spec.burst >= 1 && req.spec.burst <= req.spec.limit)))
        FUZZ_CHECK(spec_rc == RL_OK);

    int rc = rl_validate_request(&req);
    FUZZ_CHECK(rc == RL_OK || rc == RL_ERR_INVALID);
    if (rc == RL_OK) check_valid_request(&req);
    else FUZZ_CHECK(rl_errmsg()[0] != '\0');
    FUZZ_CHECK(spec_rc == RL_OK || rc != RL_OK);

    if (name[0]) {
        check_tag(name, NULL);
        if (id[0]) check_tag(name, id);
    }
    free(name);
    free(id);
    return 0;
}
