/*
 * The C ABI client end to end, against real zlink-node processes (the
 * lobby game every zlink-node registers, its messages MessagePack maps
 * (docs/wire.md "The lobby game's messages"): LOGIN key 1 {player}
 * answered {player}, MOVE key 2 {player, dx, dy} answered with the new
 * position {x, y}, WHERE key 3 {player}, a push {moves} with key 100 on
 * every fourth MOVE, a notice {player} with key 101 to a session about to
 * be replaced). The C ABI carries bytes only: the few MessagePack payloads
 * are written and read by the small helpers below, by hand.
 *
 *   cc -std=c11 -Wall -Wextra -Werror -I clients/c/include clients/c/tests/e2e.c \
 *      $CARGO_TARGET_DIR/debug/libzlink_c.a -lpthread -ldl -lm -o e2e
 *   ./e2e $CARGO_TARGET_DIR/debug/zlink-node
 *
 * .ci/run builds and runs it (docs/clients.md "C ABI"). It starts each node
 * itself (a config it writes: one shard, the embedded store) and waits on
 * what the node prints and on the client's events, never on a sleep; every
 * wait is bounded (WAIT_MS). It ends with "N passed, 0 failed".
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "zlink.h"

enum { LOGIN = 1, MOVE = 2, WHERE = 3, TICK = 100, REPLACED_NOTICE = 101 };
enum { WAIT_MS = 20000, REQUESTS = 1000, WINDOW = 32 };

static int passed;

/* ---- failing --------------------------------------------------------- */

struct node;
static struct node *live_nodes[4];

static void kill_live_nodes(void);

static void fail(int line, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "e2e.c:%d: FAILED: ", line);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    kill_live_nodes();
    printf("%d passed, 1 failed\n", passed);
    exit(1);
}

#define CHECK(cond, ...)                                                   \
    do {                                                                   \
        if (!(cond)) fail(__LINE__, __VA_ARGS__);                          \
    } while (0)

static long long now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- zlink-node processes ---------------------------------------------- */

struct node {
    pid_t pid;
    int out;  /* its stdout */
    int in;   /* its stdin: the console */
    int port;
    char buf[1 << 16];
    size_t len;
    char dir[64];
};

static void kill_live_nodes(void) {
    for (size_t i = 0; i < sizeof live_nodes / sizeof live_nodes[0]; i++) {
        if (live_nodes[i] != NULL && live_nodes[i]->pid > 0) {
            kill(live_nodes[i]->pid, SIGKILL);
            waitpid(live_nodes[i]->pid, NULL, 0);
            live_nodes[i]->pid = 0;
        }
    }
}

/* Reads one stdout line of the node into `line` within `ms`. */
static void node_line(struct node *n, char *line, size_t cap, int ms) {
    long long end = now_ms() + ms;
    for (;;) {
        char *nl = memchr(n->buf, '\n', n->len);
        if (nl != NULL) {
            size_t l = (size_t)(nl - n->buf);
            size_t c = l < cap - 1 ? l : cap - 1;
            memcpy(line, n->buf, c);
            line[c] = 0;
            memmove(n->buf, nl + 1, n->len - l - 1);
            n->len -= l + 1;
            return;
        }
        long long left = end - now_ms();
        CHECK(left > 0, "zlink-node printed no line within %d ms", ms);
        CHECK(n->len < sizeof n->buf, "a line longer than %zu bytes", sizeof n->buf);
        struct pollfd p = {.fd = n->out, .events = POLLIN};
        int r = poll(&p, 1, (int)left);
        if (r < 0 && errno == EINTR) continue;
        CHECK(r >= 0, "poll: %s", strerror(errno));
        if (r == 0) continue;
        ssize_t got = read(n->out, n->buf + n->len, sizeof n->buf - n->len);
        CHECK(got > 0, "zlink-node's stdout ended (it exited)");
        n->len += (size_t)got;
    }
}

/* Starts zlink-node on `port` (0: any) and waits for its ready line. */
static void node_start(struct node *n, const char *bin, int port) {
    memset(n, 0, sizeof *n);
    strcpy(n->dir, "/tmp/zlink-c-e2e-XXXXXX");
    CHECK(mkdtemp(n->dir) != NULL, "mkdtemp: %s", strerror(errno));
    char path[128];
    snprintf(path, sizeof path, "%s/node.toml", n->dir);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL, "fopen %s: %s", path, strerror(errno));
    fprintf(f,
            "[node]\nrid = 1\nmeshes = [\"lobby\"]\nlog_level = \"warn\"\nshards = 1\n"
            "pin_cores = false\n\n[listen]\nstream = \"127.0.0.1:%d\"\n\n"
            "[store]\nurl = \"embedded\"\n\n[timeouts]\nshutdown_deadline_ms = 1000\n",
            port);
    fclose(f);
    int out[2], in[2];
    CHECK(pipe(out) == 0 && pipe(in) == 0, "pipe: %s", strerror(errno));
    pid_t pid = fork();
    CHECK(pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0) {
        dup2(out[1], 1);
        dup2(in[0], 0);
        close(out[0]);
        close(out[1]);
        close(in[0]);
        close(in[1]);
        execl(bin, bin, "--config", path, "--console", (char *)NULL);
        fprintf(stderr, "exec %s: %s\n", bin, strerror(errno));
        _exit(127);
    }
    close(out[1]);
    close(in[0]);
    n->pid = pid;
    n->out = out[0];
    n->in = in[1];
    for (size_t i = 0; i < sizeof live_nodes / sizeof live_nodes[0]; i++) {
        if (live_nodes[i] == NULL || live_nodes[i] == n) {
            live_nodes[i] = n;
            break;
        }
    }
    char line[1024];
    for (;;) {
        node_line(n, line, sizeof line, WAIT_MS);
        if (strncmp(line, "zlink-node ready: ", 18) == 0) break;
    }
    const char *s = strstr(line, " stream=127.0.0.1:");
    CHECK(s != NULL, "no stream address in the ready line: %s", line);
    n->port = atoi(s + strlen(" stream=127.0.0.1:"));
    CHECK(n->port > 0, "a bad port in the ready line: %s", line);
}

/* The node's `moves` counter, read through its console. */
static long node_moves(struct node *n) {
    CHECK(write(n->in, "counters\n", 9) == 9, "write to the console: %s", strerror(errno));
    char line[8192];
    for (;;) {
        node_line(n, line, sizeof line, WAIT_MS);
        if (strncmp(line, "zlink-node control: actors=", 27) == 0) break;
    }
    const char *m = strstr(line, " moves=");
    return m == NULL ? 0 : atol(m + 7);
}

/* SIGSTOP, and wait until the whole node is stopped: it answers nothing. */
static void node_freeze(struct node *n) {
    CHECK(kill(n->pid, SIGSTOP) == 0, "SIGSTOP: %s", strerror(errno));
    int status = 0;
    CHECK(waitpid(n->pid, &status, WUNTRACED) == n->pid && WIFSTOPPED(status),
          "zlink-node did not stop");
}

static void node_kill(struct node *n, int sig) {
    CHECK(kill(n->pid, sig) == 0, "kill: %s", strerror(errno));
    if (sig == SIGTERM) kill(n->pid, SIGCONT);
    int status = 0;
    for (;;) {
        pid_t r = waitpid(n->pid, &status, 0);
        CHECK(r == n->pid, "waitpid: %s", strerror(errno));
        if (WIFEXITED(status) || WIFSIGNALED(status)) break;
    }
    if (sig == SIGKILL) CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "not killed");
    n->pid = 0;
    close(n->out);
    close(n->in);
}

/* ---- MessagePack, by hand ----------------------------------------------- */

/* A payload being written: the lobby's messages are maps of a few short
 * fields, far below this size. */
struct mp {
    uint8_t b[256];
    size_t len;
};

static void mp_byte(struct mp *m, uint8_t v) {
    CHECK(m->len < sizeof m->b, "a MessagePack payload over %zu bytes", sizeof m->b);
    m->b[m->len++] = v;
}

static void mp_be(struct mp *m, uint64_t v, int bytes) {
    for (int i = bytes - 1; i >= 0; i--) mp_byte(m, (uint8_t)(v >> (8 * i)));
}

/* A map header of n entries (fixmap: n <= 15). */
static void mp_map(struct mp *m, unsigned n) {
    CHECK(n <= 15, "a map of %u entries", n);
    mp_byte(m, (uint8_t)(0x80 | n));
}

/* A string (fixstr, or str8 up to 255 bytes). */
static void mp_str(struct mp *m, const char *s) {
    size_t l = strlen(s);
    CHECK(l <= 255, "a string of %zu bytes", l);
    if (l <= 31) {
        mp_byte(m, (uint8_t)(0xa0 | l));
    } else {
        mp_byte(m, 0xd9);
        mp_byte(m, (uint8_t)l);
    }
    for (size_t i = 0; i < l; i++) mp_byte(m, (uint8_t)s[i]);
}

/* An integer in its smallest form, as rmp-serde writes one. */
static void mp_int(struct mp *m, long long v) {
    if (v >= 0) {
        uint64_t u = (uint64_t)v;
        if (u < 128) mp_byte(m, (uint8_t)u);
        else if (u < 256) (mp_byte(m, 0xcc), mp_be(m, u, 1));
        else if (u < 65536) (mp_byte(m, 0xcd), mp_be(m, u, 2));
        else if (u < 4294967296ULL) (mp_byte(m, 0xce), mp_be(m, u, 4));
        else (mp_byte(m, 0xcf), mp_be(m, u, 8));
    } else if (v >= -32) {
        mp_byte(m, (uint8_t)(int8_t)v);
    } else if (v >= -128) {
        (mp_byte(m, 0xd0), mp_be(m, (uint64_t)v, 1));
    } else if (v >= -32768) {
        (mp_byte(m, 0xd1), mp_be(m, (uint64_t)v, 2));
    } else if (v >= -2147483648LL) {
        (mp_byte(m, 0xd2), mp_be(m, (uint64_t)v, 4));
    } else {
        (mp_byte(m, 0xd3), mp_be(m, (uint64_t)v, 8));
    }
}

/* LOGIN, WHERE: {player}. */
static struct mp msg_player(const char *player) {
    struct mp m = {.len = 0};
    mp_map(&m, 1);
    mp_str(&m, "player");
    mp_str(&m, player);
    return m;
}

/* MOVE: {player, dx, dy}. */
static struct mp msg_move(const char *player, long long dx, long long dy) {
    struct mp m = {.len = 0};
    mp_map(&m, 3);
    mp_str(&m, "player");
    mp_str(&m, player);
    mp_str(&m, "dx");
    mp_int(&m, dx);
    mp_str(&m, "dy");
    mp_int(&m, dy);
    return m;
}

/* Reading: a cursor over a payload; each read returns 0 when the bytes
 * are not what is asked for (never reads past the end). */
struct mp_in {
    const uint8_t *p;
    size_t len, at;
};

static int mp_get(struct mp_in *r, uint8_t *v) {
    if (r->at >= r->len) return 0;
    *v = r->p[r->at++];
    return 1;
}

static int mp_get_be(struct mp_in *r, int bytes, uint64_t *v) {
    *v = 0;
    for (int i = 0; i < bytes; i++) {
        uint8_t b;
        if (!mp_get(r, &b)) return 0;
        *v = *v << 8 | b;
    }
    return 1;
}

/* A map header (fixmap, map16). */
static int mp_read_map(struct mp_in *r, size_t *n) {
    uint8_t b;
    uint64_t v;
    if (!mp_get(r, &b)) return 0;
    if ((b & 0xf0) == 0x80) {
        *n = b & 0x0f;
        return 1;
    }
    if (b == 0xde && mp_get_be(r, 2, &v)) {
        *n = (size_t)v;
        return 1;
    }
    return 0;
}

/* A string: where it starts in the payload and its length. */
static int mp_read_str(struct mp_in *r, const uint8_t **s, size_t *l) {
    uint8_t b;
    uint64_t v;
    if (!mp_get(r, &b)) return 0;
    if ((b & 0xe0) == 0xa0) v = b & 0x1f;
    else if (b == 0xd9) { if (!mp_get_be(r, 1, &v)) return 0; }
    else if (b == 0xda) { if (!mp_get_be(r, 2, &v)) return 0; }
    else return 0;
    if (v > r->len - r->at) return 0;
    *s = r->p + r->at;
    *l = (size_t)v;
    r->at += (size_t)v;
    return 1;
}

/* An integer of any form that fits a long long. */
static int mp_read_int(struct mp_in *r, long long *out) {
    uint8_t b;
    uint64_t v;
    if (!mp_get(r, &b)) return 0;
    if (b <= 0x7f) return (*out = b), 1;
    if (b >= 0xe0) return (*out = (int8_t)b), 1;
    switch (b) {
    case 0xcc: if (!mp_get_be(r, 1, &v)) return 0; *out = (long long)v; return 1;
    case 0xcd: if (!mp_get_be(r, 2, &v)) return 0; *out = (long long)v; return 1;
    case 0xce: if (!mp_get_be(r, 4, &v)) return 0; *out = (long long)v; return 1;
    case 0xcf: if (!mp_get_be(r, 8, &v) || v > (uint64_t)INT64_MAX) return 0; *out = (long long)v; return 1;
    case 0xd0: if (!mp_get_be(r, 1, &v)) return 0; *out = (int8_t)v; return 1;
    case 0xd1: if (!mp_get_be(r, 2, &v)) return 0; *out = (int16_t)v; return 1;
    case 0xd2: if (!mp_get_be(r, 4, &v)) return 0; *out = (int32_t)v; return 1;
    case 0xd3: if (!mp_get_be(r, 8, &v)) return 0; *out = (int64_t)v; return 1;
    default: return 0;
    }
}

static int mp_key_is(const uint8_t *s, size_t l, const char *name) {
    return l == strlen(name) && memcmp(s, name, l) == 0;
}

/* A map of integer fields, each of `names` once and no other, and nothing
 * after it: the Position {x, y} of a MOVE or WHERE reply, the Tick
 * {moves} push. 1 when it is one. */
static int mp_read_ints(const uint8_t *p, size_t len, size_t count, const char *const *names,
                        long long *values) {
    struct mp_in r = {.p = p, .len = len, .at = 0};
    size_t n;
    unsigned seen = 0;
    if (p == NULL || !mp_read_map(&r, &n) || n != count) return 0;
    for (size_t i = 0; i < n; i++) {
        const uint8_t *key;
        size_t kl;
        if (!mp_read_str(&r, &key, &kl)) return 0;
        size_t f = 0;
        while (f < count && !mp_key_is(key, kl, names[f])) f++;
        if (f == count || (seen & (1u << f)) || !mp_read_int(&r, &values[f])) return 0;
        seen |= 1u << f;
    }
    return r.at == r.len;
}

/* Whether a payload is the Position {x, y}. */
static int is_position(const uint8_t *p, size_t len, long long x, long long y) {
    static const char *const names[] = {"x", "y"};
    long long v[2];
    return mp_read_ints(p, len, 2, names, v) && v[0] == x && v[1] == y;
}

/* The move count of a Tick push {moves}; -1 when it is none. */
static long long tick_moves(const zlink_event *ev) {
    static const char *const names[] = {"moves"};
    long long v;
    return mp_read_ints(ev->payload, ev->payload_len, 1, names, &v) ? v : -1;
}

/* Whether a payload is {player: <player>}: the Welcome reply and the
 * Replaced notice. */
static int is_player(const uint8_t *p, size_t len, const char *player) {
    struct mp_in r = {.p = p, .len = len, .at = 0};
    size_t n;
    const uint8_t *s;
    size_t l;
    return p != NULL && mp_read_map(&r, &n) && n == 1 && mp_read_str(&r, &s, &l) &&
           mp_key_is(s, l, "player") && mp_read_str(&r, &s, &l) && mp_key_is(s, l, player) &&
           r.at == r.len;
}

/* A payload as hex, for a failure's message. */
static const char *hex(const uint8_t *p, size_t len) {
    static char s[2 * 64 + 4];
    size_t n = len < 64 ? len : 64;
    for (size_t i = 0; i < n; i++) snprintf(s + 2 * i, 3, "%02x", p[i]);
    strcpy(s + 2 * n, len > n ? "..." : "");
    return s;
}

/* ---- the client -------------------------------------------------------- */

static zlink_client *client_new(int port, const char *player, uint32_t initial_ms,
                                uint32_t max_ms) {
    zlink_options o;
    CHECK(zlink_options_default(&o) == ZLINK_OK, "zlink_options_default");
    char address[32];
    snprintf(address, sizeof address, "127.0.0.1:%d", port);
    o.address = address;
    o.has_login = 1;
    o.login_key = LOGIN;
    struct mp login = msg_player(player); /* copied by zlink_client_new */
    o.login_payload = login.b;
    o.login_payload_len = login.len;
    o.request_deadline_ms = 5000;
    o.reconnect_initial_ms = initial_ms;
    o.reconnect_max_ms = max_ms;
    zlink_client *c = zlink_client_new(&o);
    CHECK(c != NULL, "zlink_client_new refused the options");
    return c;
}

/* The next event within `ms` (zlink_wait blocks on the socket or timer). */
static void next_event(zlink_client *c, zlink_event *ev, int ms) {
    long long end = now_ms() + ms;
    for (;;) {
        int got = zlink_next_event(c, ev);
        CHECK(got >= 0, "zlink_next_event: %d", got);
        if (got == 1) return;
        long long left = end - now_ms();
        CHECK(left > 0, "no event within %d ms", ms);
        int r = zlink_wait(c, (uint32_t)(left < 100 ? left : 100));
        CHECK(r >= 0, "zlink_wait: %d", r);
    }
}

static void logged_in(zlink_client *c, const char *player, int reconnect) {
    zlink_event ev;
    for (;;) {
        next_event(c, &ev, WAIT_MS);
        /* While the node is down: scheduled and failed attempts. */
        if (reconnect && (ev.kind == ZLINK_EVENT_RECONNECTING ||
                          ev.kind == ZLINK_EVENT_RECONNECT_FAILED))
            continue;
        break;
    }
    CHECK(ev.kind == ZLINK_EVENT_LOGGED_IN, "expected LOGGED_IN, got event %u (cause %u)",
          ev.kind, ev.cause);
    CHECK(ev.reconnect == reconnect, "LOGGED_IN reconnect=%u", ev.reconnect);
    CHECK(is_player(ev.payload, ev.payload_len, player), "login reply %s, want {player: %s}",
          hex(ev.payload, ev.payload_len), player);
}

/* Sends one request and waits for its reply; pushes meanwhile are counted. */
static void request(zlink_client *c, uint16_t key, const struct mp *payload, zlink_event *ev,
                    int *pushes) {
    uint64_t id = 0;
    int r = zlink_request(c, key, payload->b, payload->len, 0, &id);
    CHECK(r == ZLINK_OK && id > 0, "zlink_request: %d", r);
    for (;;) {
        next_event(c, ev, WAIT_MS);
        if (ev->kind == ZLINK_EVENT_PUSH && pushes != NULL) {
            (*pushes)++;
            continue;
        }
        break;
    }
    CHECK(ev->kind == ZLINK_EVENT_REPLY && ev->request_id == id,
          "expected the REPLY of %llu, got event %u", (unsigned long long)id, ev->kind);
}

/* Sends a MOVE or WHERE and checks that the reply is the Position {x, y}. */
static void expect_position(zlink_client *c, uint16_t key, struct mp payload, long long x,
                            long long y) {
    zlink_event ev;
    request(c, key, &payload, &ev, NULL);
    CHECK(ev.error_kind == 0, "key %u: error %s/%s", key, zlink_error_kind_name(ev.error_kind),
          zlink_reason_name(ev.error_reason));
    CHECK(is_position(ev.payload, ev.payload_len, x, y), "key %u: reply %s, want {x: %lld, y: %lld}",
          key, hex(ev.payload, ev.payload_len), x, y);
}

/* ---- the tests --------------------------------------------------------- */

struct callback_seen {
    int calls;
    uint64_t id;
    uint8_t payload[64];
    size_t len;
};

static void on_reply(void *user, const zlink_event *ev) {
    struct callback_seen *seen = user;
    seen->calls++;
    seen->id = ev->request_id;
    seen->len = ev->payload_len <= sizeof seen->payload ? ev->payload_len : 0;
    if (seen->len > 0) memcpy(seen->payload, ev->payload, seen->len);
}

/* 1,000 MOVEs (32 in flight), each reply the position after it, and the
 * player's 250 "tick" pushes; a one-way send, a callback, a typed error. */
static void requests_and_pushes(struct node *n) {
    zlink_client *c = client_new(n->port, "c-player", 100, 5000);
    CHECK(zlink_state(c) == ZLINK_STATE_IDLE, "state before connect");
    CHECK(zlink_connect(c) == ZLINK_OK, "zlink_connect");
    logged_in(c, "c-player", 0);
    CHECK(zlink_state(c) == ZLINK_STATE_OPEN, "state after the login");

    const struct mp move = msg_move("c-player", 1, 0);
    uint64_t first = 0;
    int sent = 0, replies = 0, pushes = 0;
    long long last_tick = 0;
    while (replies < REQUESTS || pushes < REQUESTS / 4) {
        while (sent < REQUESTS && sent - replies < WINDOW) {
            uint64_t id = 0;
            int r = zlink_request(c, MOVE, move.b, move.len, 0, &id);
            CHECK(r == ZLINK_OK, "zlink_request %d: %d", sent, r);
            if (sent == 0) first = id;
            CHECK(id == first + (uint64_t)sent, "request ids are consecutive");
            sent++;
        }
        zlink_event ev;
        next_event(c, &ev, WAIT_MS);
        if (ev.kind == ZLINK_EVENT_PUSH) {
            CHECK(ev.key == TICK, "push key %u", ev.key);
            long long tick = tick_moves(&ev);
            CHECK(tick == last_tick + 4, "push %s after tick {moves: %lld}",
                  hex(ev.payload, ev.payload_len), last_tick);
            last_tick = tick;
            pushes++;
            continue;
        }
        CHECK(ev.kind == ZLINK_EVENT_REPLY, "unexpected event %u", ev.kind);
        CHECK(ev.error_kind == 0, "MOVE failed: %s/%s", zlink_error_kind_name(ev.error_kind),
              zlink_reason_name(ev.error_reason));
        /* One player, its MOVEs applied once and in order. */
        long long want = (long long)(ev.request_id - first + 1);
        CHECK(is_position(ev.payload, ev.payload_len, want, 0), "reply %s, want {x: %lld, y: 0}",
              hex(ev.payload, ev.payload_len), want);
        replies++;
    }
    CHECK(replies == REQUESTS && pushes == REQUESTS / 4, "%d replies, %d pushes", replies, pushes);

    /* A one-way send reaches the player before the WHERE behind it. */
    const struct mp step = msg_move("c-player", 5, 5);
    CHECK(zlink_send(c, MOVE, step.b, step.len) == ZLINK_OK, "zlink_send");
    expect_position(c, WHERE, msg_player("c-player"), 1005, 5);

    /* A reply through a callback: inside zlink_poll, never an event. */
    struct callback_seen seen = {0};
    uint64_t id = 0;
    const struct mp where = msg_player("c-player");
    CHECK(zlink_request_cb(c, WHERE, where.b, where.len, 0, on_reply, &seen, &id) == ZLINK_OK,
          "zlink_request_cb");
    long long end = now_ms() + WAIT_MS;
    while (seen.calls == 0) {
        CHECK(now_ms() < end, "the callback was not called within %d ms", WAIT_MS);
        CHECK(zlink_wait(c, 100) == 0, "an event came instead of the callback");
    }
    CHECK(seen.calls == 1 && seen.id == id && is_position(seen.payload, seen.len, 1005, 5),
          "callback: %d calls, id %llu, %s", seen.calls, (unsigned long long)seen.id,
          hex(seen.payload, seen.len));

    /* A packet key the lobby has no handler for: the typed error. */
    zlink_event ev;
    request(c, 999, &where, &ev, NULL);
    CHECK(ev.error_kind == ZLINK_KIND_NOT_FOUND && ev.remote == 1 && ev.outcome_unknown == 0 &&
              strcmp(zlink_reason_name(ev.error_reason), "NoPacketHandler") == 0,
          "unknown key: %s/%s", zlink_error_kind_name(ev.error_kind),
          zlink_reason_name(ev.error_reason));

    /* Refused calls send nothing and return at once. */
    CHECK(zlink_request(c, MOVE, NULL, 3, 0, &id) == ZLINK_E_NULL, "null payload");
    CHECK(zlink_request(NULL, MOVE, NULL, 0, 0, &id) == ZLINK_E_NULL, "null client");

    CHECK(zlink_close(c) == ZLINK_OK, "zlink_close");
    next_event(c, &ev, WAIT_MS);
    CHECK(ev.kind == ZLINK_EVENT_CLOSED && ev.cause == ZLINK_CAUSE_CLIENT_CLOSED &&
              ev.will_reconnect == 0,
          "after zlink_close: event %u cause %u", ev.kind, ev.cause);
    CHECK(zlink_request(c, WHERE, where.b, where.len, 0, &id) == ZLINK_E_CLOSED,
          "a request after zlink_close");
    CHECK(zlink_client_free(c) == ZLINK_OK, "zlink_client_free");
    printf("ok: %d requests, %d pushes, a send, a callback, a typed error\n", REQUESTS + 3,
           pushes);
    passed++;
}

/* The hand-written MessagePack is what rmp-serde writes for the lobby's
 * types (clients/ts/test/fixtures/msgpack.txt has "move": {dx: 1, dy: -1}),
 * and its reader refuses what is not a Position. */
static void messagepack_by_hand(void) {
    struct mp m = msg_move("p", 1, -1);
    static const uint8_t move[] = {0x83, 0xa6, 'p', 'l', 'a', 'y', 'e', 'r', 0xa1, 'p',
                                   0xa2, 'd',  'x', 0x01, 0xa2, 'd', 'y', 0xff};
    CHECK(m.len == sizeof move && memcmp(m.b, move, sizeof move) == 0, "MOVE %s",
          hex(m.b, m.len));
    struct mp ints = {.len = 0};
    const long long values[] = {127, 128, 65535, 65536, 4294967296LL, -32, -33, -32769,
                                -2147483649LL};
    for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) mp_int(&ints, values[i]);
    CHECK(strcmp(hex(ints.b, ints.len), "7fcc80cdffffce00010000cf0000000100000000e0d0dfd2ffff7fff"
                                        "d3ffffffff7fffffff") == 0,
          "integers %s", hex(ints.b, ints.len));
    struct mp_in r = {.p = ints.b, .len = ints.len, .at = 0};
    for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) {
        long long v;
        CHECK(mp_read_int(&r, &v) && v == values[i], "integer %zu read back", i);
    }
    static const uint8_t position[] = {0x82, 0xa1, 'x', 0xd3, 0xff, 0xff, 0xff, 0xff, 0xff,
                                       0xff, 0xff, 0xfe, 0xa1, 'y', 0xcd, 0x01, 0x2c};
    CHECK(is_position(position, sizeof position, -2, 300), "a Position read");
    for (size_t cut = 0; cut < sizeof position; cut++)
        CHECK(!is_position(position, cut, -2, 300), "a Position cut at %zu read", cut);
    static const uint8_t repeated[] = {0x82, 0xa1, 'x', 0x01, 0xa1, 'x', 0x02};
    CHECK(!is_position(repeated, sizeof repeated, 1, 2), "a repeated field read");
    printf("ok: MessagePack by hand: the lobby's bytes, integers, a Position and its prefixes\n");
    passed++;
}

/* A second login of the player closes the first with Replaced: no reconnect. */
static void replaced_never_reconnects(struct node *n) {
    zlink_client *first = client_new(n->port, "c-dup", 1, 10);
    CHECK(zlink_connect(first) == ZLINK_OK, "zlink_connect");
    logged_in(first, "c-dup", 0);
    zlink_client *second = client_new(n->port, "c-dup", 1, 10);
    CHECK(zlink_connect(second) == ZLINK_OK, "zlink_connect");
    logged_in(second, "c-dup", 0);
    zlink_event ev;
    next_event(first, &ev, WAIT_MS);
    /* The lobby's duplicate-connection callback pushes a notice first. */
    CHECK(ev.kind == ZLINK_EVENT_PUSH && ev.key == REPLACED_NOTICE &&
              is_player(ev.payload, ev.payload_len, "c-dup"),
          "the replaced notice: event %u key %u %s", ev.kind, ev.key,
          hex(ev.payload, ev.payload_len));
    next_event(first, &ev, WAIT_MS);
    CHECK(ev.kind == ZLINK_EVENT_CLOSED && ev.cause == ZLINK_CAUSE_SERVER_CLOSE &&
              strcmp(zlink_close_reason_name(ev.close_reason), "Replaced") == 0 &&
              ev.will_reconnect == 0,
          "first client: event %u cause %u reason %u", ev.kind, ev.cause, ev.close_reason);
    CHECK(zlink_state(first) == ZLINK_STATE_CLOSED, "Replaced closes for good");
    zlink_stats st;
    CHECK(zlink_get_stats(first, &st) == ZLINK_OK && st.connections == 1, "one connection");
    expect_position(second, MOVE, msg_move("c-dup", 2, 2), 2, 2);
    zlink_client_free(first);
    zlink_client_free(second);
    printf("ok: Replaced closes for good\n");
    passed++;
}

/* kill -9 under the client with a request in flight; restart; the client
 * logs in again by itself and never replays the request. */
static void reconnect_after_kill(struct node *n, const char *bin) {
    zlink_client *c = client_new(n->port, "c-rc", 50, 400);
    CHECK(zlink_connect(c) == ZLINK_OK, "zlink_connect");
    logged_in(c, "c-rc", 0);
    expect_position(c, MOVE, msg_move("c-rc", 1, 0), 1, 0);

    /* Frozen, so the next request is surely in flight when the node dies. */
    node_freeze(n);
    const struct mp big = msg_move("c-rc", 1000, 0);
    uint64_t id = 0;
    CHECK(zlink_request(c, MOVE, big.b, big.len, 60000, &id) == ZLINK_OK, "zlink_request");
    zlink_stats st;
    long long end = now_ms() + WAIT_MS;
    for (;;) {
        CHECK(zlink_get_stats(c, &st) == ZLINK_OK, "zlink_get_stats");
        if (st.unsent == 0) break; /* written: the request is on the wire */
        CHECK(now_ms() < end, "the request was not written within %d ms", WAIT_MS);
        zlink_wait(c, 100);
    }
    CHECK(st.in_flight == 1, "%llu in flight", (unsigned long long)st.in_flight);
    int port = n->port;
    node_kill(n, SIGKILL);

    zlink_event ev;
    next_event(c, &ev, WAIT_MS);
    CHECK(ev.kind == ZLINK_EVENT_REPLY && ev.request_id == id &&
              ev.error_kind == ZLINK_KIND_UNAVAILABLE &&
              ev.error_reason == ZLINK_REASON_OUTCOME_UNKNOWN && ev.outcome_unknown == 1 &&
              ev.remote == 0,
          "the in-flight request: event %u kind %u reason %u", ev.kind, ev.error_kind,
          ev.error_reason);
    next_event(c, &ev, WAIT_MS);
    CHECK(ev.kind == ZLINK_EVENT_CLOSED && ev.cause == ZLINK_CAUSE_CONNECTION_LOST &&
              ev.will_reconnect == 1,
          "after the kill: event %u cause %u", ev.kind, ev.cause);
    next_event(c, &ev, WAIT_MS);
    CHECK(ev.kind == ZLINK_EVENT_RECONNECTING && ev.attempt == 1, "RECONNECTING 1: event %u",
          ev.kind);
    /* With the node down, the client keeps trying by itself. */
    next_event(c, &ev, WAIT_MS);
    CHECK(ev.kind == ZLINK_EVENT_RECONNECT_FAILED && ev.cause == ZLINK_CAUSE_CONNECT_FAILED,
          "a failed attempt while down: event %u cause %u", ev.kind, ev.cause);
    CHECK(zlink_state(c) == ZLINK_STATE_RECONNECTING, "reconnecting");
    const struct mp where = msg_player("c-rc");
    CHECK(zlink_request(c, WHERE, where.b, where.len, 0, &id) == ZLINK_E_NOT_CONNECTED,
          "no request while reconnecting");

    node_start(n, bin, port);
    logged_in(c, "c-rc", 1);
    /* The restarted node has a new player at 0,0: had the in-flight MOVE been
     * replayed, it would have run before this one and the reply would be
     * {x: 1001, y: 0}. */
    expect_position(c, MOVE, msg_move("c-rc", 1, 0), 1, 0);
    long moves = node_moves(n);
    CHECK(moves == 1, "the restarted node ran %ld MOVEs", moves);
    /* And on the wire: 2 logins and 3 MOVEs, the one of unknown outcome once. */
    CHECK(zlink_get_stats(c, &st) == ZLINK_OK, "zlink_get_stats");
    CHECK(st.requests_sent == 5 && st.reconnects == 1 && st.connections == 2,
          "%llu requests sent, %llu reconnects, %llu connections",
          (unsigned long long)st.requests_sent, (unsigned long long)st.reconnects,
          (unsigned long long)st.connections);
    zlink_client_free(c);
    printf("ok: kill -9 and restart: OutcomeUnknown, not replayed, logged in again\n");
    passed++;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s <zlink-node binary>\n", argv[0]);
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    static struct node node;
    messagepack_by_hand();
    node_start(&node, argv[1], 0);
    requests_and_pushes(&node);
    replaced_never_reconnects(&node);
    reconnect_after_kill(&node, argv[1]);
    node_kill(&node, SIGTERM);
    printf("%d passed, 0 failed\n", passed);
    return 0;
}
