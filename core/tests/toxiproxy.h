/* Test helpers shared by the fault suites (toxiproxy.c). */
#ifndef RL_TEST_TOXIPROXY_H
#define RL_TEST_TOXIPROXY_H

#include <stddef.h>

#include "harness.h"

/* redis-server on a free loopback port that takes DEBUG (the harness's cannot) */
void start_redis(test_redis *r);
/* toxiproxy-server from $RL_TOXIPROXY_SERVER, else ROOT/build/deps/toxiproxy/,
 * else PATH. Without one the test exits 77 (ctest's SKIP_RETURN_CODE), or
 * fails when RL_REQUIRE_TOXIPROXY=1 (scripts/test.sh); one that does not
 * start fails it. */
void start_toxiproxy(const char *root);
void stop_toxiproxy(void);
/* the proxy "redis" in front of 127.0.0.1:upstream_port; returns its port */
int create_proxy(int upstream_port);
/* One HTTP request to the API (Connection: close); the HTTP status, -1 if none. */
int http(const char *method, const char *path, const char *body, char *out, size_t out_size);
/* the same, exiting the test unless it answers 2xx */
void tox(const char *method, const char *path, const char *body);
/* adds a toxic named TYPE_STREAM to the proxy "redis" */
void toxic(const char *type, const char *stream, const char *attributes);
/* Removes every toxic (and enables the proxy again). */
void proxy_reset(void);
/* The same, and cuts every connection through the proxy. */
void proxy_heal(void);

#endif
