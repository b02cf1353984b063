/* The blocking engine: runs commands on the right server, each caller on a
 * pooled connection of its own (protocol.c decides batching, redirects,
 * retries and script loading; command.c builds the commands; combine.c
 * batches overlapping callers' decisions through it). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static void free_replies(redisReply **replies, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (replies[i]) rl_reply_free(replies[i]);
        replies[i] = NULL;
    }
}

/* Sends cmds[idx[0..m)] pipelined on conn (each one the ASKING redirect
 * asked for preceded by ASKING; plain decisions batched, rl_plan_calls) and
 * reads their replies into replies[idx], each call's whole by *read_by
 * (rl_now_ms; 0: command_timeout_ms from now, once sent). Every
 * reply but the last moves *read_by to at least command_timeout_ms from its
 * arrival: a big batch may take longer in all, while one call ends within
 * its timeout even if its reply trickles in byte by byte (the socket's
 * timeout bounds each read, not the reply). On an error the replies read
 * before it stay in replies. */
static int send_and_read(rl_client *c, rl_conn *conn, rl_cmd *cmds, const size_t *idx, size_t m, rl_node *const *ask,
                         int64_t *read_by, redisReply **replies)
{
    const int timeout = c->options.command_timeout_ms;
    redisContext *ctx = conn->ctx;
    const char *asking_argv[1] = {"ASKING"};
    const rl_cmd *first = &cmds[idx[0]], **ptrs = &first, **batch = &first;
    size_t zero = 0, *ord = &zero, *len = &m, calls = 1;
    int rc = RL_OK;
    void *scratch = NULL;
    if (m > 1) {
        if (!(scratch = malloc(m * (2 * sizeof *ptrs + 2 * sizeof *ord + 2))))
            return rl_fail(RL_ERR_NOMEM, "out of memory");
        ptrs = scratch;
        batch = ptrs + m;
        ord = (size_t *)(batch + m);
        len = ord + m;
        char *asked = (char *)(len + m);
        for (size_t k = 0; k < m; k++) {
            ptrs[k] = &cmds[idx[k]];
            asked[k] = ask[idx[k]] != NULL;
        }
        calls = rl_plan_calls(c, ptrs, asked, m, ord, len, asked + m);
    }
    for (size_t k = 0, o = 0; k < calls; o += len[k++]) {
        for (size_t j = 0; j < len[k]; j++) batch[j] = ptrs[ord[o + j]];
        /* only a command alone goes after ASKING (rl_plan_calls) */
        if ((ask[idx[ord[o]]] && rl_append_command(ctx, 1, asking_argv, NULL) != REDIS_OK) ||
            rl_append_call(ctx, batch, len[k]) != REDIS_OK) {
            /* half a pipeline sits in the output buffer: never reuse */
            if (!ctx->err) ctx->err = REDIS_ERR_OOM;
            rc = rl_conn_error(conn, "send command");
            goto out;
        }
    }
    if (rl_conn_flush(conn) != REDIS_OK) {
        rc = rl_conn_error(conn, "send command");
        goto out;
    }
    if (!*read_by) *read_by = rl_now_ms() + timeout;
    for (size_t k = 0, o = 0; k < calls; o += len[k++]) {
        void *r = NULL;
        if (ask[idx[ord[o]]]) {
            if (rl_conn_read_by(conn, &r, *read_by, timeout) != REDIS_OK) goto broken;
            rl_reply_free(r);
        }
        if (rl_conn_read_by(conn, &r, *read_by, timeout) != REDIS_OK) goto broken;
        int ok = rl_batch_reply_ok(r, len[k]);
        for (size_t j = 0; j < len[k] && !rc; j++) {
            redisReply **own = &replies[idx[ord[o + j]]];
            if (len[k] == 1) *own = r;
            else if (!(*own = rl_reply_copy(rl_batch_part(r, ok, j)))) rc = rl_fail(RL_ERR_NOMEM, "out of memory");
        }
        if (len[k] > 1) rl_reply_free(r);
        if (rc) goto broken;
        if (k + 1 < calls) {
            int64_t more = rl_now_ms() + timeout;
            if (more > *read_by) *read_by = more;
        }
    }
    goto out;
broken:
    /* the replies read are kept: what Redis decided is reported (rl_run_each) */
    /* a pipeline cut short leaves replies in flight: never reuse */
    if (!ctx->err) ctx->err = REDIS_ERR_IO;
    rc = rc ? rc : rl_conn_error(conn, "read reply");
out:
    free(scratch);
    return rc;
}

/* NOSCRIPT means the script did not run: load it on this server and send
 * that call again. */
static int reload_once(rl_client *c, rl_conn *conn, rl_cmd *cmds, const size_t *idx, size_t m, rl_node *const *ask,
                       int64_t *read_by, redisReply **replies, int round)
{
    int loaded[RL_SCRIPT_COUNT] = {0};
    for (size_t k = 0; k < m; k++) {
        size_t i = idx[k];
        if (!rl_reload_wanted(&cmds[i], replies[i], round) || loaded[cmds[i].script]) continue;
        const rl_script_def *def = &rl_scripts[cmds[i].script];
        const char *argv[3];
        size_t lens[3];
        void *reply = NULL;
        rl_script_load_command(cmds[i].script, argv, lens);
        if (rl_append_command(conn->ctx, 3, argv, lens) != REDIS_OK || rl_conn_flush(conn) != REDIS_OK ||
            rl_conn_read_by(conn, &reply, *read_by, c->options.command_timeout_ms) != REDIS_OK)
            return rl_conn_error(conn, "SCRIPT LOAD");
        redisReply *r = reply;
        int bad = r->type != REDIS_REPLY_STRING || strcmp(r->str, def->sha1) != 0;
        int rc = bad ? rl_fail(RL_ERR_REDIS, "SCRIPT LOAD %s: %s", def->name,
                               r->type == REDIS_REPLY_ERROR ? r->str : "unexpected SHA1")
                     : RL_OK;
        rl_reply_free(r);
        if (rc) return rc;
        loaded[cmds[i].script] = 1;
    }
    for (size_t k = 0; k < m; k++) {
        size_t i = idx[k];
        if (!rl_reload_wanted(&cmds[i], replies[i], round)) continue;
        rl_reply_free(replies[i]);
        replies[i] = NULL;
        int rc = send_and_read(c, conn, cmds, &i, 1, ask, read_by, replies);
        if (rc) return rc;
    }
    return RL_OK;
}

/* Again while a SCRIPT FLUSH between the load and the call takes the script
 * away (RL_MAX_RESENDS times at most, as the I/O thread does), all by
 * *read_by. */
static int reload_scripts(rl_client *c, rl_conn *conn, rl_cmd *cmds, const size_t *idx, size_t m, rl_node *const *ask,
                          int64_t *read_by, redisReply **replies)
{
    for (int round = 0;; round++) {
        int rc = reload_once(c, conn, cmds, idx, m, ask, read_by, replies, round), again = 0;
        if (rc) return rc;
        for (size_t k = 0; k < m; k++) again |= rl_reload_wanted(&cmds[idx[k]], replies[idx[k]], round + 1);
        if (!again) return RL_OK;
    }
}

/* Command i of a batch has its outcome: an error, nothing more to send. */
static void settle(rl_outcome *outcomes, char *done, size_t *pending, size_t i, int status, const char *msg)
{
    if (msg != rl_errmsg()) rl_fail(status, "%s", msg); /* the last error is the last failure */
    outcomes[i].status = status;
    snprintf(outcomes[i].error, sizeof outcomes[i].error, "%s", msg && *msg ? msg : rl_strerror(status));
    done[i] = 1;
    (*pending)--;
}

/* Connecting to target failed (rc), nothing sent: after a failover the
 * route may differ now, so the round goes again (RL_MAX_RESENDS times at
 * most, an ASK's target never). 0: its commands fail with rc. */
static int route_changed(rl_client *c, rl_node *target, int rc, const rl_cmd *first, int asked, int64_t deadline,
                         int *reroutes)
{
    rl_node *again;
    char msg[200];
    if ((rc != RL_ERR_CONNECTION && rc != RL_ERR_TIMEOUT) || c->url.mode == RL_MODE_STANDALONE) return 0;
    snprintf(msg, sizeof msg, "%s", rl_errmsg());
    rl_topology_suspect(c, target);
    if (!asked && rl_now_ms() < deadline && rl_route(c, first->slot, &again) == RL_OK && again != target &&
        ++*reroutes <= RL_MAX_RESENDS)
        return 1;
    rl_fail(rc, "%s", msg);
    return 0;
}

/* Commands idx[0..m) were sent to target and the connection lost (rc):
 * each may have run, so none is sent again; the replies read before are
 * kept (a NOSCRIPT did not run, but its connection is gone). */
static void settle_lost(rl_client *c, rl_node *target, rl_outcome *outcomes, char *done, size_t *pending,
                        redisReply **replies, const size_t *idx, size_t m, int rc)
{
    char msg[200];
    snprintf(msg, sizeof msg, "%s", rl_errmsg());
    if (rc == RL_ERR_CONNECTION) rl_topology_suspect(c, target);
    for (size_t k = 0; k < m; k++) {
        size_t i = idx[k];
        if (replies[i] && !rl_reply_is_noscript(replies[i])) continue;
        if (replies[i]) rl_reply_free(replies[i]);
        replies[i] = NULL;
        settle(outcomes, done, pending, i, rc, msg);
    }
}

/* Redis's own error replies (WRONGTYPE, OOM, a script error) are their
 * request's; returns the first failure (one command: its message is in
 * rl_errmsg() already). */
static int outcome_of(redisReply **replies, rl_outcome *outcomes, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (replies[i] && replies[i]->type == REDIS_REPLY_ERROR) {
            outcomes[i].status = rl_fail(RL_ERR_REDIS, "%s", replies[i]->str);
            snprintf(outcomes[i].error, sizeof outcomes[i].error, "%s", replies[i]->str);
            rl_reply_free(replies[i]);
            replies[i] = NULL;
        }
    }
    if (n == 1) return outcomes[0].status;
    for (size_t i = 0; i < n; i++)
        if (outcomes[i].status) return rl_fail(outcomes[i].status, "%s", outcomes[i].error);
    return RL_OK;
}

int rl_run_each(rl_client *c, rl_cmd *cmds, size_t n, redisReply **replies, rl_outcome *outcomes)
{
    enum { SMALL = 8 };
    /* per command: its place in a round, where an ASK sends it, done, and
     * sent at least once (it may be redirected back) */
    size_t small[3 * SMALL], pending = n;
    void *scratch = n > SMALL ? calloc(n, sizeof(size_t) + sizeof(rl_node *) + 2) : memset(small, 0, sizeof small);
    int rc = RL_OK, redirects = 0, redirected_rounds = 0, reroutes = 0;
    /* read_by: every reply of this call, from its first send on (send_and_read) */
    int64_t start, deadline, read_by = 0, pause_ms = 0;
    char last[200] = "";

    for (size_t i = 0; i < n; i++) {
        replies[i] = NULL;
        outcomes[i].status = scratch ? RL_OK : RL_ERR_NOMEM;
        snprintf(outcomes[i].error, sizeof outcomes[i].error, "%s", scratch ? "" : "out of memory");
    }
    if (!scratch) return rl_fail(RL_ERR_NOMEM, "out of memory");
    size_t *idx = scratch;
    rl_node **ask = (rl_node **)(idx + n);
    char *done = (char *)(ask + n), *sent = done + n;
    for (size_t i = 0; i < n; i++)
        if (cmds[i].failed) settle(outcomes, done, &pending, i, RL_ERR_NOMEM, "out of memory building a command");
    start = rl_now_ms();
    deadline = start + c->options.command_timeout_ms;

    while (pending > 0) {
        rl_node *target = NULL, *node;
        rl_conn *conn;
        size_t m = 0;
        int later = 0, redirected = 0;
        /* this round: every pending command bound for the first one's server */
        for (size_t i = 0; i < n; i++) {
            if (done[i]) continue;
            if (ask[i]) node = ask[i];
            else if ((rc = rl_route(c, cmds[i].slot, &node))) {
                settle(outcomes, done, &pending, i, rc, rl_errmsg());
                continue;
            }
            if (!target) target = node;
            if (node != target) continue;
            idx[m++] = i;
        }
        if (m == 0) continue; /* none could be routed: all settled */
        if ((rc = rl_conn_get(c, target, &conn))) {
            if (route_changed(c, target, rc, &cmds[idx[0]], ask[idx[0]] != NULL, deadline, &reroutes)) continue;
            /* this server's requests fail; the other servers' still run */
            for (size_t k = 0; k < m; k++) settle(outcomes, done, &pending, idx[k], rc, rl_errmsg());
            continue;
        }
        for (size_t k = 0; k < m; k++) sent[idx[k]] = 1;
        rc = send_and_read(c, conn, cmds, idx, m, ask, &read_by, replies);
        if (rc == RL_OK) rc = reload_scripts(c, conn, cmds, idx, m, ask, &read_by, replies);
        rl_conn_put(c, conn);
        if (rc == RL_OK || rc == RL_ERR_TIMEOUT) rl_node_answered(target, rc == RL_OK);
        if (rc) {
            settle_lost(c, target, outcomes, done, &pending, replies, idx, m, rc);
            /* the other servers' requests get a reply window of their own */
            read_by = 0;
        }
        for (size_t k = 0; k < m; k++) {
            size_t i = idx[k];
            if (done[i]) continue;
            rl_reply_verdict kind = rl_follow_reply(c, replies[i], target, &ask[i]);
            if (kind == REPLY_FINAL) {
                done[i] = 1;
                pending--;
                continue;
            }
            snprintf(last, sizeof last, "%s", replies[i]->str);
            rl_reply_free(replies[i]);
            replies[i] = NULL;
            redirects++;
            redirected = 1;
            if (kind == REPLY_ASK && !ask[i]) settle(outcomes, done, &pending, i, RL_ERR_NOMEM, "out of memory");
            later |= kind == REPLY_LATER || kind == REPLY_READONLY;
        }
        if (pending == 0) break;
        int64_t left = deadline - rl_now_ms();
        if (redirected && left > 0 && (pause_ms = rl_retry_pause_ms(pause_ms, ++redirected_rounds, later)) > 0) {
            struct timespec ts = {0, (long)(pause_ms < left ? pause_ms : left) * 1000000L};
            nanosleep(&ts, NULL);
        }
        /* nothing redirected is sent again past the deadline (it could only
         * time out, unknown); requests for other servers, not sent yet, still go */
        int64_t now = rl_now_ms();
        for (size_t i = 0, gave_up = 0; now >= deadline && i < n; i++) {
            if (done[i] || !sent[i]) continue;
            if (!gave_up++)
                rl_fail(RL_ERR_TIMEOUT, "gave up after %d redirects and retries in %lld ms (command timeout %d ms): %s",
                        redirects, (long long)(now - start), c->options.command_timeout_ms, last);
            settle(outcomes, done, &pending, i, RL_ERR_TIMEOUT, rl_errmsg());
        }
    }
    if (n > SMALL) free(scratch);
    return outcome_of(replies, outcomes, n);
}

int rl_run(rl_client *c, rl_cmd *cmds, size_t n, redisReply **replies)
{
    if (!c) return rl_fail(RL_ERR_INVALID, "client must not be NULL");
    rl_outcome one, *outcomes = n == 1 ? &one : calloc(n, sizeof *outcomes);
    if (!outcomes) return rl_fail(RL_ERR_NOMEM, "out of memory");
    int rc = rl_run_each(c, cmds, n, replies, outcomes);
    if (rc) free_replies(replies, n);
    if (outcomes != &one) free(outcomes);
    return rc;
}
