/*
 * The C ABI client end to end, against real zlink-node processes (the
 * lobby game every zlink-node registers: LOGIN key 1 with a player name,
 * MOVE key 2 "<player>:<dx>,<dy>" answered with the new position, WHERE
 * key 3, a "tick <n>" push with key 100 on every fourth MOVE, a notice
 * push with key 101 to a session about to be replaced).
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
    o.login_payload = (const uint8_t *)player;
    o.login_payload_len = strlen(player);
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

static int payload_is(const zlink_event *ev, const char *text) {
    size_t l = strlen(text);
    return ev->payload_len == l && (l == 0 || memcmp(ev->payload, text, l) == 0);
}

static const char *payload_str(const zlink_event *ev) {
    static char s[256];
    size_t l = ev->payload_len < sizeof s - 1 ? ev->payload_len : sizeof s - 1;
    if (l > 0) memcpy(s, ev->payload, l);
    s[l] = 0;
    return s;
}

static void logged_in(zlink_client *c, int reconnect) {
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
    CHECK(payload_is(&ev, "welcome"), "login reply \"%s\"", payload_str(&ev));
}

/* Sends one request and waits for its reply; pushes meanwhile are counted. */
static void request(zlink_client *c, uint16_t key, const char *payload, zlink_event *ev,
                    int *pushes) {
    uint64_t id = 0;
    int r = zlink_request(c, key, (const uint8_t *)payload, strlen(payload), 0, &id);
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

static void expect_reply(zlink_client *c, uint16_t key, const char *payload, const char *want,
                         int *pushes) {
    zlink_event ev;
    request(c, key, payload, &ev, pushes);
    CHECK(ev.error_kind == 0, "%s: error %s/%s", payload, zlink_error_kind_name(ev.error_kind),
          zlink_reason_name(ev.error_reason));
    CHECK(payload_is(&ev, want), "%s: reply \"%s\", want \"%s\"", payload, payload_str(&ev), want);
}

/* ---- the tests --------------------------------------------------------- */

struct callback_seen {
    int calls;
    uint64_t id;
    char payload[64];
};

static void on_reply(void *user, const zlink_event *ev) {
    struct callback_seen *seen = user;
    seen->calls++;
    seen->id = ev->request_id;
    size_t l = ev->payload_len < sizeof seen->payload - 1 ? ev->payload_len : 0;
    if (l > 0) memcpy(seen->payload, ev->payload, l);
    seen->payload[l] = 0;
}

/* 1,000 MOVEs (32 in flight), each reply the position after it, and the
 * player's 250 "tick" pushes; a one-way send, a callback, a typed error. */
static void requests_and_pushes(struct node *n) {
    zlink_client *c = client_new(n->port, "c-player", 100, 5000);
    CHECK(zlink_state(c) == ZLINK_STATE_IDLE, "state before connect");
    CHECK(zlink_connect(c) == ZLINK_OK, "zlink_connect");
    logged_in(c, 0);
    CHECK(zlink_state(c) == ZLINK_STATE_OPEN, "state after the login");

    const char *move = "c-player:1,0";
    uint64_t first = 0;
    int sent = 0, replies = 0, pushes = 0;
    long last_tick = 0;
    while (replies < REQUESTS || pushes < REQUESTS / 4) {
        while (sent < REQUESTS && sent - replies < WINDOW) {
            uint64_t id = 0;
            int r = zlink_request(c, MOVE, (const uint8_t *)move, strlen(move), 0, &id);
            CHECK(r == ZLINK_OK, "zlink_request %d: %d", sent, r);
            if (sent == 0) first = id;
            CHECK(id == first + (uint64_t)sent, "request ids are consecutive");
            sent++;
        }
        zlink_event ev;
        next_event(c, &ev, WAIT_MS);
        if (ev.kind == ZLINK_EVENT_PUSH) {
            CHECK(ev.key == TICK, "push key %u", ev.key);
            long tick = atol(payload_str(&ev) + 5);
            CHECK(strncmp(payload_str(&ev), "tick ", 5) == 0 && tick == last_tick + 4,
                  "push \"%s\" after tick %ld", payload_str(&ev), last_tick);
            last_tick = tick;
            pushes++;
            continue;
        }
        CHECK(ev.kind == ZLINK_EVENT_REPLY, "unexpected event %u", ev.kind);
        CHECK(ev.error_kind == 0, "MOVE failed: %s/%s", zlink_error_kind_name(ev.error_kind),
              zlink_reason_name(ev.error_reason));
        /* One player, its MOVEs applied once and in order. */
        char want[32];
        snprintf(want, sizeof want, "%llu,0", (unsigned long long)(ev.request_id - first + 1));
        CHECK(payload_is(&ev, want), "reply \"%s\", want \"%s\"", payload_str(&ev), want);
        replies++;
    }
    CHECK(replies == REQUESTS && pushes == REQUESTS / 4, "%d replies, %d pushes", replies, pushes);

    /* A one-way send reaches the player before the WHERE behind it. */
    const char *step = "c-player:5,5";
    CHECK(zlink_send(c, MOVE, (const uint8_t *)step, strlen(step)) == ZLINK_OK, "zlink_send");
    expect_reply(c, WHERE, "c-player", "1005,5", NULL);

    /* A reply through a callback: inside zlink_poll, never an event. */
    struct callback_seen seen = {0};
    uint64_t id = 0;
    CHECK(zlink_request_cb(c, WHERE, (const uint8_t *)"c-player", 8, 0, on_reply, &seen, &id) ==
              ZLINK_OK,
          "zlink_request_cb");
    long long end = now_ms() + WAIT_MS;
    while (seen.calls == 0) {
        CHECK(now_ms() < end, "the callback was not called within %d ms", WAIT_MS);
        CHECK(zlink_wait(c, 100) == 0, "an event came instead of the callback");
    }
    CHECK(seen.calls == 1 && seen.id == id && strcmp(seen.payload, "1005,5") == 0,
          "callback: %d calls, id %llu, \"%s\"", seen.calls, (unsigned long long)seen.id,
          seen.payload);

    /* A packet key the lobby has no handler for: the typed error. */
    zlink_event ev;
    request(c, 999, "x", &ev, NULL);
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
    CHECK(zlink_request(c, WHERE, (const uint8_t *)"c-player", 8, 0, &id) == ZLINK_E_CLOSED,
          "a request after zlink_close");
    CHECK(zlink_client_free(c) == ZLINK_OK, "zlink_client_free");
    printf("ok: %d requests, %d pushes, a send, a callback, a typed error\n", REQUESTS + 3,
           pushes);
    passed++;
}

/* A second login of the player closes the first with Replaced: no reconnect. */
static void replaced_never_reconnects(struct node *n) {
    zlink_client *first = client_new(n->port, "c-dup", 1, 10);
    CHECK(zlink_connect(first) == ZLINK_OK, "zlink_connect");
    logged_in(first, 0);
    zlink_client *second = client_new(n->port, "c-dup", 1, 10);
    CHECK(zlink_connect(second) == ZLINK_OK, "zlink_connect");
    logged_in(second, 0);
    zlink_event ev;
    next_event(first, &ev, WAIT_MS);
    /* The lobby's duplicate-connection callback pushes a notice first. */
    CHECK(ev.kind == ZLINK_EVENT_PUSH && ev.key == REPLACED_NOTICE, "the replaced notice: event %u",
          ev.kind);
    next_event(first, &ev, WAIT_MS);
    CHECK(ev.kind == ZLINK_EVENT_CLOSED && ev.cause == ZLINK_CAUSE_SERVER_CLOSE &&
              strcmp(zlink_close_reason_name(ev.close_reason), "Replaced") == 0 &&
              ev.will_reconnect == 0,
          "first client: event %u cause %u reason %u", ev.kind, ev.cause, ev.close_reason);
    CHECK(zlink_state(first) == ZLINK_STATE_CLOSED, "Replaced closes for good");
    zlink_stats st;
    CHECK(zlink_get_stats(first, &st) == ZLINK_OK && st.connections == 1, "one connection");
    expect_reply(second, MOVE, "c-dup:2,2", "2,2", NULL);
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
    logged_in(c, 0);
    expect_reply(c, MOVE, "c-rc:1,0", "1,0", NULL);

    /* Frozen, so the next request is surely in flight when the node dies. */
    node_freeze(n);
    const char *big = "c-rc:1000,0";
    uint64_t id = 0;
    CHECK(zlink_request(c, MOVE, (const uint8_t *)big, strlen(big), 60000, &id) == ZLINK_OK,
          "zlink_request");
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
    CHECK(zlink_request(c, WHERE, (const uint8_t *)"c-rc", 4, 0, &id) == ZLINK_E_NOT_CONNECTED,
          "no request while reconnecting");

    node_start(n, bin, port);
    logged_in(c, 1);
    /* The restarted node has a new player at 0,0: had the in-flight MOVE been
     * replayed, it would have run before this one and the reply would be
     * "1001,0". */
    expect_reply(c, MOVE, "c-rc:1,0", "1,0", NULL);
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
    node_start(&node, argv[1], 0);
    requests_and_pushes(&node);
    replaced_never_reconnects(&node);
    reconnect_after_kill(&node, argv[1]);
    node_kill(&node, SIGTERM);
    printf("%d passed, 0 failed\n", passed);
    return 0;
}
