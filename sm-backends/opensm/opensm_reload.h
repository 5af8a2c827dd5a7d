/* SPDX-License-Identifier: MIT */
/*
 * Finding the running OpenSM and making it re-read its partition file.
 *
 * OpenSM re-reads partitions.conf on every heavy sweep; SIGHUP starts one
 * (man opensm: "When opensm receives a HUP signal, it starts a new heavy
 * sweep"). Light sweeps do not re-read it. OpenSM writes no pid file of its
 * own; the service that starts it must (Debian's init script writes
 * /var/run/opensm-<port>; see docs/opensm.md for systemd).
 */
#ifndef IBVF_OPENSM_RELOAD_H
#define IBVF_OPENSM_RELOAD_H

#include <stddef.h>
#include <sys/types.h>

/**
 * opensm_find() - read the pid in @pid_file and check that it is a running
 * process (not a zombie: state 'Z' in /proc/PID/stat, nor dead 'X') whose
 * name (/proc/PID/comm, or the file name of /proc/PID/exe) is "opensm".
 * Return: 0 with *@pid; -ESRCH (OpenSM is not running: no pid file, no such
 * process, a zombie, or it is not opensm: the message names what it is;
 * transient in the SM ABI's error contract), -EINVAL (the file does not hold
 * a pid or is not a regular file), or open(2)'s errno (e.g. -EACCES).
 */
int opensm_find(const char *pid_file, pid_t *pid, char *err, size_t errlen);

/**
 * opensm_reload() - opensm_find(), then SIGHUP it.
 * Return: 0 with *@pid, opensm_find()'s errors, or -EPERM/-ESRCH from kill(2).
 */
int opensm_reload(const char *pid_file, pid_t *pid, char *err, size_t errlen);

/**
 * opensm_partition_path() - which partition file process @pid reads:
 * -P/--Pconfig on its command line, else partition_config_file in the
 * -F/--config file (or /etc/opensm/opensm.conf when it exists), else
 * OpenSM's default /etc/opensm/partitions.conf (opensm/main.c,
 * osm_subn_parse_conf_file()). Best effort, for validate().
 * Return: 0 with the path in @buf; -ENOENT/-EACCES when /proc/PID/cmdline
 * cannot be read.
 */
int opensm_partition_path(pid_t pid, char *buf, size_t len, char *err, size_t errlen);

#endif /* IBVF_OPENSM_RELOAD_H */
