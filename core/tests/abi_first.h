/* The first sized ABI (ratelimit.h, "structs that grow"), frozen: the
 * structs and plain functions as ratelimit.h declared them when the sizes
 * were first passed, for a caller built as a program built then was. Never
 * edit it to follow ratelimit.h: test_abi checks that a binary built
 * against it still runs with the library of today. Enums are ints here, as
 * the C ABI passes them. */
#ifndef RL_ABI_FIRST_H
#define RL_ABI_FIRST_H

#include <stddef.h>
#include <stdint.h>

typedef struct rl_client rl_client;

typedef struct {
    int connect_timeout_ms;
    int command_timeout_ms;
    int pool_size;
    const char *key_prefix;
    int on_error;
    const char *tls_ca_file;
    const char *tls_cert_file;
    const char *tls_key_file;
    int tls_verify;
    int reconnect_max_ms;
    int metrics_off;
    int config_refresh_ms;
    const char *client_id;
    int max_in_flight;
    int max_batch;
} rl_options;

typedef struct {
    int64_t limit;
    int64_t period_ms;
    int64_t burst;
} rl_rate;

typedef struct {
    int algorithm;
    int64_t limit;
    int64_t period_ms;
    int64_t burst;
    size_t more_count;
    rl_rate more[7];
    int64_t initial_tokens;
    int scope;
} rl_spec;

typedef struct {
    const char *name;
    const char *id;
    rl_spec spec;
    int64_t permits;
    int op;
    int64_t max_wait_ms;
    int64_t now_ms;
    int stored_spec;
    int64_t lease_ms;
} rl_request;

typedef struct {
    int allowed;
    int64_t limit;
    int64_t remaining;
    int64_t retry_after_ms;
    int64_t reset_after_ms;
    int64_t wait_ms;
    int fallback;
    int64_t granted;
    int rate_index;
    int local;
} rl_result;

const char *rl_errmsg(void);
int rl_client_open(rl_client **out, const char *url, const rl_options *options);
void rl_client_close(rl_client *client);
int rl_acquire(rl_client *client, const char *name, const char *id, const rl_spec *spec, int64_t permits,
               rl_result *out);
int rl_execute(rl_client *client, const rl_request *requests, size_t n, rl_result *results);

#endif
