/* SPDX-License-Identifier: MIT */
/*
 * proxy.c - sluice-faultproxy, a small TCP proxy that injects network faults for the fault
 * suite (tests/faults/fault_network.sh). No toxiproxy or tc netem on the test machines, so this
 * is the in-repo stand-in: one process, one poll(2) loop, loopback only.
 *
 *   sluice-faultproxy --listen 127.0.0.1:PORT --upstream 127.0.0.1:PORT --mode-file FILE
 *                     [--port-file FILE]
 *
 * PORT 0 for --listen picks a free port, written to --port-file. The mode file is re-read every
 * 100 ms; its first line is one of
 *   pass         forward both ways
 *   delay MS     forward each chunk MS milliseconds after it was read (order kept)
 *   blackhole    accept and read, but forward nothing either way: a partition. Data read is
 *                held (up to a cap per direction, then reading stops) and sent once the mode
 *                goes back to pass or delay, as TCP retransmission would after a partition heals
 *   reset        reset every connection (SO_LINGER 0 + close, so the peer sees RST), old and new
 * A missing or unreadable mode file means pass. Each change is logged to stderr.
 *
 * Does not own: anything Redis-specific; it forwards bytes.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum {
    MAX_RELAYS = 512,            /* connections held at once; more are reset */
    CHUNK_MAX = 64 * 1024,       /* bytes read at once */
    QUEUE_CAP = 8 * 1024 * 1024, /* bytes held per direction before reading stops */
    MODE_POLL_MS = 100,          /* how often the mode file is re-read */
};

typedef enum mode { MODE_PASS = 0, MODE_DELAY, MODE_BLACKHOLE, MODE_RESET } mode;

typedef struct chunk {
    struct chunk *next;
    uint64_t due_ms; /* not forwarded before this (monotonic ms) */
    size_t len, off;
    char data[];
} chunk;

/* Bytes read from one side and not yet written to the other. */
typedef struct flow {
    chunk *head, *tail;
    size_t queued;
    int eof; /* the reading side closed */
} flow;

/* fd[0] is the client, fd[1] the upstream; flow[i] carries bytes read from fd[i]. */
typedef struct relay {
    int fd[2];
    flow flow[2];
    int connecting; /* upstream connect in progress */
} relay;

typedef struct proxy {
    int listen_fd;
    struct sockaddr_in upstream;
    const char *mode_file;
    mode mode;
    int delay_ms;
    uint64_t next_mode_check;
    relay *relays[MAX_RELAYS];
    size_t nrelays;
    unsigned long long accepted, resets;
} proxy;

static volatile sig_atomic_t stop_requested;

static void on_stop(int sig) {
    (void)sig;
    stop_requested = 1;
}

static uint64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

#if defined(__GNUC__)
__attribute__((format(printf, 1, 2)))
#endif
static void
say(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "sluice-faultproxy: ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

static int set_nonblock(int fd) {
    int fl = fcntl(fd, F_GETFL, 0);
    return fl < 0 ? -1 : fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

static int parse_addr(const char *s, struct sockaddr_in *out) {
    char host[64];
    const char *colon = strrchr(s, ':');
    if (colon == NULL || (size_t)(colon - s) >= sizeof(host) || colon[1] == '\0') {
        return -1;
    }
    memcpy(host, s, (size_t)(colon - s));
    host[colon - s] = '\0';
    char *end;
    long port = strtol(colon + 1, &end, 10);
    if (*end != '\0' || port < 0 || port > 65535) {
        return -1;
    }
    memset(out, 0, sizeof(*out));
    out->sin_family = AF_INET;
    out->sin_port = htons((uint16_t)port);
    if (inet_pton(AF_INET, host, &out->sin_addr) != 1) {
        return -1;
    }
    /* loopback only: this tool must never touch a real network */
    return (ntohl(out->sin_addr.s_addr) >> 24) == 127 ? 0 : -1;
}

/* ---- connections ---- */

static void flow_clear(flow *f) {
    while (f->head != NULL) {
        chunk *c = f->head;
        f->head = c->next;
        free(c);
    }
    f->tail = NULL;
    f->queued = 0;
}

/* Closes the client side with RST (abortive close) when `rst`, else normally. */
static void close_fd(int fd, int rst) {
    if (fd < 0) {
        return;
    }
    if (rst) {
        struct linger lg = {1, 0};
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
    }
    close(fd);
}

static void relay_free(proxy *p, size_t i, int rst) {
    relay *l = p->relays[i];
    close_fd(l->fd[0], rst);
    close_fd(l->fd[1], rst);
    flow_clear(&l->flow[0]);
    flow_clear(&l->flow[1]);
    free(l);
    p->relays[i] = p->relays[--p->nrelays];
    if (rst) {
        p->resets++;
    }
}

static void accept_one(proxy *p) {
    int fd = accept(p->listen_fd, NULL, NULL);
    if (fd < 0) {
        return;
    }
    p->accepted++;
    if (p->mode == MODE_RESET || p->nrelays == MAX_RELAYS || set_nonblock(fd) != 0) {
        close_fd(fd, 1);
        p->resets++;
        return;
    }
    int up = socket(AF_INET, SOCK_STREAM, 0);
    relay *l = calloc(1, sizeof(*l));
    if (up < 0 || l == NULL || set_nonblock(up) != 0) {
        close_fd(fd, 1);
        close_fd(up, 0);
        free(l);
        return;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    setsockopt(up, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    l->fd[0] = fd;
    l->fd[1] = up;
    if (connect(up, (struct sockaddr *)&p->upstream, sizeof(p->upstream)) != 0) {
        if (errno != EINPROGRESS) {
            close_fd(fd, 1);
            close_fd(up, 0);
            free(l);
            p->resets++;
            return;
        }
        l->connecting = 1;
    }
    p->relays[p->nrelays++] = l;
}

/* Reads what side `s` has into flow[s]. Returns -1 when the relay must be dropped. */
static int read_side(proxy *p, relay *l, int s) {
    char buf[CHUNK_MAX];
    ssize_t n = read(l->fd[s], buf, sizeof(buf));
    if (n < 0) {
        return (errno == EAGAIN || errno == EINTR) ? 0 : -1;
    }
    if (n == 0) {
        l->flow[s].eof = 1;
        return 0;
    }
    chunk *c = malloc(sizeof(*c) + (size_t)n);
    if (c == NULL) {
        return -1;
    }
    c->next = NULL;
    c->len = (size_t)n;
    c->off = 0;
    c->due_ms = now_ms() + (p->mode == MODE_DELAY ? (uint64_t)p->delay_ms : 0);
    memcpy(c->data, buf, (size_t)n);
    flow *f = &l->flow[s];
    if (f->tail != NULL) {
        f->tail->next = c;
    } else {
        f->head = c;
    }
    f->tail = c;
    f->queued += (size_t)n;
    return 0;
}

/* Writes the due chunks of flow[s] to the other side. Returns -1 when the relay must drop. */
static int write_side(relay *l, int s, uint64_t now) {
    flow *f = &l->flow[s];
    int to = l->fd[1 - s];
    while (f->head != NULL && f->head->due_ms <= now) {
        chunk *c = f->head;
        ssize_t n = write(to, c->data + c->off, c->len - c->off);
        if (n < 0) {
            return (errno == EAGAIN || errno == EINTR) ? 0 : -1;
        }
        c->off += (size_t)n;
        f->queued -= (size_t)n;
        if (c->off < c->len) {
            return 0;
        }
        f->head = c->next;
        if (f->head == NULL) {
            f->tail = NULL;
        }
        free(c);
    }
    return 0;
}

static int forwarding(const proxy *p) {
    return p->mode == MODE_PASS || p->mode == MODE_DELAY;
}

/* ---- the mode file ---- */

static void read_mode(proxy *p) {
    mode m = MODE_PASS;
    int delay = 0;
    FILE *f = fopen(p->mode_file, "r");
    if (f != NULL) {
        char line[128] = "";
        if (fgets(line, sizeof(line), f) != NULL) {
            char word[32] = "";
            int ms = 0;
            int got = sscanf(line, "%31s %d", word, &ms);
            if (got >= 1 && strcmp(word, "pass") == 0) {
                m = MODE_PASS;
            } else if (got == 2 && strcmp(word, "delay") == 0 && ms >= 0 && ms <= 600000) {
                m = MODE_DELAY;
                delay = ms;
            } else if (got >= 1 && strcmp(word, "blackhole") == 0) {
                m = MODE_BLACKHOLE;
            } else if (got >= 1 && strcmp(word, "reset") == 0) {
                m = MODE_RESET;
            } else {
                m = p->mode; /* half-written or unknown: keep the current mode */
                delay = p->delay_ms;
            }
        }
        fclose(f);
    }
    if (m != p->mode || delay != p->delay_ms) {
        static const char *names[] = {"pass", "delay", "blackhole", "reset"};
        say("event=mode mode=%s delay_ms=%d", names[m], delay);
    }
    p->mode = m;
    p->delay_ms = delay;
    if (m == MODE_RESET) {
        while (p->nrelays > 0) {
            relay_free(p, p->nrelays - 1, 1);
        }
    }
}

/* ---- the loop ---- */

static int finish_connect(relay *l) {
    int err = 0;
    socklen_t len = sizeof(err);
    if (getsockopt(l->fd[1], SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) {
        return -1;
    }
    l->connecting = 0;
    return 0;
}

/* Handles the events of relay i. Returns -1 to drop it (with RST to the client on errors). */
static int service(proxy *p, relay *l, const struct pollfd *pf, uint64_t now) {
    if (l->connecting) {
        if (pf[1].revents & (POLLOUT | POLLERR | POLLHUP)) {
            return finish_connect(l);
        }
        return 0;
    }
    for (int s = 0; s < 2; s++) {
        if ((pf[s].revents & (POLLIN | POLLHUP | POLLERR)) && read_side(p, l, s) != 0) {
            return -1;
        }
    }
    if (forwarding(p)) {
        for (int s = 0; s < 2; s++) {
            if (write_side(l, s, now) != 0) {
                return -1;
            }
        }
    }
    /* a side closed and everything it sent was delivered: close the relay */
    for (int s = 0; s < 2; s++) {
        if (l->flow[s].eof && l->flow[s].head == NULL) {
            return 1;
        }
    }
    return 0;
}

static int poll_timeout(const proxy *p, uint64_t now) {
    uint64_t next = p->next_mode_check;
    if (forwarding(p)) {
        for (size_t i = 0; i < p->nrelays; i++) {
            for (int s = 0; s < 2; s++) {
                chunk *c = p->relays[i]->flow[s].head;
                if (c != NULL && c->due_ms > now && c->due_ms < next) {
                    next = c->due_ms;
                }
            }
        }
    }
    return next > now ? (int)(next - now) : 0;
}

static void run(proxy *p) {
    static struct pollfd pfd[1 + 2 * MAX_RELAYS];
    while (!stop_requested) {
        uint64_t now = now_ms();
        if (now >= p->next_mode_check) {
            read_mode(p);
            p->next_mode_check = now + MODE_POLL_MS;
        }
        pfd[0] = (struct pollfd){.fd = p->listen_fd, .events = POLLIN};
        size_t n = p->nrelays;
        for (size_t i = 0; i < n; i++) {
            relay *l = p->relays[i];
            for (int s = 0; s < 2; s++) {
                short ev = 0;
                if (l->connecting) {
                    ev = s == 1 ? POLLOUT : 0;
                } else {
                    if (!l->flow[s].eof && l->flow[s].queued < QUEUE_CAP) {
                        ev |= POLLIN;
                    }
                    flow *other = &l->flow[1 - s];
                    if (forwarding(p) && other->head != NULL && other->head->due_ms <= now) {
                        ev |= POLLOUT;
                    }
                }
                pfd[1 + 2 * i + (size_t)s] = (struct pollfd){.fd = l->fd[s], .events = ev};
            }
        }
        int rc = poll(pfd, 1 + 2 * n, poll_timeout(p, now));
        if (rc < 0 && errno != EINTR) {
            perror("sluice-faultproxy: poll");
            return;
        }
        now = now_ms();
        /* service from the end: relay_free moves the last relay into the freed slot */
        for (size_t i = n; i-- > 0;) {
            int r = service(p, p->relays[i], &pfd[1 + 2 * i], now);
            if (r != 0) {
                relay_free(p, i, r < 0);
            }
        }
        if (pfd[0].revents & POLLIN) {
            accept_one(p);
        }
    }
}

static int listen_on(const char *addr, const char *port_file) {
    struct sockaddr_in sa;
    if (parse_addr(addr, &sa) != 0) {
        fprintf(stderr, "sluice-faultproxy: --listen \"%s\" is not a loopback HOST:PORT\n", addr);
        return -1;
    }
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
        bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(fd, 256) != 0 ||
        set_nonblock(fd) != 0) {
        perror("sluice-faultproxy: listen");
        return -1;
    }
    socklen_t len = sizeof(sa);
    getsockname(fd, (struct sockaddr *)&sa, &len);
    if (port_file != NULL) {
        char tmp[4096];
        snprintf(tmp, sizeof(tmp), "%s.tmp", port_file);
        FILE *f = fopen(tmp, "w");
        if (f == NULL || fprintf(f, "%u\n", ntohs(sa.sin_port)) < 0 || fclose(f) != 0 ||
            rename(tmp, port_file) != 0) {
            perror("sluice-faultproxy: --port-file");
            return -1;
        }
    }
    say("event=listening port=%u", ntohs(sa.sin_port));
    return fd;
}

static const char usage[] =
    "usage: sluice-faultproxy --listen 127.0.0.1:PORT --upstream 127.0.0.1:PORT\n"
    "                         --mode-file FILE [--port-file FILE]\n"
    "The mode file holds one of: pass | delay MS | blackhole | reset (re-read every 100 ms).\n";

int main(int argc, char **argv) {
    static proxy p;
    const char *listen_addr = NULL, *up = NULL, *port_file = NULL;
    for (int i = 1; i < argc; i += 2) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            fputs(usage, stdout);
            return 0;
        }
        if (v == NULL) {
            fprintf(stderr, "sluice-faultproxy: %s needs a value\n%s", a, usage);
            return 2;
        }
        if (strcmp(a, "--listen") == 0) {
            listen_addr = v;
        } else if (strcmp(a, "--upstream") == 0) {
            up = v;
        } else if (strcmp(a, "--mode-file") == 0) {
            p.mode_file = v;
        } else if (strcmp(a, "--port-file") == 0) {
            port_file = v;
        } else {
            fprintf(stderr, "sluice-faultproxy: unknown option %s\n%s", a, usage);
            return 2;
        }
    }
    if (listen_addr == NULL || up == NULL || p.mode_file == NULL) {
        fputs(usage, stderr);
        return 2;
    }
    if (parse_addr(up, &p.upstream) != 0) {
        fprintf(stderr, "sluice-faultproxy: --upstream \"%s\" is not a loopback HOST:PORT\n", up);
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    signal(SIGTERM, on_stop);
    signal(SIGINT, on_stop);
    p.listen_fd = listen_on(listen_addr, port_file);
    if (p.listen_fd < 0) {
        return 1;
    }
    run(&p);
    while (p.nrelays > 0) {
        relay_free(&p, p.nrelays - 1, 0);
    }
    close(p.listen_fd);
    fprintf(stderr, "sluice-faultproxy: event=stopped accepted=%llu resets=%llu\n", p.accepted,
            p.resets);
    return 0;
}
