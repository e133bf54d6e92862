/* SPDX-License-Identifier: MIT */
/*
 * handlers.c - the built-in handlers of sluice-worker:
 *   noop           acknowledge at once (inline; for benchmarks)
 *   sleep:MS       simulated work: a libuv timer per message, no thread held
 *   exec:CMD       `/bin/sh -c CMD` per message, payload on stdin; exit 0 done, 75 retry later,
 *                  anything else (or a signal) failed. SLUICE_ID, SLUICE_QUEUE and
 *                  SLUICE_DELIVERIES are in its environment. The command runs in a process
 *                  group of its own: past --handler-timeout the group gets SIGTERM, then
 *                  SIGKILL EXEC_KILL_GRACE_MS later (the worker retries the entry).
 *   crash-on:TEXT  abort() the whole worker when the payload contains TEXT, else done (for
 *                  testing poison messages)
 *   http(s)://...  the worker library's HTTP delivery (sluice/worker_http.h); here only its
 *                  command line: headers and the signing secret read from files
 * With --record FILE, each DONE verdict of any handler (the HTTP handler's too: the record is
 * the worker options' on_verdict hook) appends "<id> <payload> <wall_ms>\n" to FILE (payload
 * bytes outside 0x21..0x7e as '?'; wall_ms = sluice_wall_ms() at the verdict) with one write(2)
 * before the acknowledgement is sent, so an external checker can prove nothing was lost.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "handlers.h"
#include "sluice/cli.h"

static int record_fd = -1;

int sw_handlers_record(const char *path) {
    record_fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    return record_fd < 0 ? -errno : 0;
}

void sw_handlers_record_verdict(const sluice_job *job, sluice_verdict v, const char *reason,
                                void *arg) {
    (void)reason, (void)arg;
    if (record_fd < 0 || v != SLUICE_DONE) {
        return;
    }
    char line[600];
    size_t n = (size_t)snprintf(line, sizeof(line), "%s ", job->id);
    for (size_t i = 0; i < job->payload_len && n < sizeof(line) - 24; i++) {
        unsigned char ch = job->payload[i];
        line[n++] = (ch > 0x20 && ch < 0x7f) ? (char)ch : '?';
    }
    /* the wall-clock time of the verdict, for end-to-end latency (sluice-bench scale) */
    n += (size_t)snprintf(line + n, sizeof(line) - n, " %llu\n",
                          (unsigned long long)sluice_wall_ms());
    if (write(record_fd, line, n) < 0) {
        /* the entry is still acknowledged; the checker will report it as missing */
    }
}

/* ---- noop, crash-on ---- */

static const char *crash_text;

static void noop_handler(sluice_worker *w, const sluice_job *job, void *arg) {
    sluice_job_finish(job, SLUICE_DONE);
}

static void crash_handler(sluice_worker *w, const sluice_job *job, void *arg) {
    size_t n = strlen(crash_text);
    for (size_t i = 0; n > 0 && i + n <= job->payload_len; i++) {
        if (memcmp(job->payload + i, crash_text, n) == 0) {
            abort();
        }
    }
    sluice_job_finish(job, SLUICE_DONE);
}

/* ---- sleep:MS ---- */

typedef struct sleeper {
    uv_timer_t timer;
    const sluice_job *job;
    struct sleeper *prev, *next; /* the live sleepers, for sw_handlers_abandon */
} sleeper;

static unsigned sleep_ms;
/* per thread: each partition of a partitioned queue runs its worker and loop on its own */
static _Thread_local sleeper *sleepers;

static void sleeper_closed(uv_handle_t *h) {
    sleeper *s = h->data;
    if (s->prev != NULL) {
        s->prev->next = s->next;
    } else {
        sleepers = s->next;
    }
    if (s->next != NULL) {
        s->next->prev = s->prev;
    }
    free(s);
}

static void sleeper_cb(uv_timer_t *t) {
    sleeper *s = t->data;
    sluice_job_finish(s->job, SLUICE_DONE);
    uv_close((uv_handle_t *)t, sleeper_closed);
}

static void sleep_handler(sluice_worker *w, const sluice_job *job, void *arg) {
    sleeper *s = malloc(sizeof(*s));
    if (s == NULL) {
        sluice_job_finish(job, SLUICE_RETRY);
        return;
    }
    s->job = job;
    s->prev = NULL;
    s->next = sleepers;
    if (sleepers != NULL) {
        sleepers->prev = s;
    }
    sleepers = s;
    uv_timer_init(sluice_worker_loop(w), &s->timer);
    s->timer.data = s;
    uv_timer_start(&s->timer, sleeper_cb, sleep_ms, 0);
}

/* ---- exec:CMD ---- */

typedef struct child {
    uv_process_t proc;
    uv_pipe_t in;
    uv_write_t wr;
    uv_timer_t kill_timer; /* timed out: SIGKILL after EXEC_KILL_GRACE_MS */
    const sluice_job *job;
    sluice_verdict verdict;
    char reason[64]; /* how a failed command ended: exit status or signal */
    int open;        /* handles not yet closed */
    int abandoned;   /* the job timed out: SIGTERM sent to the process group */
    int killed;      /* ... and SIGKILL, after EXEC_KILL_GRACE_MS */
    int pid;         /* the command's process group, kept after its leader exited */
    char env[3][160];
} child;

/* A timed-out command's process group gets SIGTERM, then SIGKILL this much later. */
#define EXEC_KILL_GRACE_MS 2000

static const char *exec_cmd;
static const char *exec_queue;

static void child_closed(uv_handle_t *h) {
    child *c = h->data;
    if (--c->open == 0) {
        sluice_job_finish_reason(c->job, c->verdict, c->reason);
        free(c);
    }
}

static void child_exit(uv_process_t *p, int64_t status, int signal) {
    child *c = p->data;
    c->verdict = (signal == 0 && status == 0)    ? SLUICE_DONE
                 : (signal == 0 && status == 75) ? SLUICE_RETRY
                                                 : SLUICE_FAIL;
    if (signal != 0) {
        snprintf(c->reason, sizeof(c->reason), "exec: killed by signal %d (%s)", signal,
                 strsignal(signal));
    } else if (status != 0 && status != 75) {
        snprintf(c->reason, sizeof(c->reason), "exec: exited with status %lld", (long long)status);
    }
    if (c->abandoned) {
        c->verdict = SLUICE_RETRY; /* ignored by the worker; never recorded as done */
        if (c->killed) {
            uv_close((uv_handle_t *)&c->kill_timer, child_closed);
        } /* else the group may hold the command's children: the timer's SIGKILL ends them */
    }
    c->pid = p->pid;
    uv_close((uv_handle_t *)p, child_closed);
}

static void child_written(uv_write_t *req, int status) {
    child *c = req->data;
    uv_close((uv_handle_t *)&c->in, child_closed);
}

static void exec_handler(sluice_worker *w, const sluice_job *job, void *arg) {
    child *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        sluice_job_finish(job, SLUICE_RETRY);
        return;
    }
    uv_loop_t *loop = sluice_worker_loop(w);
    c->job = job;
    c->proc.data = c->in.data = c->wr.data = c;
    uv_pipe_init(loop, &c->in, 0);
    snprintf(c->env[0], sizeof(c->env[0]), "SLUICE_ID=%s", job->id);
    snprintf(c->env[1], sizeof(c->env[1]), "SLUICE_QUEUE=%s", exec_queue);
    snprintf(c->env[2], sizeof(c->env[2]), "SLUICE_DELIVERIES=%lld", job->deliveries);
    char sh[] = "/bin/sh", dash_c[] = "-c";
    char *args[] = {sh, dash_c, (char *)exec_cmd, NULL};
    uv_stdio_container_t stdio[3] = {
        {.flags = UV_CREATE_PIPE | UV_READABLE_PIPE, .data.stream = (uv_stream_t *)&c->in},
        {.flags = UV_INHERIT_FD, .data.fd = 1},
        {.flags = UV_INHERIT_FD, .data.fd = 2}};
    char **env = sw_handlers_env(c->env, 3);
    uv_process_options_t po = {.exit_cb = child_exit,
                               .file = "/bin/sh",
                               .args = args,
                               .env = env,
                               .stdio_count = 3,
                               .stdio = stdio,
                               /* own process group: abandoning kills the whole command */
                               .flags = UV_PROCESS_DETACHED};
    int rc = uv_spawn(loop, &c->proc, &po);
    free(env);
    if (rc != 0) {
        c->verdict = SLUICE_RETRY;
        c->open = 1;
        uv_close((uv_handle_t *)&c->in, child_closed);
        return;
    }
    c->open = 2;
    uv_buf_t buf = uv_buf_init((char *)(job->payload ? (const char *)job->payload : ""),
                               (unsigned)job->payload_len);
    if (uv_write(&c->wr, (uv_stream_t *)&c->in, &buf, 1, child_written) != 0) {
        uv_close((uv_handle_t *)&c->in, child_closed);
    }
}

static void kill_timer_cb(uv_timer_t *t) {
    child *c = t->data;
    int exited = uv_is_closing((uv_handle_t *)&c->proc);
    kill(-(exited ? c->pid : c->proc.pid), SIGKILL); /* the group outlives its leader */
    c->killed = 1;
    if (exited) {
        uv_close((uv_handle_t *)t, child_closed);
    } /* else child_exit closes the timer */
}

/* The job timed out (--handler-timeout): SIGTERM to the command's process group now, SIGKILL
 * after EXEC_KILL_GRACE_MS; the verdict comes when the command has exited. */
static void abandon_child(uv_handle_t *h, void *arg) {
    if (h->type != UV_PROCESS || uv_is_closing(h)) {
        return;
    }
    child *c = h->data;
    if (c->job != arg || c->abandoned) {
        return;
    }
    c->abandoned = 1;
    kill(-c->proc.pid, SIGTERM);
    uv_timer_init(h->loop, &c->kill_timer);
    c->kill_timer.data = c;
    c->open++;
    uv_timer_start(&c->kill_timer, kill_timer_cb, EXEC_KILL_GRACE_MS, 0);
}

static void exec_abandon(sluice_worker *w, const sluice_job *job, void *arg) {
    uv_walk(sluice_worker_loop(w), abandon_child, (void *)job);
}

static void sleep_abandon(sluice_worker *w, const sluice_job *job, void *arg) {
    for (sleeper *s = sleepers; s != NULL; s = s->next) {
        if (s->job == job && !uv_is_closing((uv_handle_t *)&s->timer)) {
            sluice_job_finish(job, SLUICE_RETRY);
            uv_close((uv_handle_t *)&s->timer, sleeper_closed);
            return;
        }
    }
}

static void kill_child(uv_handle_t *h, void *arg) {
    if (h->type == UV_PROCESS && !uv_is_closing(h)) {
        kill(-((uv_process_t *)h)->pid, SIGKILL); /* its whole process group */
    }
}

void sw_handlers_abandon(uv_loop_t *loop) {
    for (sleeper *s = sleepers; s != NULL; s = s->next) {
        if (!uv_is_closing((uv_handle_t *)&s->timer)) {
            uv_close((uv_handle_t *)&s->timer, sleeper_closed);
        }
    }
    uv_walk(loop, kill_child, NULL);
}

int sw_handler_parse(const char *spec, const char *queue, sluice_worker_options *o, char *err,
                     size_t errlen) {
    o->handler = NULL;
    o->abandon_handler = NULL;
    exec_queue = queue;
    if (strcmp(spec, "noop") == 0) {
        o->async_handler = noop_handler;
        return 0;
    }
    if (strncmp(spec, "sleep:", 6) == 0) {
        char *end;
        errno = 0;
        long v = strtol(spec + 6, &end, 10);
        if (spec[6] < '0' || spec[6] > '9' || *end != '\0' || errno || v > 3600000) {
            snprintf(err, errlen, "--handler: \"%s\": sleep needs milliseconds 0..3600000", spec);
            return -1;
        }
        sleep_ms = (unsigned)v;
        o->async_handler = sleep_handler;
        o->abandon_handler = sleep_abandon;
        return 0;
    }
    if (strncmp(spec, "exec:", 5) == 0 && spec[5] != '\0') {
        exec_cmd = spec + 5;
        o->async_handler = exec_handler;
        o->abandon_handler = exec_abandon;
        return 0;
    }
    if (strncmp(spec, "http://", 7) == 0 || strncmp(spec, "https://", 8) == 0) {
        o->async_handler = NULL; /* sw_http_new builds the target */
        return 0;
    }
    if (strncmp(spec, "crash-on:", 9) == 0 && spec[9] != '\0') {
        crash_text = spec + 9;
        o->async_handler = crash_handler;
        return 0;
    }
    snprintf(err, errlen,
             "--handler: \"%s\" is not a handler; use noop, sleep:MS, exec:CMD, crash-on:TEXT, "
             "http://HOST[:PORT]/PATH or https://...",
             spec);
    return -1;
}

/* ---- http(s):// ---- */

#define HTTP_FILE_MAX 65536 /* bytes of a header or secret file */

/* Reads a whole small file into a NUL-terminated buffer (malloc'ed). NULL with a message. */
static char *read_small(const char *opt, const char *path, char *err, size_t errlen) {
    FILE *f = fopen(path, "r");
    char *buf = f != NULL ? malloc(HTTP_FILE_MAX + 1) : NULL;
    size_t n = buf != NULL ? fread(buf, 1, HTTP_FILE_MAX + 1, f) : 0;
    if (f == NULL || buf == NULL || ferror(f) || n > HTTP_FILE_MAX) {
        snprintf(err, errlen, "%s: cannot read \"%s\"%s", opt, path,
                 n > HTTP_FILE_MAX ? " (over 64 KiB)" : "");
        free(buf);
        buf = NULL;
    } else {
        buf[n] = '\0';
    }
    if (f != NULL) {
        fclose(f);
    }
    return buf;
}

/* Splits --http-header-file's text into lines (CR LF or LF; blank lines and # comments
 * skipped) after the command line's headers. 0 or -1. */
static int header_lines(char *text, const char **hs, size_t *n, const char *path, char *err,
                        size_t errlen) {
    for (char *line = strtok(text, "\n"); line != NULL; line = strtok(NULL, "\n")) {
        size_t len = strlen(line);
        if (len > 0 && line[len - 1] == '\r') {
            line[--len] = '\0';
        }
        if (len == 0 || line[0] == '#') {
            continue;
        }
        if (*n == SW_HTTP_HEADERS_MAX) {
            snprintf(err, errlen, "--http-header-file: \"%s\": more than %d headers in all", path,
                     SW_HTTP_HEADERS_MAX);
            return -1;
        }
        hs[(*n)++] = line;
    }
    return 0;
}

int sw_http_new(const sw_http_args *a, sluice_http **out, char *err, size_t errlen) {
    sluice_http_options o;
    sluice_http_options_init(&o);
    const char *hs[SW_HTTP_HEADERS_MAX];
    size_t n = a->nheaders;
    memcpy(hs, a->headers, n * sizeof(hs[0]));
    char *htext = NULL, *secret = NULL, msg[300];
    int rc = -1;
    if (a->header_file != NULL &&
        ((htext = read_small("--http-header-file", a->header_file, err, errlen)) == NULL ||
         header_lines(htext, hs, &n, a->header_file, err, errlen) != 0)) {
        goto out;
    }
    if (a->secret_file != NULL &&
        (secret = read_small("--sign-secret-file", a->secret_file, err, errlen)) == NULL) {
        goto out;
    }
    o.url = a->url;
    o.headers = hs;
    o.nheaders = n;
    o.sign_secret = secret;
    o.ca_file = a->ca_file;
    o.follow_redirects = a->follow;
    if (sluice_http_new(&o, out, msg, sizeof(msg)) != 0) {
        snprintf(err, errlen, "--handler %s: %s", a->url, msg);
        goto out;
    }
    rc = 0;
out:
    free(htext);
    if (secret != NULL) {
        memset(secret, 0, strlen(secret));
        free(secret);
    }
    return rc;
}

extern char **environ;

char **sw_handlers_env(char extra[][160], size_t n) {
    size_t count = 0;
    while (environ[count] != NULL) {
        count++;
    }
    char **env = malloc((count + n + 1) * sizeof(*env));
    if (env == NULL) {
        return NULL;
    }
    size_t k = 0;
    for (size_t i = 0; i < count; i++) {
        if (strncmp(environ[i], "SLUICE_ID=", 10) != 0 &&
            strncmp(environ[i], "SLUICE_DELIVERIES=", 18) != 0) {
            env[k++] = environ[i];
        }
    }
    for (size_t i = 0; i < n; i++) {
        env[k++] = extra[i];
    }
    env[k] = NULL;
    return env;
}
