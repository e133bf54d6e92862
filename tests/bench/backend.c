/* SPDX-License-Identifier: MIT */
/*
 * backend.c - sluice-bench-backend: a small HTTP/1.1 keep-alive back end for the delivery
 * benchmark (`sluice-bench deliver`), `scripts/demo --http` and the adaptive-concurrency tests.
 * It answers every request with --status (204 by default, no body), counts requests and TCP
 * connections, and reports how many requests are inside it (received, not yet answered).
 *
 * Without --slots it answers at once, as cheaply as it can (one static answer, written with
 * uv_try_write). With --slots N --service-ms S it is capacity-limited: N requests are served at a
 * time, S ms each, and the others wait in its FIFO; `--slots 8,16@10,4@20` changes N to 16 at
 * 10 s and to 4 at 20 s after the start. Every --report-ms (1000; 0: never) it prints one line
 *   t=SECONDS slots=N inside_p50=M inside_max=X requests=R connections=C
 * (inside sampled every 5 ms over that interval; requests and connections since the start), and
 * at SIGTERM or SIGINT a last line `total ...` with the median inside over the whole run, then
 * exits 0. Loopback only; one thread; answers requests of a connection in order (HTTP/1.1
 * clients such as libcurl send one at a time on a connection).
 */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <http_parser.h>
#include <uv.h>

#define MAX_PHASES 16
#define HIST_MAX   4096 /* inside counts above this are counted as this */
#define SAMPLE_MS  5

typedef struct conn conn;
typedef struct job job;

struct job {
    conn *c;       /* kept until its requests are answered (conn.jobs) */
    job *next;     /* in the FIFO, or in the connection's order */
    uv_timer_t tm; /* the service time */
    int keep;      /* keep the connection open after the answer */
};

struct conn {
    uv_tcp_t tcp;
    http_parser parser;
    int jobs;    /* requests of it inside */
    int closing; /* closed, or closing: free when jobs reaches 0 */
    int close_after;
};

static struct {
    uv_loop_t *loop;
    uv_tcp_t server;
    http_parser_settings settings;
    uv_buf_t answer;
    int slots, service_ms, report_ms;
    int phase_slots[MAX_PHASES];
    long long phase_at_ms[MAX_PHASES];
    int nphases;
    int busy;           /* requests in service */
    long long inside;   /* requests received and not yet answered */
    job *head, *tail;   /* waiting for a slot */
    long long requests; /* answered */
    long long conns;    /* accepted */
    uint64_t start_ms;
    long long hist[HIST_MAX + 1], total_hist[HIST_MAX + 1];
    long long inside_max;
    uv_timer_t sample, report;
    uv_signal_t sigterm, sigint;
} B;

static void on_closed(uv_handle_t *h) {
    conn *c = h->data;
    c->closing = 2;
    if (c->jobs == 0) {
        free(c);
    }
}

static void conn_close(conn *c) {
    if (c->closing == 0) {
        c->closing = 1;
        uv_close((uv_handle_t *)&c->tcp, on_closed);
    }
}

static void on_written(uv_write_t *w, int status) {
    free(w);
}

/* Answers one request of c (unless c is gone) and forgets it. */
static void answer(conn *c, int keep) {
    B.inside--;
    B.requests++;
    c->jobs--;
    if (c->closing) {
        if (c->jobs == 0 && c->closing == 2) {
            free(c);
        }
        return;
    }
    int n = uv_try_write((uv_stream_t *)&c->tcp, &B.answer, 1);
    if (n == UV_EAGAIN || (n >= 0 && (size_t)n < B.answer.len)) {
        uv_buf_t rest = uv_buf_init(B.answer.base + (n > 0 ? n : 0),
                                    (unsigned)(B.answer.len - (n > 0 ? (size_t)n : 0)));
        uv_write_t *w = malloc(sizeof(*w));
        if (w == NULL || uv_write(w, (uv_stream_t *)&c->tcp, &rest, 1, on_written) != 0) {
            free(w);
            conn_close(c);
            return;
        }
    } else if (n < 0) {
        conn_close(c);
        return;
    }
    if (!keep) {
        conn_close(c);
    }
}

static void on_job_closed(uv_handle_t *h) {
    free(h->data);
}

static void start_waiting(void);

static void on_served(uv_timer_t *t) {
    job *j = t->data;
    B.busy--;
    answer(j->c, j->keep);
    uv_close((uv_handle_t *)&j->tm, on_job_closed);
    start_waiting();
}

/* Moves jobs from the FIFO into free slots. */
static void start_waiting(void) {
    while (B.head != NULL && B.busy < B.slots) {
        job *j = B.head;
        B.head = j->next;
        if (B.head == NULL) {
            B.tail = NULL;
        }
        B.busy++;
        uv_timer_init(B.loop, &j->tm);
        j->tm.data = j;
        uv_timer_start(&j->tm, on_served, (uint64_t)B.service_ms, 0);
    }
}

static int on_message_complete(http_parser *p) {
    conn *c = p->data;
    int keep = http_should_keep_alive(p);
    B.inside++;
    c->jobs++;
    if (B.slots == 0) {
        answer(c, keep);
        return 0;
    }
    job *j = calloc(1, sizeof(*j));
    if (j == NULL) {
        answer(c, 0);
        return 0;
    }
    j->c = c;
    j->keep = keep;
    if (B.tail != NULL) {
        B.tail->next = j;
    } else {
        B.head = j;
    }
    B.tail = j;
    start_waiting();
    return 0;
}

static void on_alloc(uv_handle_t *h, size_t want, uv_buf_t *buf) {
    static char space[65536]; /* parsed before the next read: one buffer serves every connection */
    *buf = uv_buf_init(space, sizeof(space));
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf) {
    conn *c = s->data;
    if (n < 0) {
        conn_close(c);
        return;
    }
    size_t used = http_parser_execute(&c->parser, &B.settings, buf->base, (size_t)n);
    if (c->parser.http_errno != HPE_OK || used != (size_t)n) {
        conn_close(c);
    }
}

static void on_connection(uv_stream_t *server, int status) {
    if (status < 0) {
        return;
    }
    conn *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        return;
    }
    uv_tcp_init(B.loop, &c->tcp);
    c->tcp.data = c;
    if (uv_accept(server, (uv_stream_t *)&c->tcp) != 0) {
        conn_close(c);
        return;
    }
    B.conns++;
    uv_tcp_nodelay(&c->tcp, 1);
    http_parser_init(&c->parser, HTTP_REQUEST);
    c->parser.data = c;
    uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
}

static long long hist_median(const long long *h) {
    long long n = 0, seen = 0;
    for (int i = 0; i <= HIST_MAX; i++) {
        n += h[i];
    }
    for (int i = 0; i <= HIST_MAX; i++) {
        seen += h[i];
        if (n > 0 && seen * 2 >= n) {
            return i;
        }
    }
    return 0;
}

static void on_sample(uv_timer_t *t) {
    long long in = B.inside > HIST_MAX ? HIST_MAX : B.inside;
    B.hist[in]++;
    B.total_hist[in]++;
    if (B.inside > B.inside_max) {
        B.inside_max = B.inside;
    }
    long long now = (long long)(uv_now(B.loop) - B.start_ms);
    for (int i = 0; i < B.nphases; i++) {
        if (now >= B.phase_at_ms[i] && (i + 1 == B.nphases || now < B.phase_at_ms[i + 1]) &&
            B.slots != B.phase_slots[i]) {
            B.slots = B.phase_slots[i];
            start_waiting();
        }
    }
}

static void on_report(uv_timer_t *t) {
    printf("t=%.1f slots=%d inside_p50=%lld inside_max=%lld requests=%lld connections=%lld\n",
           (double)(uv_now(B.loop) - B.start_ms) / 1000.0, B.slots, hist_median(B.hist),
           B.inside_max, B.requests, B.conns);
    fflush(stdout);
    memset(B.hist, 0, sizeof(B.hist));
    B.inside_max = 0;
}

static void on_signal(uv_signal_t *s, int sig) {
    printf("total slots=%d inside_p50=%lld requests=%lld connections=%lld\n", B.slots,
           hist_median(B.total_hist), B.requests, B.conns);
    fflush(stdout);
    exit(0);
}

/* "8,16@10,4@20" -> phases; returns 0 or -1. */
static int parse_slots(const char *v) {
    char *end;
    const char *p = v;
    while (*p != '\0' && B.nphases < MAX_PHASES) {
        long n = strtol(p, &end, 10);
        long long at = 0;
        if (end == p || n < 1 || n > 100000) {
            return -1;
        }
        p = end;
        if (*p == '@') {
            at = strtoll(p + 1, &end, 10);
            if (end == p + 1 || at < 0) {
                return -1;
            }
            p = end;
        }
        if ((B.nphases == 0) != (at == 0) ||
            (B.nphases > 0 && at * 1000 <= B.phase_at_ms[B.nphases - 1])) {
            return -1;
        }
        B.phase_slots[B.nphases] = (int)n;
        B.phase_at_ms[B.nphases++] = at * 1000;
        if (*p == ',') {
            p++;
        } else if (*p != '\0') {
            return -1;
        }
    }
    return *p == '\0' ? 0 : -1;
}

static const char usage_text[] =
    "usage: sluice-bench-backend [--port N] [--port-file FILE] [--status 204|200]\n"
    "                            [--slots N[,N@SEC...] --service-ms MS] [--report-ms MS]\n"
    "  --port N            loopback port to listen on (default 0: any free port)\n"
    "  --port-file FILE    write the port there once listening\n"
    "  --status CODE       the answer: 204 (default, no body) or 200 (empty body)\n"
    "  --slots LIST        serve N at a time, the others wait in a FIFO; N@SEC from SEC s on\n"
    "  --service-ms MS     each request's service time with --slots (default 25)\n"
    "  --report-ms MS      a line of figures every MS (default 1000; 0: none)\n";

static int bad(const char *opt, const char *v) {
    fprintf(stderr, "sluice-bench-backend: %s: bad value '%s'\n%s", opt, v ? v : "", usage_text);
    return 2;
}

int main(int argc, char **argv) {
    int port = 0, status = 204;
    const char *port_file = NULL;
    B.service_ms = 25;
    B.report_ms = 1000;
    for (int i = 1; i < argc; i += 2) { /* every option takes a value */
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        char *end = NULL;
        long n = v ? strtol(v, &end, 10) : -1;
        int num = v != NULL && end != v && *end == '\0';
        if (strcmp(o, "--help") == 0) {
            fputs(usage_text, stdout);
            return 0;
        } else if (strcmp(o, "--port") == 0 && num && n >= 0 && n < 65536) {
            port = (int)n;
        } else if (strcmp(o, "--port-file") == 0 && v) {
            port_file = v;
        } else if (strcmp(o, "--status") == 0 && num && (n == 200 || n == 204)) {
            status = (int)n;
        } else if (strcmp(o, "--slots") == 0 && v && parse_slots(v) == 0) {
        } else if (strcmp(o, "--service-ms") == 0 && num && n >= 0 && n <= 600000) {
            B.service_ms = (int)n;
        } else if (strcmp(o, "--report-ms") == 0 && num && n >= 0 && n <= 3600000) {
            B.report_ms = (int)n;
        } else {
            return bad(o, v);
        }
    }
    signal(SIGPIPE, SIG_IGN);
    static char a204[] = "HTTP/1.1 204 No Content\r\n\r\n";
    static char a200[] = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
    B.answer =
        status == 204 ? uv_buf_init(a204, sizeof(a204) - 1) : uv_buf_init(a200, sizeof(a200) - 1);
    B.slots = B.nphases > 0 ? B.phase_slots[0] : 0;
    B.settings.on_message_complete = on_message_complete;
    B.loop = uv_default_loop();
    B.start_ms = uv_now(B.loop);

    struct sockaddr_in sa;
    uv_ip4_addr("127.0.0.1", port, &sa);
    uv_tcp_init(B.loop, &B.server);
    int rc = uv_tcp_bind(&B.server, (const struct sockaddr *)&sa, 0);
    if (rc == 0) {
        rc = uv_listen((uv_stream_t *)&B.server, 1024, on_connection);
    }
    if (rc != 0) {
        fprintf(stderr, "sluice-bench-backend: cannot listen on 127.0.0.1:%d: %s\n", port,
                uv_strerror(rc));
        return 1;
    }
    struct sockaddr_storage ss;
    int len = sizeof(ss);
    uv_tcp_getsockname(&B.server, (struct sockaddr *)&ss, &len);
    port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
    if (port_file != NULL) {
        char tmp[4096];
        snprintf(tmp, sizeof(tmp), "%s.tmp", port_file);
        FILE *f = fopen(tmp, "w");
        if (f == NULL || fprintf(f, "%d\n", port) < 0 || fclose(f) != 0 ||
            rename(tmp, port_file) != 0) {
            fprintf(stderr, "sluice-bench-backend: cannot write %s: %s\n", port_file,
                    strerror(errno));
            return 1;
        }
    }
    uv_timer_init(B.loop, &B.sample);
    uv_timer_start(&B.sample, on_sample, SAMPLE_MS, SAMPLE_MS);
    if (B.report_ms > 0) {
        uv_timer_init(B.loop, &B.report);
        uv_timer_start(&B.report, on_report, (uint64_t)B.report_ms, (uint64_t)B.report_ms);
    }
    uv_signal_init(B.loop, &B.sigterm);
    uv_signal_start(&B.sigterm, on_signal, SIGTERM);
    uv_signal_init(B.loop, &B.sigint);
    uv_signal_start(&B.sigint, on_signal, SIGINT);
    return uv_run(B.loop, UV_RUN_DEFAULT);
}
