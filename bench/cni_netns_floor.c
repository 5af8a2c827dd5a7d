// SPDX-License-Identifier: MIT
/*
 * cni_netns_floor - the kernel's own floor of a CNI ADD+DEL of one netdev,
 * in one long-lived process (no exec): bench_cni.py feeds it a line per pair
 *
 *     HOST_IFNAME NETNS_PATH POD_IFNAME
 *
 * and it answers with one line
 *
 *     ok ADD_MS DEL_MS ADD_MOVE_MS DEL_MOVE_MS CPU_MS
 *
 * (or "error TEXT"). ADD: open NETNS_PATH, a netlink socket in this netns, the
 * netdev's ifindex by name (RTM_GETLINK), then one RTM_NEWLINK that moves it
 * into the netns (IFLA_NET_NS_FD), renames it POD_IFNAME and sets it up.
 * DEL: open NETNS_PATH and this netns, a netlink socket in NETNS_PATH (setns
 * there and back), POD_IFNAME's ifindex there, then one RTM_NEWLINK that sets
 * it down, renames it HOST_IFNAME and moves it back. That is the kernel work
 * any CNI plugin must have done for this attach, each in its fewest messages
 * (rtnetlink's do_setlink() moves first, then renames, then applies the
 * flags; ib-sriov's one-message move does the same, cni/cni_netns.c).
 * ADD_MS and DEL_MS time all of it (CLOCK_MONOTONIC, ms), the *_MOVE_MS the
 * RTM_NEWLINK and its ACK alone (the rcu_barrier() of
 * __dev_change_net_namespace() is in there), CPU_MS this process's user +
 * system time over the pair (getrusage()). Needs root (CAP_NET_ADMIN and
 * CAP_SYS_ADMIN for setns()). Lab code: never installed.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/if.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <netlink/errno.h>
#include <netlink/netlink.h>
#include <netlink/route/link.h>

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* This process's user + system CPU time so far, ms. */
static double cpu_ms(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 +
	       (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3;
}

/* A NETLINK_ROUTE socket in the netns of @ns_fd (-1: this one); NULL on error. */
static struct nl_sock *route_socket(int ns_fd)
{
	struct nl_sock *sk = nl_socket_alloc();
	int saved = -1, ret;

	if (!sk)
		return NULL;
	if (ns_fd >= 0) {
		saved = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
		if (saved < 0 || setns(ns_fd, CLONE_NEWNET)) {
			if (saved >= 0)
				close(saved);
			nl_socket_free(sk);
			return NULL;
		}
	}
	ret = nl_connect(sk, NETLINK_ROUTE);
	if (saved >= 0) {
		if (setns(saved, CLONE_NEWNET))
			ret = -NLE_FAILURE; /* main() stops: nothing after this is safe */
		close(saved);
	}
	if (ret < 0) {
		nl_socket_free(sk);
		return NULL;
	}
	return sk;
}

/*
 * Look @name up through @sk, then send one change moving it to @to_fd as
 * @new_name with IFF_UP set (@up 1) or cleared (@up 0); *@move_ms the change
 * alone. 0 or a negative libnl error.
 */
static int move(struct nl_sock *sk, const char *name, int to_fd, const char *new_name, int up,
		double *move_ms)
{
	struct rtnl_link *cur = NULL, *orig = rtnl_link_alloc(), *chg = rtnl_link_alloc();
	double t0;
	int ret;

	if (!orig || !chg) {
		ret = -NLE_NOMEM;
		goto out;
	}
	ret = rtnl_link_get_kernel(sk, 0, name, &cur);
	if (ret < 0)
		goto out;
	rtnl_link_set_ifindex(orig, rtnl_link_get_ifindex(cur));
	rtnl_link_set_ns_fd(chg, to_fd);
	rtnl_link_set_name(chg, new_name);
	if (up)
		rtnl_link_set_flags(chg, IFF_UP);
	else
		rtnl_link_unset_flags(chg, IFF_UP);
	t0 = now_ms();
	ret = rtnl_link_change(sk, orig, chg, 0);
	*move_ms = now_ms() - t0;
out:
	if (cur)
		rtnl_link_put(cur);
	if (orig)
		rtnl_link_put(orig);
	if (chg)
		rtnl_link_put(chg);
	return ret;
}

/* One ADD+DEL; @t: ADD, DEL, ADD's move, DEL's move (ms). 0 or a negative libnl error. */
static int pair(const char *host_name, const char *ns_path, const char *pod_name, double t[4])
{
	struct nl_sock *sk;
	int pod, host, ret;
	double t0;

	/* ADD */
	t0 = now_ms();
	pod = open(ns_path, O_RDONLY | O_CLOEXEC);
	if (pod < 0)
		return -NLE_OBJ_NOTFOUND;
	sk = route_socket(-1);
	ret = sk ? move(sk, host_name, pod, pod_name, 1, &t[2]) : -NLE_FAILURE;
	if (sk)
		nl_socket_free(sk);
	close(pod);
	t[0] = now_ms() - t0;
	if (ret < 0)
		return ret;
	/* DEL */
	t0 = now_ms();
	pod = open(ns_path, O_RDONLY | O_CLOEXEC);
	host = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	if (pod < 0 || host < 0)
		ret = -NLE_OBJ_NOTFOUND;
	sk = ret ? NULL : route_socket(pod);
	if (!ret)
		ret = sk ? move(sk, pod_name, host, host_name, 0, &t[3]) : -NLE_FAILURE;
	if (sk)
		nl_socket_free(sk);
	if (pod >= 0)
		close(pod);
	if (host >= 0)
		close(host);
	t[1] = now_ms() - t0;
	return ret;
}

int main(void)
{
	char line[1024], host_name[IFNAMSIZ], pod_name[IFNAMSIZ], ns_path[512];

	setvbuf(stdout, NULL, _IOLBF, 0);
	while (fgets(line, sizeof(line), stdin)) {
		double t[4] = {0}, c0;
		int ret;

		if (sscanf(line, "%15s %511s %15s", host_name, ns_path, pod_name) != 3) {
			printf("error bad request line\n");
			continue;
		}
		c0 = cpu_ms();
		ret = pair(host_name, ns_path, pod_name, t);
		if (ret == -NLE_FAILURE) {
			printf("error netlink socket or setns: %s\n", strerror(errno));
			return 1;
		}
		if (ret < 0)
			printf("error %s\n", nl_geterror(ret));
		else
			printf("ok %.4f %.4f %.4f %.4f %.4f\n", t[0], t[1], t[2], t[3],
			       cpu_ms() - c0);
	}
	return 0;
}
