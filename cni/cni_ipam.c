// SPDX-License-Identifier: MIT
/* ib-sriov CNI plugin: IPAM delegation and applying its result in the Pod netns. */
#include "cni_ipam.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/if_addr.h>
#include <linux/rtnetlink.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <netlink/addr.h>
#include <netlink/route/addr.h>
#include <netlink/route/route.h>

#include "cni_config.h"
#include "cni_nl.h"
#include "cni_result.h"
#include "clock.h"
#include "err.h"
#include "log.h"

static int find_plugin(const char *type, const char *cni_path, char *out, size_t len, char *err,
		       size_t errlen)
{
	const char *p = cni_path;

	if (!type || !*type || strchr(type, '/'))
		return ibvf_errf(err, errlen, -EINVAL, "\"%s\" is not a plugin name",
				 type ? type : "");
	while (p && *p) {
		const char *end = strchr(p, ':');
		size_t n = end ? (size_t)(end - p) : strlen(p);

		if (n && snprintf(out, len, "%.*s/%s", (int)n, p, type) < (int)len &&
		    !access(out, X_OK))
			return 0;
		p = end ? end + 1 : NULL;
	}
	return ibvf_errf(err, errlen, -ENOENT, "IPAM plugin \"%s\" not found in CNI_PATH (%s)",
			 type, cni_path ? cni_path : "unset");
}

/* The environment for the child: ours, with the CNI_* overrides of @c. */
static char **child_env(const struct cni_ipam_call *c, char *own[4])
{
	size_t n = 0, k = 0;
	char **env;

	while (environ[n])
		n++;
	env = calloc(n + 5, sizeof(*env));
	if (!env)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		const char *e = environ[i];

		if (!strncmp(e, "CNI_COMMAND=", 12) ||
		    (c->container_id && !strncmp(e, "CNI_CONTAINERID=", 16)) ||
		    (c->ifname && !strncmp(e, "CNI_IFNAME=", 11)) ||
		    (c->netns && !strncmp(e, "CNI_NETNS=", 10)))
			continue;
		env[k++] = environ[i];
	}
	if (asprintf(&own[0], "CNI_COMMAND=%s", c->command) < 0)
		own[0] = NULL;
	own[1] = own[2] = own[3] = NULL;
	if (c->container_id && asprintf(&own[1], "CNI_CONTAINERID=%s", c->container_id) < 0)
		own[1] = NULL;
	if (c->ifname && asprintf(&own[2], "CNI_IFNAME=%s", c->ifname) < 0)
		own[2] = NULL;
	if (c->netns && *c->netns && asprintf(&own[3], "CNI_NETNS=%s", c->netns) < 0)
		own[3] = NULL;
	for (int i = 0; i < 4; i++)
		if (own[i])
			env[k++] = own[i];
	env[k] = NULL;
	return env;
}

/* Write @in to @wfd and read @rfd to EOF into *@out, until @deadline. */
static int pump(int wfd, const char *in, size_t in_len, int rfd, char **out, size_t *out_len,
		long long deadline)
{
	size_t cap = 4096, len = 0, off = 0;
	char *buf = malloc(cap);
	int ret = 0;

	if (!buf)
		return -ENOMEM;
	if (!in_len) {
		close(wfd);
		wfd = -1;
	}
	while (rfd >= 0) {
		struct pollfd p[2] = {{.fd = rfd, .events = POLLIN},
				      {.fd = wfd, .events = POLLOUT}};
		long long left = deadline - ibvf_mono_ms();
		int n;

		if (left <= 0) {
			ret = -ETIMEDOUT;
			break;
		}
		n = poll(p, wfd >= 0 ? 2 : 1, (int)left);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			ret = -errno;
			break;
		}
		if (wfd >= 0 && (p[1].revents & (POLLOUT | POLLERR | POLLHUP))) {
			ssize_t w = write(wfd, in + off, in_len - off);

			if (w > 0)
				off += (size_t)w;
			if (w < 0 || off == in_len) {
				close(wfd);
				wfd = -1;
			}
		}
		if (p[0].revents & (POLLIN | POLLHUP | POLLERR)) {
			ssize_t r;

			if (len + 1 >= cap) {
				char *nb = cap < (16u << 20) ? realloc(buf, cap * 2) : NULL;

				if (!nb) {
					ret = -ENOMEM;
					break;
				}
				buf = nb;
				cap *= 2;
			}
			r = read(rfd, buf + len, cap - len - 1);
			if (r > 0)
				len += (size_t)r;
			else if (r == 0 || errno != EINTR)
				rfd = -1; /* EOF (or error): the caller closes its copy */
		}
	}
	if (wfd >= 0)
		close(wfd);
	buf[len] = 0;
	*out = buf;
	*out_len = len;
	return ret;
}

static int describe_failure(struct cni_ipam_call *c, int status, const char *text, char *err,
			    size_t errlen)
{
	json_t *e = json_loads(text, 0, NULL);
	const char *msg = json_string_value(json_object_get(e, "msg"));
	const char *det = json_string_value(json_object_get(e, "details"));

	c->remote_code = json_is_integer(json_object_get(e, "code"))
				 ? (int)json_integer_value(json_object_get(e, "code"))
				 : 0;
	if (msg)
		ibvf_errf(err, errlen, -EREMOTEIO, "IPAM plugin %s %s failed (code %d): %s%s%s",
			  c->type, c->command, c->remote_code, msg, det && *det ? ": " : "",
			  det ? det : "");
	else if (WIFSIGNALED(status))
		ibvf_errf(err, errlen, -EREMOTEIO, "IPAM plugin %s %s killed by signal %d", c->type,
			  c->command, WTERMSIG(status));
	else
		ibvf_errf(err, errlen, -EREMOTEIO,
			  "IPAM plugin %s %s exited with status %d: %.200s", c->type, c->command,
			  WEXITSTATUS(status), text);
	json_decref(e);
	return -EREMOTEIO;
}

static int exec_as_is(struct cni_ipam_call *c, json_t **out, char *err, size_t errlen);

/*
 * The configuration to retry with after the plugin refused the stdin text's
 * cniVersion (issue 15 item 10): a copy with the highest version both the
 * plugin (its VERSION answer) and ib-sriov support, as a chain of plugins of
 * different ages is expected to work (Debian's host-local 1.1.1 lists up to
 * 1.0.0 and refuses a 1.1.0 configuration). Only the top-level cniVersion
 * changes: the result comes back in the plugin's version and the caller
 * converts it (cni_result_normalize()). *@text is NULL when there is nothing
 * better to retry with: the plugin lists the configuration's version (it
 * refused for another reason), lists none of ours, or gave no usable VERSION
 * answer; the caller then keeps the first call's error.
 */
static void negotiate(struct cni_ipam_call *c, char **text)
{
	json_t *conf = json_loadb(c->conf, c->conf_len, 0, NULL), *ver = NULL, *e;
	const char *want = json_string_value(json_object_get(conf, "cniVersion"));
	struct cni_ipam_call vc = *c;
	char err[IBVF_ERR_LEN], vconf[64], list[160] = "";
	const char *best = NULL;
	unsigned best_v = 0;
	size_t i, off = 0;

	*text = NULL;
	if (!want || strlen(want) > 16)
		goto out;
	snprintf(vconf, sizeof(vconf), "{\"cniVersion\":\"%s\"}", want);
	vc.command = "VERSION";
	vc.conf = vconf;
	vc.conf_len = strlen(vconf);
	vc.timeout_ms = 10000;
	if (exec_as_is(&vc, &ver, err, sizeof(err))) {
		log_debug("IPAM plugin %s VERSION: %s; no other cniVersion than %s to try", c->type,
			  err, want);
		goto out;
	}
	json_array_foreach(json_object_get(ver, "supportedVersions"), i, e)
	{
		const char *s = json_string_value(e);
		unsigned v;

		if (!s || cni_version_parse(s, &v))
			continue;
		if (!strcmp(s, want))
			goto out; /* it speaks the configuration's version */
		if (off < sizeof(list))
			off += (size_t)snprintf(list + off, sizeof(list) - off, "%s%s",
						off ? " " : "", s);
		if (cni_version_supported(v) && v > best_v) {
			best_v = v;
			best = s;
		}
	}
	if (!best) {
		log_warn(
			"IPAM plugin %s supports none of ib-sriov's CNI versions (it lists %s) and "
			"refused cniVersion %s",
			c->type, list[0] ? list : "none", want);
		goto out;
	}
	log_info("IPAM plugin %s does not support cniVersion %s (it lists %s): delegating with "
		 "%s, the highest version both support",
		 c->type, want, list, best);
	json_object_set_new(conf, "cniVersion", json_string(best));
	*text = json_dumps(conf, JSON_COMPACT);
out:
	json_decref(ver);
	json_decref(conf);
}

/*
 * Did the call fail because the plugin cannot take the configuration's
 * cniVersion? CNI spec 1.1.0 section "Error" code 1 ("Incompatible CNI
 * version"), which the Go skel answers before the plugin's command runs
 * ("incompatible CNI versions", also for CHECK below 0.4.0); or, from a plugin
 * without the code, a message naming the CNI version. Nothing was done then,
 * so a second call with another version is safe.
 */
static bool refused_version(const struct cni_ipam_call *c, int ret, const char *err)
{
	return ret == -EREMOTEIO &&
	       (c->remote_code == CNI_ERR_INCOMPATIBLE_VERSION || strcasestr(err, "CNI version"));
}

int cni_ipam_exec(struct cni_ipam_call *c, json_t **out, char *err, size_t errlen)
{
	const char *conf = c->conf;
	size_t len = c->conf_len;
	char *text = NULL;
	int ret;

	/*
	 * One exec with the configuration as given, as Go's libcni delegates
	 * (ipam.ExecAdd/ExecDel): the VERSION round trip is paid only by a
	 * plugin that refuses the version (issue 17: an exec'd Go binary costs
	 * a millisecond or more per ADD and DEL).
	 */
	ret = exec_as_is(c, out, err, errlen);
	if (!refused_version(c, ret, err) ||
	    (strcmp(c->command, "ADD") && strcmp(c->command, "DEL") && strcmp(c->command, "CHECK")))
		return ret;
	log_debug("IPAM plugin %s %s refused the configuration's cniVersion: %s", c->type,
		  c->command, err);
	negotiate(c, &text);
	if (!text)
		return ret; /* c->remote_code and @err: the refusal */
	c->conf = text;
	c->conf_len = strlen(text);
	ret = exec_as_is(c, out, err, errlen);
	c->conf = conf;
	c->conf_len = len;
	free(text);
	return ret;
}

static int exec_as_is(struct cni_ipam_call *c, json_t **out, char *err, size_t errlen)
{
	char bin[PATH_MAX], *own[4] = {0}, **env = NULL, *text = NULL;
	int in[2] = {-1, -1}, outp[2] = {-1, -1}, ret, status = 0;
	long long start = ibvf_mono_ms();
	posix_spawn_file_actions_t fa;
	struct sigaction old_pipe;
	char *argv[2] = {bin, NULL};
	size_t text_len = 0;
	pid_t pid;

	c->remote_code = 0;
	if (out)
		*out = NULL;
	ret = find_plugin(c->type, c->cni_path, bin, sizeof(bin), err, errlen);
	if (ret)
		return ret;
	if (pipe2(in, O_CLOEXEC) || pipe2(outp, O_CLOEXEC)) {
		ret = ibvf_errf(err, errlen, -errno, "pipe: %s", strerror(errno));
		goto out;
	}
	env = child_env(c, own);
	if (!env || posix_spawn_file_actions_init(&fa)) {
		ret = ibvf_errf(err, errlen, -ENOMEM, "out of memory");
		goto out;
	}
	posix_spawn_file_actions_adddup2(&fa, in[0], 0);
	posix_spawn_file_actions_adddup2(&fa, outp[1], 1);
	ret = posix_spawn(&pid, bin, &fa, NULL, argv, env);
	posix_spawn_file_actions_destroy(&fa);
	if (ret) {
		ret = ibvf_errf(err, errlen, -ret, "running %s: %s", bin, strerror(ret));
		goto out;
	}
	close(in[0]);
	close(outp[1]);
	in[0] = outp[1] = -1;
	/*
	 * A plugin may exit without reading all of stdin (a VERSION answer
	 * needs none): the write must fail with EPIPE, not kill ib-sriov with
	 * SIGPIPE. The child was spawned with the default disposition.
	 */
	sigaction(SIGPIPE, &(struct sigaction){.sa_handler = SIG_IGN}, &old_pipe);
	ret = pump(in[1], c->conf, c->conf_len, outp[0], &text, &text_len,
		   start + (c->timeout_ms ? c->timeout_ms : CNI_IPAM_TIMEOUT_MS));
	sigaction(SIGPIPE, &old_pipe, NULL);
	in[1] = -1; /* pump closed it */
	if (ret == -ETIMEDOUT)
		kill(pid, SIGKILL);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	log_debug("IPAM %s %s: %lld ms, status %d", c->type, c->command, ibvf_mono_ms() - start,
		  status);
	if (ret) {
		ret = ibvf_errf(err, errlen, ret, "IPAM plugin %s %s: %s", c->type, c->command,
				ret == -ETIMEDOUT ? "timed out and was killed" : strerror(-ret));
		goto out;
	}
	if (!WIFEXITED(status) || WEXITSTATUS(status)) {
		ret = describe_failure(c, status, text, err, errlen);
		goto out;
	}
	if (out && text_len && strspn(text, " \t\r\n") != text_len) {
		json_error_t je;

		*out = json_loads(text, 0, &je);
		if (!*out)
			ret = ibvf_errf(err, errlen, -EPROTO,
					"IPAM plugin %s %s printed no JSON: %s", c->type,
					c->command, je.text);
	}
out:
	for (int i = 0; i < 2; i++) {
		if (in[i] >= 0)
			close(in[i]);
		if (outp[i] >= 0)
			close(outp[i]);
	}
	for (int i = 0; i < 4; i++)
		free(own[i]);
	free(env);
	free(text);
	return ret;
}

int cni_ipam_max_version(const char *type, const char *cni_path, unsigned *version, char *err,
			 size_t errlen)
{
	static const char conf[] = "{\"cniVersion\":\"1.1.0\"}";
	struct cni_ipam_call c = {
		.type = type,
		.cni_path = cni_path,
		.command = "VERSION",
		.conf = conf,
		.conf_len = sizeof(conf) - 1,
		.timeout_ms = 10000,
	};
	json_t *o = NULL, *e;
	size_t i;
	int ret = cni_ipam_exec(&c, &o, err, errlen);

	*version = 0;
	if (ret)
		return ret;
	json_array_foreach(json_object_get(o, "supportedVersions"), i, e)
	{
		unsigned v;

		if (!cni_version_parse(json_string_value(e), &v) && v > *version)
			*version = v;
	}
	json_decref(o);
	return 0;
}

/* ------------------------------------------------------------ applying -- */

static int add_address(struct cni_ns *ns, int ifindex, const char *cidr, char *err, size_t errlen)
{
	struct rtnl_addr *a = rtnl_addr_alloc();
	struct nl_addr *local = NULL, *bcast = NULL;
	struct nl_msg *msg = NULL;
	int ret;

	if (!a)
		return ibvf_errf(err, errlen, -ENOMEM, "out of memory");
	ret = nl_addr_parse(cidr, AF_UNSPEC, &local);
	if (ret < 0) {
		ret = ibvf_errf(err, errlen, -EINVAL, "address %s: %s", cidr, nl_geterror(ret));
		goto out;
	}
	rtnl_addr_set_ifindex(a, ifindex);
	rtnl_addr_set_local(a, local);
	rtnl_addr_set_prefixlen(a, nl_addr_get_prefixlen(local));
	if (nl_addr_get_family(local) == AF_INET6) {
		rtnl_addr_set_flags(a, IFA_F_NODAD);
	} else if (nl_addr_get_prefixlen(local) < 31) {
		/* broadcast = address | host mask, as `ip addr add ... brd +` */
		uint32_t ip, mask = 0xffffffffu >> nl_addr_get_prefixlen(local);

		memcpy(&ip, nl_addr_get_binary_addr(local), 4);
		ip |= htonl(mask);
		bcast = nl_addr_build(AF_INET, &ip, 4);
		if (bcast)
			rtnl_addr_set_broadcast(a, bcast);
	}
	ret = rtnl_addr_build_add_request(a, NLM_F_CREATE | NLM_F_EXCL, &msg);
	ret = ret < 0 ? cni_nlerr_to_errno(ret) : cni_nl_talk(ns->sk, msg, NULL, NULL);
	if (ret)
		ibvf_errf(err, errlen, ret, "adding address %s in netns %s: %s", cidr, ns->path,
			  strerror(-ret));
out:
	nlmsg_free(msg);
	nl_addr_put(bcast);
	nl_addr_put(local);
	rtnl_addr_put(a);
	return ret;
}

/* The gateway of the first ips[] entry of family @fam, or NULL. */
static const char *family_gateway(json_t *res, int fam)
{
	json_t *e;
	size_t i;

	json_array_foreach(json_object_get(res, "ips"), i, e)
	{
		const char *gw = json_string_value(json_object_get(e, "gateway"));

		if (gw && cni_ip_family(json_string_value(json_object_get(e, "address"))) == fam)
			return gw;
	}
	return NULL;
}

static unsigned uint_field(json_t *r, const char *key, unsigned dflt)
{
	json_t *v = json_object_get(r, key);

	return json_is_integer(v) && json_integer_value(v) >= 0 ? (unsigned)json_integer_value(v)
								: dflt;
}

static int add_route(struct cni_ns *ns, int ifindex, json_t *res, json_t *r, char *err,
		     size_t errlen)
{
	const char *dst_s = json_string_value(json_object_get(r, "dst"));
	const char *gw_s = json_string_value(json_object_get(r, "gw"));
	struct nl_addr *dst = NULL, *gw = NULL;
	struct rtnl_route *rt = rtnl_route_alloc();
	struct rtnl_nexthop *nh = rtnl_route_nh_alloc();
	struct nl_msg *msg = NULL;
	int ret;

	if (!rt || !nh) {
		ret = ibvf_errf(err, errlen, -ENOMEM, "out of memory");
		goto out;
	}
	if (!gw_s)
		gw_s = family_gateway(res, cni_ip_family(dst_s));
	if (nl_addr_parse(dst_s, AF_UNSPEC, &dst) < 0 ||
	    (gw_s && nl_addr_parse(gw_s, nl_addr_get_family(dst), &gw) < 0)) {
		ret = ibvf_errf(err, errlen, -EINVAL, "route %s via %s: bad address", dst_s,
				gw_s ? gw_s : "-");
		goto out;
	}
	rtnl_route_set_family(rt, (uint8_t)nl_addr_get_family(dst));
	rtnl_route_set_dst(rt, dst);
	rtnl_route_set_table(rt, uint_field(r, "table", RT_TABLE_MAIN));
	rtnl_route_set_scope(rt, (uint8_t)uint_field(r, "scope", RT_SCOPE_UNIVERSE));
	rtnl_route_set_protocol(rt, RTPROT_BOOT);
	if (json_object_get(r, "priority"))
		rtnl_route_set_priority(rt, uint_field(r, "priority", 0));
	if (json_object_get(r, "mtu"))
		rtnl_route_set_metric(rt, RTAX_MTU, uint_field(r, "mtu", 0));
	if (json_object_get(r, "advmss"))
		rtnl_route_set_metric(rt, RTAX_ADVMSS, uint_field(r, "advmss", 0));
	rtnl_route_nh_set_ifindex(nh, ifindex);
	if (gw)
		rtnl_route_nh_set_gateway(nh, gw);
	rtnl_route_add_nexthop(rt, nh);
	nh = NULL; /* owned by rt now */
	ret = rtnl_route_build_add_request(rt, NLM_F_CREATE | NLM_F_EXCL, &msg);
	ret = ret < 0 ? cni_nlerr_to_errno(ret) : cni_nl_talk(ns->sk, msg, NULL, NULL);
	if (ret)
		ibvf_errf(err, errlen, ret, "adding route %s via %s in netns %s: %s", dst_s,
			  gw_s ? gw_s : "(link)", ns->path, strerror(-ret));
out:
	nlmsg_free(msg);
	nl_addr_put(dst);
	nl_addr_put(gw);
	if (nh)
		rtnl_route_nh_free(nh);
	if (rt)
		rtnl_route_put(rt);
	return ret;
}

int cni_ipam_apply(struct cni_ns *ns, int ifindex, json_t *res, char *err, size_t errlen)
{
	json_t *e;
	size_t i;
	int ret;

	json_array_foreach(json_object_get(res, "ips"), i, e)
	{
		ret = add_address(ns, ifindex, json_string_value(json_object_get(e, "address")),
				  err, errlen);
		if (ret)
			return ret;
	}
	json_array_foreach(json_object_get(res, "routes"), i, e)
	{
		ret = add_route(ns, ifindex, res, e, err, errlen);
		if (ret)
			return ret;
	}
	return 0;
}

struct addr_find {
	int ifindex;
	struct nl_addr *want;
	int found;
};

static int parse_addr(struct nl_msg *m, void *arg)
{
	struct addr_find *f = arg;
	struct nlmsghdr *h = nlmsg_hdr(m);
	struct nlattr *tb[IFA_MAX + 1];
	struct ifaddrmsg *ifa;
	struct nlattr *a;

	if (h->nlmsg_type != RTM_NEWADDR || nlmsg_parse(h, sizeof(*ifa), tb, IFA_MAX, NULL) < 0)
		return 0;
	ifa = nlmsg_data(h);
	a = tb[IFA_LOCAL] ? tb[IFA_LOCAL] : tb[IFA_ADDRESS];
	if ((int)ifa->ifa_index != f->ifindex || !a ||
	    ifa->ifa_family != nl_addr_get_family(f->want) ||
	    ifa->ifa_prefixlen != nl_addr_get_prefixlen(f->want))
		return 0;
	if ((unsigned)nla_len(a) == nl_addr_get_len(f->want) &&
	    !memcmp(nla_data(a), nl_addr_get_binary_addr(f->want), (size_t)nla_len(a)))
		f->found = 1;
	return 0;
}

int cni_ipam_check(struct cni_ns *ns, int ifindex, json_t *res, int iface, char *err, size_t errlen)
{
	json_t *e;
	size_t i;

	json_array_foreach(json_object_get(res, "ips"), i, e)
	{
		const char *cidr = json_string_value(json_object_get(e, "address"));
		json_t *idx = json_object_get(e, "interface");
		struct addr_find f = {.ifindex = ifindex};
		struct ifaddrmsg ifa = {0};
		struct nl_msg *msg;
		int ret;

		if (json_is_integer(idx) && json_integer_value(idx) != iface)
			continue;
		if (nl_addr_parse(cidr, AF_UNSPEC, &f.want) < 0)
			return ibvf_errf(err, errlen, -EINVAL, "address %s does not parse", cidr);
		ifa.ifa_family = (unsigned char)nl_addr_get_family(f.want);
		msg = nlmsg_alloc_simple(RTM_GETADDR, NLM_F_REQUEST | NLM_F_DUMP);
		ret = msg && nlmsg_append(msg, &ifa, sizeof(ifa), NLMSG_ALIGNTO) >= 0
			      ? cni_nl_talk(ns->sk, msg, parse_addr, &f)
			      : -ENOMEM;
		nlmsg_free(msg);
		nl_addr_put(f.want);
		if (ret)
			return ibvf_errf(err, errlen, ret, "listing addresses in netns %s: %s",
					 ns->path, strerror(-ret));
		if (!f.found)
			return ibvf_errf(err, errlen, -ENOENT,
					 "address %s is not configured on "
					 "the interface",
					 cidr);
	}
	return 0;
}
