/* Internal interfaces of the core; not installed. */
#ifndef RL_INTERNAL_H
#define RL_INTERNAL_H

#include <pthread.h>
#include <stdarg.h>
#include <sys/types.h>
#include <hiredis/hiredis.h>

#include "ratelimit.h"
#include "rl_scripts.h"

/* Largest integer every Lua number (a double) holds exactly. */
#define RL_MAX_EXACT ((int64_t)1 << 53)
/* Products the scripts form (limit * period, ...) stay below this. */
#define RL_MAX_PRODUCT ((int64_t)1 << 51)

struct rl_client {
    char *host;
    int port;
    char *unix_path;
    char *user;
    char *password;
    int db;
    rl_options options;
    char *prefix;

    pthread_mutex_t mutex;
    pthread_cond_t available;
    redisContext **idle; /* pool_size slots */
    int idle_count;
    int open_count; /* idle + checked out */
    pid_t pid;      /* a forked child drops the parent's connections */
};

/* errors: set the thread's message and return the status */
int rl_fail(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void rl_clear_error(void);

/* pool */
int rl_conn_get(rl_client *client, redisContext **out);
void rl_conn_put(rl_client *client, redisContext *ctx);
/* A connection of its own (for SUBSCRIBE); close with redisFree. */
int rl_conn_open_dedicated(rl_client *client, redisContext **out);
/* One command, sent without ever raising SIGPIPE; NULL on a broken context. */
redisReply *rl_command(redisContext *ctx, int argc, const char **argv, const size_t *lens);
/* Maps a failed context to RL_ERR_TIMEOUT / RL_ERR_CONNECTION with a message. */
int rl_conn_error(redisContext *ctx, const char *what);

/* A command under construction: argv with owned storage. */
#define RL_CMD_MAX_ARGS 16
typedef struct {
    int argc;
    const char *argv[RL_CMD_MAX_ARGS];
    size_t lens[RL_CMD_MAX_ARGS];
    char *owned[RL_CMD_MAX_ARGS];
    char ints[RL_CMD_MAX_ARGS][24]; /* integer args live here: no malloc */
    int script; /* RL_SCRIPT_* for EVALSHA, else -1 */
    int failed; /* out of memory while building */
} rl_cmd;

void rl_cmd_init(rl_cmd *cmd);
void rl_cmd_free(rl_cmd *cmd);
void rl_cmd_str(rl_cmd *cmd, const char *s, size_t len);
void rl_cmd_cstr(rl_cmd *cmd, const char *s);
void rl_cmd_int(rl_cmd *cmd, int64_t value);
/* The one key format: prefix ":{" tag "}:" suffix (snprintf semantics). */
int rl_format_key(char *buf, size_t size, const rl_client *client, const char *tag, const char *suffix);
/* the same key, appended to cmd and owned by it */
void rl_cmd_key(rl_cmd *cmd, const rl_client *client, const char *tag, const char *suffix);
/* EVALSHA script nkeys: the caller appends keys and args after this */
void rl_cmd_script(rl_cmd *cmd, int script, int nkeys);

/* Sends n commands pipelined on one connection and reads the n replies.
 * Script calls answered NOSCRIPT are loaded and re-sent once (they did not
 * run). Never re-sends anything else. replies[i] must be freed by the caller
 * with freeReplyObject on RL_OK; on error all are NULL. */
int rl_run(rl_client *client, rl_cmd *cmds, size_t n, redisReply **replies);
int rl_run_on(rl_client *client, redisContext *ctx, rl_cmd *cmds, size_t n, redisReply **replies);

/* reply helpers */
int rl_reply_int(const redisReply *r, size_t index, int64_t *out);

/* validation helpers: name non-empty, value in range */
int rl_check_name(const char *what, const char *value);
int rl_check_range(const char *what, int64_t value, int64_t min, int64_t max);

int64_t rl_monotonic_ms(void);
/* Sleeps up to ms, in slices, polling cancel; RL_ERR_CANCELLED if it fired. */
int rl_sleep(int64_t ms, const rl_wait *wait);

#endif
