// SPDX-License-Identifier: MIT
/* ibvfd local API server: Unix socket, SO_PEERCRED, line-framed JSON-RPC 2.0. */
#include "api_server.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <ibvf/api.h>

#include "err.h"
#include "log.h"
#include "statedir.h"

struct conn;

/* One request being executed; outlives its connection if the client leaves. */
struct req {
	struct conn *c; /* NULL once the connection is gone */
	json_t *id;
	bool notification; /* no "id": the spec forbids an answer */
};

struct conn {
	struct ibvf_api_server *s;
	int fd;
	struct ibvf_watch *w;
	uid_t uid;
	pid_t pid;
	char *in; /* unparsed input */
	size_t in_len, in_cap;
	bool skipping; /* discarding the rest of an over-long line */
	char *out;     /* unsent output */
	size_t out_len, out_cap, out_off;
	size_t inflight;
	int busy;	/* inside a read/dispatch: replies must not close it */
	bool rd_closed; /* peer shut down its write side */
	bool dead;
	struct req **reqs; /* executing requests (to detach on close) */
	size_t n_reqs, cap_reqs;
	long long last_io;	    /* ms: accepted, last complete request line or bytes sent */
	long long line_start;	    /* ms: first byte of the incomplete line; 0: none */
	struct conn *next, **pprev; /* s->conns; pprev: O(1) unlink at close */
};

struct ibvf_api_server {
	struct ibvf_api_server_opts o;
	char path[PATH_MAX];
	int lfd;
	struct ibvf_watch *lw;
	uid_t uids[16];
	size_t n_uids;
	struct conn *conns;
	size_t n_conns;
	struct ibvf_timer *sweep;  /* idle / incomplete-line timeouts */
	struct ibvf_timer *resume; /* re-arms the listener after EMFILE */
	struct ibvf_api_server_stats st;
	long long refuse_logged;		     /* ms: last "refused" warning */
	unsigned long long refuse_quiet, line_quiet; /* not logged since */
	long long line_logged;
};

/* At most one message a second for a flood of one kind; @quiet counts the others. */
static bool log_allowed(long long *last, unsigned long long *quiet, unsigned long long *n)
{
	long long now = ibvf_mono_ms();

	if (*last && now - *last < 1000) {
		(*quiet)++;
		return false;
	}
	*last = now;
	*n = *quiet;
	*quiet = 0;
	return true;
}

static void conn_update(struct conn *c);
static void conn_close(struct conn *c);

static size_t out_pending(const struct conn *c)
{
	return c->out_len - c->out_off;
}

/*
 * Whether more requests may be taken from @c: not while max_inflight execute,
 * nor while more than max_out answer bytes wait for the client to read them
 * (a client that pipelines without reading would otherwise grow the queue
 * without bound). Reading resumes when answers went out.
 */
static bool can_take(const struct conn *c)
{
	return !c->dead && c->inflight < c->s->o.max_inflight && out_pending(c) < c->s->o.max_out;
}

/* ------------------------------------------------------------ output -- */

/* Keep only what is unsent: the buffer stays ~ the queue. */
static void out_compact(struct conn *c)
{
	if (c->out_off) {
		memmove(c->out, c->out + c->out_off, out_pending(c));
		c->out_len -= c->out_off;
		c->out_off = 0;
	}
}

static int out_append(struct conn *c, const char *data, size_t len)
{
	out_compact(c);
	if (c->out_len + len + 1 > c->out_cap) {
		size_t cap = c->out_cap ? c->out_cap : 4096;
		char *p;

		while (cap < c->out_len + len + 1)
			cap *= 2;
		p = realloc(c->out, cap);
		if (!p)
			return -ENOMEM;
		c->out = p;
		c->out_cap = cap;
	}
	memcpy(c->out + c->out_len, data, len);
	c->out_len += len;
	if (out_pending(c) > c->s->st.out_peak)
		c->s->st.out_peak = out_pending(c);
	return 0;
}

static void flush_out(struct conn *c)
{
	while (c->out_off < c->out_len) {
		ssize_t n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off,
				 MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n > 0) {
			c->out_off += (size_t)n;
			c->last_io = ibvf_mono_ms();
			continue;
		}
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		log_debug("api: peer pid %d: send: %s", (int)c->pid, strerror(errno));
		c->dead = true;
		return;
	}
	c->out_off = c->out_len = 0;
	if (c->out_cap > 65536) { /* a burst is over: give the memory back */
		free(c->out);
		c->out = NULL;
		c->out_cap = 0;
	}
}

/* json_dump_callback() into a connection's output, the line limit kept. */
struct dump_out {
	struct conn *c;
	size_t start; /* c->out_len before the message */
	bool over;    /* longer than the line limit */
};

static int dump_out_cb(const char *buf, size_t size, void *data)
{
	struct dump_out *d = data;

	if (d->c->out_len - d->start + size + 1 > d->c->s->o.max_line) {
		d->over = true;
		return -1;
	}
	return out_append(d->c, buf, size) ? -1 : 0;
}

/*
 * Send one JSON-RPC response object (stolen). Reals (the replies' "timing"
 * in ms, microsecond resolution) get 9 significant digits, not 17. The text
 * goes straight into the output buffer (json_dump_callback()): not a
 * json_dumps() string grown by doubling, copied once more and freed.
 */
static void send_msg(struct conn *c, json_t *msg)
{
	struct dump_out d = {.c = c};
	int ret;

	out_compact(c); /* no memmove under the dump: d.start stays valid */
	d.start = c->out_len;
	ret = json_dump_callback(msg, dump_out_cb, &d, JSON_COMPACT | JSON_REAL_PRECISION(9));
	json_decref(msg);
	if (ret && d.over) {
		c->out_len = d.start; /* drop the part written */
		msg = json_pack("{s:s,s:{s:i,s:s},s:n}", "jsonrpc", "2.0", "error", "code",
				IBVF_RPC_INTERNAL_ERROR, "message",
				"response larger than the line limit; narrow the request (e.g. "
				"list with limit/offset)",
				"id");
		ret = msg ? json_dump_callback(msg, dump_out_cb, &d, JSON_COMPACT) : -1;
		json_decref(msg);
	}
	if (ret) {
		log_err("api: out of memory formatting a response");
		c->out_len = d.start;
		c->dead = true;
		return;
	}
	if (out_append(c, "\n", 1))
		c->dead = true;
	flush_out(c);
}

static void send_error(struct conn *c, json_t *id, int code, const char *msg, int err_no,
		       const char *step)
{
	json_t *e = json_pack("{s:i,s:s}", "code", code, "message", msg ? msg : "");

	if (err_no || (step && *step))
		json_object_set_new(
			e, "data",
			json_pack("{s:i,s:s}", "errno", err_no, "step", step ? step : ""));
	send_msg(c, json_pack("{s:s,s:o,s:O}", "jsonrpc", "2.0", "error", e, "id",
			      id ? id : json_null()));
}

/* ----------------------------------------------------------- replies -- */

static void detach_req(struct conn *c, struct req *r)
{
	for (size_t i = 0; i < c->n_reqs; i++)
		if (c->reqs[i] == r) {
			c->reqs[i] = c->reqs[--c->n_reqs];
			break;
		}
	c->inflight--;
}

static bool on_reply(void *ctx, json_t *result, int code, const char *msg, int err_no,
		     const char *step)
{
	struct req *r = ctx;
	struct conn *c = r->c;
	bool delivered = false;

	if (c) {
		detach_req(c, r);
		if (!c->dead && !r->notification) {
			if (result)
				send_msg(c, json_pack("{s:s,s:O,s:O}", "jsonrpc", "2.0", "result",
						      result, "id", r->id));
			else
				send_error(c, r->id, code, msg, err_no, step);
			delivered = !c->dead;
		}
		if (!c->busy)
			conn_update(c);
	}
	json_decref(result);
	json_decref(r->id);
	free(r);
	return delivered;
}

/* ----------------------------------------------------------- requests -- */

static void handle_line(struct conn *c, const char *line, size_t len)
{
	json_error_t je;
	json_t *msg, *id, *method, *params, *ver;
	struct req *r;

	while (len && (line[len - 1] == '\r' || line[len - 1] == ' ' || line[len - 1] == '\t'))
		len--;
	if (!len)
		return; /* blank lines are ignored */
	msg = json_loadb(line, len, JSON_REJECT_DUPLICATES, &je);
	if (!msg) {
		char m[256];

		snprintf(m, sizeof(m), "parse error at column %d: %s", je.column, je.text);
		send_error(c, NULL, IBVF_RPC_PARSE_ERROR, m, EINVAL, "");
		return;
	}
	if (!json_is_object(msg)) {
		send_error(c, NULL, IBVF_RPC_INVALID_REQUEST,
			   json_is_array(msg) ? "batch requests are not supported"
					      : "a request must be a JSON object",
			   EINVAL, "");
		json_decref(msg);
		return;
	}
	id = json_object_get(msg, "id");
	if (id && !json_is_string(id) && !json_is_integer(id) && !json_is_null(id)) {
		send_error(c, NULL, IBVF_RPC_INVALID_REQUEST, "\"id\" must be a string or integer",
			   EINVAL, "");
		json_decref(msg);
		return;
	}
	ver = json_object_get(msg, "jsonrpc");
	method = json_object_get(msg, "method");
	params = json_object_get(msg, "params");
	if (!json_is_string(ver) || strcmp(json_string_value(ver), "2.0") ||
	    !json_is_string(method) ||
	    (params && !json_is_object(params) && !json_is_null(params))) {
		send_error(c, id, IBVF_RPC_INVALID_REQUEST,
			   "expected {\"jsonrpc\":\"2.0\",\"method\":STRING,\"params\":OBJECT,"
			   "\"id\":ID}",
			   EINVAL, "");
		json_decref(msg);
		return;
	}
	r = calloc(1, sizeof(*r));
	if (!r || (c->n_reqs == c->cap_reqs &&
		   !(c->reqs = realloc(c->reqs, (c->cap_reqs = c->cap_reqs ? c->cap_reqs * 2 : 8) *
							sizeof(*c->reqs))))) {
		free(r);
		c->dead = true;
		json_decref(msg);
		return;
	}
	r->c = c;
	r->id = json_incref(id ? id : json_null());
	r->notification = id == NULL;
	c->reqs[c->n_reqs++] = r;
	c->inflight++;
	log_debug("api: uid %u pid %d: %s", (unsigned)c->uid, (int)c->pid,
		  json_string_value(method));
	c->s->o.dispatch(c->s->o.dispatch_ctx, json_string_value(method),
			 json_is_object(params) ? params : NULL, on_reply, r);
	json_decref(msg);
}

/* Parse complete lines from the input buffer while the in-flight limit allows. */
static void process_input(struct conn *c)
{
	size_t off = 0;

	while (can_take(c) && off < c->in_len) {
		char *nl = memchr(c->in + off, '\n', c->in_len - off);
		size_t len;

		if (!nl)
			break;
		len = (size_t)(nl - (c->in + off));
		if (c->skipping) {
			c->skipping = false; /* end of the over-long line */
		} else if (len + 1 > c->s->o.max_line) {
			char m[128];

			snprintf(m, sizeof(m), "request line longer than %zu bytes",
				 c->s->o.max_line);
			send_error(c, NULL, IBVF_RPC_INVALID_REQUEST, m, EMSGSIZE, "");
		} else {
			handle_line(c, c->in + off, len);
		}
		off += len + 1;
	}
	if (off) {
		memmove(c->in, c->in + off, c->in_len - off);
		c->in_len -= off;
		c->last_io = ibvf_mono_ms();
		c->line_start = c->in_len ? c->last_io : 0; /* lenient: the rest starts now */
	}
	/* EOF after a last line without '\n': take it as a request */
	if (c->rd_closed && c->in_len && !c->skipping && can_take(c) &&
	    !memchr(c->in, '\n', c->in_len)) {
		handle_line(c, c->in, c->in_len);
		c->in_len = 0;
		c->line_start = 0;
	}
}

static void read_input(struct conn *c)
{
	for (;;) {
		ssize_t n;

		if (c->in_cap - c->in_len < 4096) {
			size_t cap = c->in_cap ? c->in_cap * 2 : 8192;
			char *p;

			if (cap > c->s->o.max_line + 8192)
				cap = c->s->o.max_line + 8192;
			if (cap <= c->in_cap) {
				/* a line longer than the limit: answer, discard to its end */
				char m[128];

				snprintf(m, sizeof(m), "request line longer than %zu bytes",
					 c->s->o.max_line);
				send_error(c, NULL, IBVF_RPC_INVALID_REQUEST, m, EMSGSIZE, "");
				c->skipping = true;
				c->in_len = 0;
				continue;
			}
			p = realloc(c->in, cap);
			if (!p) {
				c->dead = true;
				return;
			}
			c->in = p;
			c->in_cap = cap;
		}
		size_t room = c->in_cap - c->in_len;

		n = recv(c->fd, c->in + c->in_len, room, MSG_DONTWAIT);
		if (n > 0) {
			size_t old = c->in_len;

			if (!c->line_start)
				c->line_start = ibvf_mono_ms();
			c->in_len += (size_t)n;
			if (c->skipping) {
				char *nl = memchr(c->in + old, '\n', c->in_len - old);

				if (!nl) {
					c->in_len = 0;
					continue;
				}
				c->skipping = false;
				memmove(c->in, nl + 1, (size_t)(c->in + c->in_len - nl - 1));
				c->in_len = (size_t)(c->in + c->in_len - nl - 1);
				c->line_start = c->in_len ? ibvf_mono_ms() : 0;
			}
			process_input(c);
			if (!can_take(c))
				return; /* paused: resume when replies come back / went out */
			/*
			 * A short read took all the socket had: the next recv() would be
			 * EAGAIN (one system call per request for nothing, issue 17). The
			 * watch is level-triggered: more bytes, or EOF, wake us again.
			 */
			if ((size_t)n < room)
				return;
			continue;
		}
		if (n == 0) {
			c->rd_closed = true;
			process_input(c);
			return;
		}
		if (errno == EAGAIN || errno == EINTR)
			return;
		log_debug("api: peer pid %d: recv: %s", (int)c->pid, strerror(errno));
		c->dead = true;
		return;
	}
}

/* ------------------------------------------------------- connections -- */

static void conn_event(struct ibvf_loop *l, int fd, uint32_t ev, void *arg)
{
	struct conn *c = arg;

	(void)l;
	(void)fd;
	c->busy++;
	if (ev & EPOLLOUT)
		flush_out(c);
	if ((ev & (EPOLLIN | EPOLLHUP | EPOLLRDHUP)) && !c->rd_closed && !c->dead)
		read_input(c);
	c->busy--;
	if ((ev & EPOLLERR) || ((ev & EPOLLHUP) && c->out_off < c->out_len))
		c->dead = true;
	conn_update(c);
}

/* Re-evaluate what to wait for; close when done. Safe to call any time. */
static void conn_update(struct conn *c)
{
	uint32_t ev = 0;

	c->busy++;
	if (can_take(c) && c->in_len)
		process_input(c); /* lines that waited for the in-flight or output limit */
	c->busy--;
	if (c->dead || (c->rd_closed && !c->inflight && !c->in_len && c->out_off == c->out_len)) {
		conn_close(c);
		return;
	}
	if (!c->rd_closed && can_take(c))
		ev |= EPOLLIN | EPOLLRDHUP;
	if (c->out_off < c->out_len)
		ev |= EPOLLOUT;
	if (ibvf_watch_modify(c->w, ev))
		log_debug("api: epoll_ctl: %s", strerror(errno));
}

static void conn_close(struct conn *c)
{
	struct ibvf_api_server *s = c->s;

	for (size_t i = 0; i < c->n_reqs; i++)
		c->reqs[i]->c = NULL; /* their replies find no connection: "not delivered" */
	ibvf_watch_remove(c->w);
	close(c->fd);
	/* not a walk of s->conns: a burst of N closes was O(N^2) on the loop thread */
	*c->pprev = c->next;
	if (c->next)
		c->next->pprev = c->pprev;
	s->n_conns--;
	free(c->reqs);
	free(c->in);
	free(c->out);
	free(c);
}

/* --------------------------------------------------------- timeouts -- */

/* A best-effort last line to a connection about to be closed; never blocks. */
static void last_word(struct conn *c, const char *msg)
{
	char line[256];
	int n;

	if (out_pending(c))
		return; /* an answer is half sent: an error line would corrupt it */
	n = snprintf(line, sizeof(line),
		     "{\"jsonrpc\":\"2.0\",\"error\":{\"code\":%d,\"message\":\"%s\"},"
		     "\"id\":null}\n",
		     IBVF_RPC_INVALID_REQUEST, msg);
	if (send(c->fd, line, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
		log_debug("api: peer pid %d: send: %s", (int)c->pid, strerror(errno));
}

/* Idle: nothing executing and no complete request or sent byte for a while. */
static bool conn_idle_for(const struct conn *c, long long now, long long ms)
{
	return !c->busy && !c->inflight && now - c->last_io >= ms;
}

/*
 * Bytes the client sent that ibvfd has not read yet (the loop was stalled,
 * or their event is still pending) while ibvfd takes requests from it: such
 * a connection is not idle, its request is about to be read. Marks it active.
 */
static bool unread_input(struct conn *c, long long now)
{
	int n = 0;

	if (!can_take(c)) /* paused on its unread answers: not ours to wait for */
		return false;
	if (ioctl(c->fd, FIONREAD, &n) || n <= 0)
		return false;
	c->last_io = now;
	return true;
}

/*
 * Close the connection that has been idle longest (at least
 * min(1 s, idle_timeout): a client that connected a moment ago is about to
 * send its request) to make room for a new one. Return whether one was closed.
 */
static bool evict_idle(struct ibvf_api_server *s, long long now)
{
	long long min_idle = s->o.idle_timeout_ms < 1000 ? s->o.idle_timeout_ms : 1000;
	struct conn *victim;

	for (int tries = 0;; tries++) {
		victim = NULL;
		for (struct conn *c = s->conns; c; c = c->next)
			if (conn_idle_for(c, now, min_idle) &&
			    (!victim || c->last_io <= victim->last_io))
				victim = c;
		if (!victim || tries == 8)
			return false;
		if (!unread_input(victim, now))
			break;
	}
	log_debug("api: closing the connection of pid %d, idle %lld ms, to admit a new one",
		  (int)victim->pid, now - victim->last_io);
	s->st.evicted++;
	conn_close(victim);
	return true;
}

static void sweep(struct ibvf_loop *l, struct ibvf_timer *t, void *arg)
{
	struct ibvf_api_server *s = arg;
	long long now = ibvf_mono_ms();
	struct conn *next;

	(void)l;
	(void)t;
	for (struct conn *c = s->conns; c; c = next) {
		next = c->next;
		if (c->busy || c->dead)
			continue;
		if ((c->in_len || c->skipping) && c->line_start && !c->rd_closed && can_take(c) &&
		    now - c->line_start >= (long long)s->o.line_timeout_ms) {
			char m[96];
			unsigned long long more;

			if (log_allowed(&s->line_logged, &s->line_quiet, &more))
				log_info("api: closing the connection of pid %d: request line not "
					 "completed within %u ms (%llu more not logged)",
					 (int)c->pid, s->o.line_timeout_ms, more);
			snprintf(m, sizeof(m), "request line not completed within %u ms",
				 s->o.line_timeout_ms);
			last_word(c, m);
			s->st.closed_line++;
			conn_close(c);
		} else if (conn_idle_for(c, now, s->o.idle_timeout_ms) && !unread_input(c, now)) {
			log_debug("api: closing the connection of pid %d: idle for %lld ms",
				  (int)c->pid, now - c->last_io);
			s->st.closed_idle++;
			conn_close(c);
		}
	}
}

/* A quarter of the shorter timeout, 10 ms .. 1 s: a timeout is late by at most that. */
static uint64_t sweep_period_ms(const struct ibvf_api_server *s)
{
	uint64_t p = s->o.idle_timeout_ms < s->o.line_timeout_ms ? s->o.idle_timeout_ms
								 : s->o.line_timeout_ms;

	p /= 4;
	return p < 10 ? 10 : p > 1000 ? 1000 : p;
}

static void resume_accepting(struct ibvf_loop *l, struct ibvf_timer *t, void *arg)
{
	struct ibvf_api_server *s = arg;

	(void)l;
	(void)t;
	if (s->lw && ibvf_watch_modify(s->lw, EPOLLIN))
		log_warn("api: epoll_ctl: %s", strerror(errno));
}

static bool uid_allowed(struct ibvf_api_server *s, uid_t uid)
{
	for (size_t i = 0; i < s->n_uids; i++)
		if (s->uids[i] == uid)
			return true;
	return false;
}

static void refuse(int fd, int code, const char *msg)
{
	char line[256];
	int n = snprintf(line, sizeof(line),
			 "{\"jsonrpc\":\"2.0\",\"error\":{\"code\":%d,\"message\":\"%s\"},"
			 "\"id\":null}\n",
			 code, msg);

	if (send(fd, line, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
		log_debug("api: refusing a connection: %s", strerror(errno));
	close(fd);
}

static void on_accept(struct ibvf_loop *l, int lfd, uint32_t ev, void *arg)
{
	struct ibvf_api_server *s = arg;

	(void)ev;
	for (;;) {
		struct ucred cred;
		socklen_t len = sizeof(cred);
		struct conn *c;
		int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

		if (fd < 0 && (errno == EMFILE || errno == ENFILE)) {
			int e = errno;

			/* out of file descriptors: make room, or pause instead of spinning */
			if (evict_idle(s, ibvf_mono_ms()))
				continue;
			log_warn("api: accept: %s with %zu connections open; not accepting for "
				 "100 ms",
				 strerror(e), s->n_conns);
			if (!ibvf_watch_modify(s->lw, 0) && s->resume)
				ibvf_timer_set(s->resume, 100, 0);
			return;
		}
		if (fd < 0) {
			if (errno != EAGAIN && errno != EINTR)
				log_warn("api: accept: %s", strerror(errno));
			return;
		}
		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len)) {
			log_warn("api: SO_PEERCRED: %s", strerror(errno));
			close(fd);
			continue;
		}
		if (!uid_allowed(s, cred.uid)) {
			log_warn("api: refused connection from uid %u pid %d: uid not in "
				 "api.allowed_uids",
				 (unsigned)cred.uid, (int)cred.pid);
			refuse(fd, IBVF_RPC_DENIED, "peer uid not allowed (api.allowed_uids)");
			continue;
		}
		if (s->n_conns >= s->o.max_conns && !evict_idle(s, ibvf_mono_ms())) {
			unsigned long long more;

			if (log_allowed(&s->refuse_logged, &s->refuse_quiet, &more))
				log_warn(
					"api: refused connection from pid %d: %zu connections open, "
					"none idle (%llu more refused, not logged)",
					(int)cred.pid, s->n_conns, more);
			s->st.refused_busy++;
			refuse(fd, IBVF_RPC_BUSY, "too many connections");
			continue;
		}
		c = calloc(1, sizeof(*c));
		if (!c) {
			close(fd);
			continue;
		}
		c->s = s;
		c->fd = fd;
		c->uid = cred.uid;
		c->pid = cred.pid;
		c->last_io = ibvf_mono_ms();
		c->w = ibvf_loop_watch(l, fd, EPOLLIN | EPOLLRDHUP, conn_event, c);
		if (!c->w) {
			close(fd);
			free(c);
			continue;
		}
		c->next = s->conns;
		if (c->next)
			c->next->pprev = &c->next;
		c->pprev = &s->conns;
		s->conns = c;
		s->n_conns++;
	}
}

/* --------------------------------------------------------------- setup -- */

/*
 * The listen backlog: room for every connection the server would take
 * (max_conns) arriving at once, as a burst of CNI ADDs does. A connect()
 * that finds an AF_UNIX backlog full fails with EAGAIN at once
 * (net/unix/af_unix.c, unix_stream_connect()) and the client sleeps before
 * it retries (api_client.c): with the old fixed 256, 1,024 clients at once
 * saw ~70% of their connects refused. The kernel caps the value at
 * net.core.somaxconn (listen(2); 4096 since Linux 5.4).
 */
static int listen_backlog(size_t max_conns)
{
	return max_conns < 256 ? 256 : max_conns > 65535 ? 65535 : (int)max_conns;
}

static int make_listener(struct ibvf_api_server *s, char *err, size_t errlen)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	char dir[PATH_MAX];
	struct stat st;
	int fd, ret;

	if (strlen(s->path) >= sizeof(sa.sun_path))
		return ibvf_errf(err, errlen, -ENAMETOOLONG, "api.socket %s: path too long",
				 s->path);
	snprintf(dir, sizeof(dir), "%s", s->path);
	ret = ibvf_dir_prepare(dirname(dir), 0700, true, err, errlen);
	if (ret)
		return ret;
	memcpy(sa.sun_path, s->path, strlen(s->path) + 1);
	if (lstat(s->path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode))
			return ibvf_errf(err, errlen, -EEXIST,
					 "api.socket %s exists and is not a socket", s->path);
		/* is another ibvfd answering there? */
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
			close(fd);
			return ibvf_errf(err, errlen, -EADDRINUSE,
					 "another process listens on %s (is ibvfd running?)",
					 s->path);
		}
		if (fd >= 0)
			close(fd);
		unlink(s->path); /* stale, from a daemon that died */
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return ibvf_errf(err, errlen, -errno, "socket: %s", strerror(errno));
	{
		mode_t old = umask(0177); /* the socket is born 0600: no window */

		ret = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
		umask(old);
	}
	if (ret || chmod(s->path, 0600) || listen(fd, listen_backlog(s->o.max_conns))) {
		ret = -errno;
		close(fd);
		return ibvf_errf(err, errlen, ret, "api socket %s: %s", s->path, strerror(-ret));
	}
	s->lfd = fd;
	return 0;
}

/*
 * Each connection is a file descriptor: with the usual soft RLIMIT_NOFILE of
 * 1024 (systemd's default) accept() would fail with EMFILE before max_conns.
 * Raise the soft limit up to the hard limit as far as max_conns needs.
 */
static void raise_nofile(size_t max_conns)
{
	struct rlimit rl;
	rlim_t want = (rlim_t)max_conns + 256;

	if (getrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_cur >= want)
		return;
	rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > want ? want : rl.rlim_max;
	if (setrlimit(RLIMIT_NOFILE, &rl))
		log_warn("api: raising RLIMIT_NOFILE to %llu: %s", (unsigned long long)rl.rlim_cur,
			 strerror(errno));
}

int ibvf_api_server_new(const struct ibvf_api_server_opts *o, struct ibvf_api_server **out,
			char *err, size_t errlen)
{
	struct ibvf_api_server *s = calloc(1, sizeof(*s));
	int ret;

	*out = NULL;
	if (!s)
		return ibvf_errf(err, errlen, -ENOMEM, "out of memory");
	s->o = *o;
	s->lfd = -1;
	if (!s->o.max_conns)
		s->o.max_conns = 1024;
	if (!s->o.max_inflight)
		s->o.max_inflight = 64;
	if (!s->o.max_line || s->o.max_line > IBVF_API_MAX_LINE)
		s->o.max_line = IBVF_API_MAX_LINE;
	if (!s->o.max_out)
		s->o.max_out = 256 * 1024;
	if (!s->o.idle_timeout_ms)
		s->o.idle_timeout_ms = 60000;
	if (!s->o.line_timeout_ms)
		s->o.line_timeout_ms = 10000;
	raise_nofile(s->o.max_conns);
	snprintf(s->path, sizeof(s->path), "%s", o->socket_path);
	ibvf_api_server_set_uids(s, o->allowed_uids, o->n_allowed_uids);
	ret = make_listener(s, err, errlen);
	if (ret) {
		free(s);
		return ret;
	}
	s->lw = ibvf_loop_watch(o->loop, s->lfd, EPOLLIN, on_accept, s);
	if (s->lw) {
		uint64_t p = sweep_period_ms(s);

		s->sweep = ibvf_loop_timer(o->loop, p, p, sweep, s);
		s->resume = ibvf_loop_timer(o->loop, 0, 0, resume_accepting, s);
	}
	if (!s->lw || !s->sweep || !s->resume) {
		ret = ibvf_errf(err, errlen, -errno, "epoll/timerfd: %s", strerror(errno));
		ibvf_timer_free(s->sweep);
		ibvf_timer_free(s->resume);
		ibvf_watch_remove(s->lw);
		close(s->lfd);
		unlink(s->path);
		free(s);
		return ret;
	}
	*out = s;
	return 0;
}

void ibvf_api_server_set_uids(struct ibvf_api_server *s, const uid_t *uids, size_t n)
{
	if (n > sizeof(s->uids) / sizeof(s->uids[0]))
		n = sizeof(s->uids) / sizeof(s->uids[0]);
	memcpy(s->uids, uids, n * sizeof(*uids));
	s->n_uids = n;
}

void ibvf_api_server_stop_accepting(struct ibvf_api_server *s)
{
	if (!s || s->lfd < 0)
		return;
	ibvf_watch_remove(s->lw);
	s->lw = NULL;
	close(s->lfd);
	s->lfd = -1;
	unlink(s->path);
}

size_t ibvf_api_server_conns(struct ibvf_api_server *s)
{
	return s->n_conns;
}

void ibvf_api_server_stats(struct ibvf_api_server *s, struct ibvf_api_server_stats *st)
{
	*st = s->st;
	st->conns = s->n_conns;
	st->out_queued = 0;
	for (struct conn *c = s->conns; c; c = c->next)
		st->out_queued += out_pending(c);
}

void ibvf_api_server_set_timeouts(struct ibvf_api_server *s, unsigned idle_timeout_ms,
				  unsigned line_timeout_ms)
{
	if (idle_timeout_ms)
		s->o.idle_timeout_ms = idle_timeout_ms;
	if (line_timeout_ms)
		s->o.line_timeout_ms = line_timeout_ms;
	ibvf_timer_set(s->sweep, sweep_period_ms(s), sweep_period_ms(s));
}

void ibvf_api_server_free(struct ibvf_api_server *s)
{
	if (!s)
		return;
	ibvf_api_server_stop_accepting(s);
	while (s->conns)
		conn_close(s->conns);
	ibvf_timer_free(s->sweep);
	ibvf_timer_free(s->resume);
	free(s);
}
