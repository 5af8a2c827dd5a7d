/* SPDX-License-Identifier: MIT */
/*
 * The one logging module of ibvf.
 *
 * Targets: stderr (foreground, CLI, tests), syslog (daemon as a service) or
 * none (libraries silent unless asked). Levels follow syslog(3). Every line
 * about a VF should name PF, VF index, GUID and PKey (use the IBVF_VF_FMT
 * helpers of the modules that log about VFs) so an operator can grep it.
 * Logging never changes errno.
 */
#ifndef IBVF_LOG_H
#define IBVF_LOG_H

#include <stdarg.h>
#include <stdbool.h>
#include <syslog.h>

enum ibvf_log_target {
	IBVF_LOG_NONE = 0,
	IBVF_LOG_STDERR,
	IBVF_LOG_SYSLOG,
};

/**
 * ibvf_log_init() - choose where log lines go.
 * @ident:  program name shown in each line / passed to openlog(3).
 * @target: see enum ibvf_log_target.
 * @level:  the most verbose level written (LOG_ERR .. LOG_DEBUG).
 */
void ibvf_log_init(const char *ident, enum ibvf_log_target target, int level);

/** ibvf_log_set_level() - change the level at run time. */
void ibvf_log_set_level(int level);

/**
 * ibvf_log_set_json() - stderr lines as JSON objects, one per line:
 * {"time":"2026-01-02T03:04:05.678Z","ident":"ibvfd","level":"info",
 * "message":"..."} (the fields of the text line; time in UTC). Config key
 * log_format (docs/config.md). No effect on syslog.
 */
void ibvf_log_set_json(bool json);

/** ibvf_log_level() - the current level. */
int ibvf_log_level(void);

/**
 * ibvf_log_level_parse() - "error", "warning", "notice", "info", "debug"
 * (also "err", "warn"). Return: the syslog level, or -EINVAL.
 */
int ibvf_log_level_parse(const char *name);

/** ibvf_log_level_name() - inverse of ibvf_log_level_parse(). */
const char *ibvf_log_level_name(int level);

/** ibvf_log() - write one line at @level (a trailing newline is added). */
void ibvf_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void ibvf_vlog(int level, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));

/**
 * ibvf_log_fatal() - a fatal start-up error: logged at LOG_ERR like
 * log_err() and, when the target is syslog, also written to stderr as
 * "<ident>: fatal: <message>" so a daemon started by hand without -f (or
 * on a host without a syslog daemon) shows why it exited; chronyd does the
 * same. Under systemd stderr goes to the journal as well.
 */
void ibvf_log_fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#define log_err(...)	ibvf_log(LOG_ERR, __VA_ARGS__)
#define log_warn(...)	ibvf_log(LOG_WARNING, __VA_ARGS__)
#define log_notice(...) ibvf_log(LOG_NOTICE, __VA_ARGS__)
#define log_info(...)	ibvf_log(LOG_INFO, __VA_ARGS__)
#define log_debug(...)	ibvf_log(LOG_DEBUG, __VA_ARGS__)

#endif /* IBVF_LOG_H */
