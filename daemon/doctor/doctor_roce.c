// SPDX-License-Identifier: MIT
/*
 * ibvfctl doctor: RoCE on a node with several RDMA netdevs. With more than
 * one interface in one IP subnet, Linux answers ARP for any local address on
 * any interface and may route replies out of another one, so RoCE's
 * GID-to-MAC resolution picks the wrong port: arp_ignore=1,
 * arp_announce=2 and a loose (2) or disabled (0) rp_filter per interface
 * fix it. The kernel uses max(all, <if>) for each of the three
 * (Documentation/networking/ip-sysctl.rst).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "doctor_int.h"

#define SRC_ROCE                                                                                   \
	"Linux Documentation/networking/ip-sysctl.rst (arp_ignore, arp_announce, "                 \
	"rp_filter); NVIDIA RoCE multi-port configuration notes"

static int sysctl(struct dr *d, const char *ifname, const char *key)
{
	char a[16], b[16];
	int all = dr_read(d, a, sizeof(a), "/proc/sys/net/ipv4/conf/all/%s", key) > 0 ? atoi(a) : 0;
	int one = dr_read(d, b, sizeof(b), "/proc/sys/net/ipv4/conf/%s/%s", ifname, key) > 0
			  ? atoi(b)
			  : 0;

	return all > one ? all : one;
}

/* The netdev of RoCE device @dev port 1 (gid_attrs/ndevs/0), "" when none. */
static void roce_netdev(struct dr *d, const char *dev, char *out, size_t len)
{
	if (dr_read(d, out, len, "/sys/class/infiniband/%s/ports/1/gid_attrs/ndevs/0", dev) <= 0)
		out[0] = '\0';
}

void dr_check_roce(struct dr *d)
{
	char names[8][64], ev[2048] = "";
	size_t n = 0, nn = 0;
	int bad = 0;

	for (size_t i = 0; i < d->n_devs && nn < 8; i++)
		if (d->devs[i].ethernet) {
			roce_netdev(d, d->devs[i].name, names[nn], sizeof(names[0]));
			nn += names[nn][0] != '\0';
		}
	if (nn < 2) {
		dr_add(d, "roce.arp", IBVF_DOCTOR_NA, NULL, SRC_ROCE,
		       "%zu RoCE netdev(s): the ARP rules matter with two or more", nn);
		return;
	}
	for (size_t i = 0; i < nn; i++) {
		int ign = sysctl(d, names[i], "arp_ignore"),
		    ann = sysctl(d, names[i], "arp_announce"),
		    rp = sysctl(d, names[i], "rp_filter");
		bool ok = (ign == 1 || ign == 2) && ann == 2 && rp != 1;

		bad += !ok;
		n += (size_t)snprintf(ev + n, n < sizeof(ev) ? sizeof(ev) - n : 0,
				      "%s%s arp_ignore=%d arp_announce=%d rp_filter=%d%s",
				      n ? "; " : "", names[i], ign, ann, rp, ok ? "" : " (wrong)");
	}
	dr_add(d, "roce.arp", bad ? IBVF_DOCTOR_WARN : IBVF_DOCTOR_OK,
	       "for each RoCE netdev: sysctl net.ipv4.conf.<if>.arp_ignore=1 arp_announce=2 "
	       "rp_filter=2 (persist in /etc/sysctl.d/)",
	       SRC_ROCE, "%zu RoCE netdevs: %s", nn, ev);
}
