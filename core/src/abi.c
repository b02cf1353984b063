/* Structs that grow (ratelimit.h, "structs that grow"): the *_sized entry
 * points read and write a caller's rl_options, rl_request, rl_result and
 * rl_completion at the size its header gave them. At the library's own
 * sizes they call the plain functions at once; at another size they work
 * on copies at the library's (only callers of another header pay): that
 * work sits in functions of its own, kept out of line, so the common call
 * costs a compare and a call (callgrind, blocking rl_acquire: 6,744
 * instructions per decision against 6,732 before the sizes; 6,776 while
 * the copies' stack frame was set up on every call). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* A struct's size through its last field then: what the plain functions
 * (binaries built before the macros) mean. When one of these fails, the
 * struct grew: rename the plain function's body, and define the plain name
 * here as its *_sized call with the first size. */
#define THROUGH(type, field) (offsetof(type, field) + sizeof(((type *)0)->field))
#define PADDED(type, size) (((size) + _Alignof(type) - 1) / _Alignof(type) * _Alignof(type))
#define FIRST_OPTIONS_SIZE PADDED(rl_options, THROUGH(rl_options, max_batch))
#define FIRST_REQUEST_SIZE PADDED(rl_request, THROUGH(rl_request, lease_ms))
#define FIRST_RESULT_SIZE PADDED(rl_result, THROUGH(rl_result, local))
_Static_assert(sizeof(rl_options) == FIRST_OPTIONS_SIZE, "rl_options grew: see THROUGH in abi.c");
_Static_assert(sizeof(rl_request) == FIRST_REQUEST_SIZE, "rl_request grew: see THROUGH in abi.c");
_Static_assert(sizeof(rl_result) == FIRST_RESULT_SIZE, "rl_result grew: see THROUGH in abi.c");
_Static_assert(offsetof(rl_completion, result) + sizeof(rl_result) == sizeof(rl_completion),
               "rl_completion's result must stay its last field");

/* No header ever had a struct shorter than the first; 0 is a caller's bug. */
static int check_size(const char *what, size_t size, size_t first)
{
    if (size >= first) return RL_OK;
    return rl_fail(RL_ERR_INVALID, "%s size %zu is none a ratelimit.h ever gave it", what, size);
}

/* n of a caller's structs (size bytes each) as n of ours (ours bytes each):
 * fields they lack are zero (their default); fields of a newer header must
 * be zero too, unused, since this library cannot honour them. */
static int widen(void *to, size_t ours, const void *from, size_t size, size_t n, const char *what)
{
    const unsigned char *in = from;
    unsigned char *out = to;
    for (size_t i = 0; i < n; i++, in += size, out += ours) {
        memset(out, 0, ours);
        memcpy(out, in, size < ours ? size : ours);
        for (size_t b = ours; b < size; b++)
            if (in[b])
                return rl_fail(RL_ERR_INVALID, "%s %zu sets a field this library (%d) does not know", what, i,
                               RL_VERSION_NUMBER);
    }
    return RL_OK;
}

/* n of our structs back into a caller's: what it has room for, the fields
 * of a newer header zero */
static void narrow(void *to, size_t size, const void *from, size_t ours, size_t n)
{
    const unsigned char *in = from;
    unsigned char *out = to;
    for (size_t i = 0; i < n; i++, in += ours, out += size) {
        memcpy(out, in, size < ours ? size : ours);
        if (size > ours) memset(out + ours, 0, size - ours);
    }
}

#define SLOW __attribute__((noinline, cold))

/* sizes a caller gave for requests and results: at least the first */
static int check_sizes(size_t request_size, size_t result_size)
{
    int rc = check_size("rl_request", request_size, FIRST_REQUEST_SIZE);
    return rc ? rc : check_size("rl_result", result_size, FIRST_RESULT_SIZE);
}

static SLOW int open_widened(rl_client **out, const char *url, const rl_options *options, size_t options_size)
{
    rl_options own;
    int rc;
    if (out) *out = NULL;
    if ((rc = check_size("rl_options", options_size, FIRST_OPTIONS_SIZE)) ||
        (rc = widen(&own, sizeof own, options, options_size, 1, "rl_options")))
        return rc;
    return rl_client_open(out, url, &own);
}

int rl_client_open_sized(rl_client **out, const char *url, const rl_options *options, size_t options_size)
{
    if (!options || options_size == sizeof *options) return rl_client_open(out, url, options);
    return open_widened(out, url, options, options_size);
}

/* rl_acquire or (peek) rl_peek at a caller's result size */
static SLOW int decide_narrowed(rl_client *client, const char *name, const char *id, const rl_spec *spec,
                                int64_t permits, rl_result *out, size_t result_size, int peek)
{
    rl_result own;
    int rc;
    if ((rc = check_size("rl_result", result_size, FIRST_RESULT_SIZE))) return rc;
    rc = (peek ? rl_peek : rl_acquire)(client, name, id, spec, permits, &own);
    narrow(out, result_size, &own, sizeof own, 1);
    return rc;
}

int rl_acquire_sized(rl_client *client, const char *name, const char *id, const rl_spec *spec, int64_t permits,
                     rl_result *out, size_t result_size)
{
    if (!out || result_size == sizeof *out) return rl_acquire(client, name, id, spec, permits, out);
    return decide_narrowed(client, name, id, spec, permits, out, result_size, 0);
}

int rl_peek_sized(rl_client *client, const char *name, const char *id, const rl_spec *spec, int64_t permits,
                  rl_result *out, size_t result_size)
{
    if (!out || result_size == sizeof *out) return rl_peek(client, name, id, spec, permits, out);
    return decide_narrowed(client, name, id, spec, permits, out, result_size, 1);
}

static int execute(rl_client *client, const rl_request *requests, size_t n, rl_result *results,
                   rl_outcome *outcomes)
{
    return outcomes ? rl_execute_each(client, requests, n, results, outcomes)
                    : rl_execute(client, requests, n, results);
}

static SLOW int execute_widened(rl_client *client, const rl_request *requests, size_t n, rl_result *results,
                                rl_outcome *outcomes, size_t request_size, size_t result_size)
{
    int rc;
    rl_request *own = malloc(n * sizeof *own);
    rl_result *own_results = malloc(n * sizeof *own_results);
    if (!own || !own_results) {
        rc = rl_fail(RL_ERR_NOMEM, "out of memory");
    } else if (!(rc = check_sizes(request_size, result_size)) &&
               !(rc = widen(own, sizeof *own, requests, request_size, n, "request"))) {
        rc = execute(client, own, n, own_results, outcomes);
        narrow(results, result_size, own_results, sizeof *own_results, n);
        free(own);
        free(own_results);
        return rc;
    }
    /* refused whole, as the plain call refuses an invalid batch */
    for (size_t i = 0; outcomes && i < n; i++) {
        outcomes[i].status = rc;
        snprintf(outcomes[i].error, sizeof outcomes[i].error, "%s", rl_errmsg());
    }
    free(own);
    free(own_results);
    return rc;
}

int rl_execute_each_sized(rl_client *client, const rl_request *requests, size_t n, rl_result *results,
                          rl_outcome *outcomes, size_t request_size, size_t result_size)
{
    /* what the plain call refuses before reading any request it refuses itself */
    if ((request_size == sizeof *requests && result_size == sizeof *results) || n == 0 || n > RL_EXECUTE_MAX ||
        !requests || !results)
        return execute(client, requests, n, results, outcomes);
    return execute_widened(client, requests, n, results, outcomes, request_size, result_size);
}

/* rl_acquire_wait, or (from_lease) rl_decide_from_lease, at a caller's sizes */
static SLOW int one_widened(rl_client *client, const rl_request *request, const rl_wait *wait, rl_result *out,
                            int *decided, size_t request_size, size_t result_size, int from_lease)
{
    rl_request own;
    rl_result own_result;
    int rc;
    if (decided) *decided = 0;
    if ((rc = check_sizes(request_size, result_size)) ||
        (rc = widen(&own, sizeof own, request, request_size, 1, "request")))
        return rc;
    rc = from_lease ? rl_decide_from_lease(client, &own, &own_result, decided)
                    : rl_acquire_wait(client, &own, wait, &own_result);
    /* a lease that did not decide leaves out as it was */
    if (!from_lease || (decided && *decided)) narrow(out, result_size, &own_result, sizeof own_result, 1);
    return rc;
}

int rl_acquire_wait_sized(rl_client *client, const rl_request *request, const rl_wait *wait, rl_result *out,
                          size_t request_size, size_t result_size)
{
    if ((request_size == sizeof *request && result_size == sizeof *out) || !request || !out)
        return rl_acquire_wait(client, request, wait, out);
    return one_widened(client, request, wait, out, NULL, request_size, result_size, 0);
}

int rl_decide_from_lease_sized(rl_client *client, const rl_request *request, rl_result *out, int *decided,
                               size_t request_size, size_t result_size)
{
    if ((request_size == sizeof *request && result_size == sizeof *out) || !request || !out)
        return rl_decide_from_lease(client, request, out, decided);
    return one_widened(client, request, NULL, out, decided, request_size, result_size, 1);
}

/* rl_submit, or (timeout_ms >= 0) rl_submit_acquire_wait, at a caller's size */
static SLOW int submit_widened(rl_client *client, const rl_request *request, int64_t timeout_ms, uint64_t tag,
                               const rl_target *target, size_t request_size)
{
    rl_request own;
    int rc;
    if ((rc = check_size("rl_request", request_size, FIRST_REQUEST_SIZE)) ||
        (rc = widen(&own, sizeof own, request, request_size, 1, "request")))
        return rc;
    return timeout_ms < 0 ? rl_submit(client, &own, tag, target)
                          : rl_submit_acquire_wait(client, &own, timeout_ms, tag, target);
}

int rl_submit_sized(rl_client *client, const rl_request *request, uint64_t tag, const rl_target *target,
                    size_t request_size)
{
    if (request_size == sizeof *request || !request) return rl_submit(client, request, tag, target);
    return submit_widened(client, request, -1, tag, target, request_size);
}

int rl_submit_acquire_wait_sized(rl_client *client, const rl_request *request, int64_t timeout_ms, uint64_t tag,
                                 const rl_target *target, size_t request_size)
{
    /* a negative timeout is the plain call's to refuse */
    if (request_size == sizeof *request || !request || timeout_ms < 0)
        return rl_submit_acquire_wait(client, request, timeout_ms, tag, target);
    return submit_widened(client, request, timeout_ms, tag, target, request_size);
}

int rl_requests_validate_sized(const rl_request *requests, size_t n, size_t request_size)
{
    int rc;
    if (request_size == sizeof(rl_request) || n == 0 || n > RL_EXECUTE_MAX || !requests)
        return rl_requests_validate(requests, n);
    if ((rc = check_size("rl_request", request_size, FIRST_REQUEST_SIZE))) return rc;
    rl_request *own = malloc(n * sizeof *own);
    if (!own) return rl_fail(RL_ERR_NOMEM, "out of memory");
    if (!(rc = widen(own, sizeof *own, requests, request_size, n, "request"))) rc = rl_requests_validate(own, n);
    free(own);
    return rc;
}

static SLOW size_t take_narrowed(rl_completions *queue, rl_completion *out, size_t max, size_t completion_size)
{
    rl_completion own[8];
    size_t taken = 0, got;
    /* a completion's fields before its result never move: the caller's
     * shorter result is the first part of ours */
    if (completion_size < offsetof(rl_completion, result) + FIRST_RESULT_SIZE) {
        rl_fail(RL_ERR_INVALID, "rl_completion size %zu is none a ratelimit.h ever gave it", completion_size);
        return 0;
    }
    do {
        size_t want = max - taken < 8 ? max - taken : 8;
        got = rl_completions_take(queue, own, want);
        narrow((char *)out + taken * completion_size, completion_size, own, sizeof *own, got);
        taken += got;
    } while (got == 8 && taken < max);
    return taken;
}

size_t rl_completions_take_sized(rl_completions *queue, rl_completion *out, size_t max, size_t completion_size)
{
    if (completion_size == sizeof *out || !out) return rl_completions_take(queue, out, max);
    return take_narrowed(queue, out, max, completion_size);
}
