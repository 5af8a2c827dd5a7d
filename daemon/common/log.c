// SPDX-License-Identifier: MIT
/* The one logging module: stderr (text or JSON lines), syslog or nothing. */
#include "log.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

static enum ibvf_log_target log_target = IBVF_LOG_NONE;
static int log_max = LOG_INFO;
static char log_ident[32] = "ibvf";
static bool log_json;

static const struct {
	const char *name;
	int level;
} level_names[] = {
	{"error", LOG_ERR},	{"err", LOG_ERR},   {"warning", LOG_WARNING}, {"warn", LOG_WARNING},
	{"notice", LOG_NOTICE}, {"info", LOG_INFO}, {"debug", LOG_DEBUG},
};

void ibvf_log_init(const char *ident, enum ibvf_log_target target, int level)
{
	if (ident)
		snprintf(log_ident, sizeof(log_ident), "%s", ident);
	if (log_target == IBVF_LOG_SYSLOG && target != IBVF_LOG_SYSLOG)
		closelog();
	log_target = target;
	log_max = level;
	if (target == IBVF_LOG_SYSLOG)
		openlog(log_ident, LOG_PID | LOG_NDELAY, LOG_DAEMON);
}

void ibvf_log_set_level(int level)
{
	log_max = level;
}

void ibvf_log_set_json(bool json)
{
	log_json = json;
}

int ibvf_log_level(void)
{
	return log_max;
}

int ibvf_log_level_parse(const char *name)
{
	for (size_t i = 0; i < sizeof(level_names) / sizeof(level_names[0]); i++)
		if (name && !strcasecmp(name, level_names[i].name))
			return level_names[i].level;
	return -EINVAL;
}

const char *ibvf_log_level_name(int level)
{
	for (size_t i = 0; i < sizeof(level_names) / sizeof(level_names[0]); i++)
		if (level_names[i].level == level)
			return level_names[i].name;
	return "?";
}

static const char *level_tag(int level)
{
	switch (level) {
	case LOG_EMERG:
	case LOG_ALERT:
	case LOG_CRIT:
	case LOG_ERR:
		return "error";
	case LOG_WARNING:
		return "warning";
	case LOG_NOTICE:
		return "notice";
	case LOG_INFO:
		return "info";
	default:
		return "debug";
	}
}

/*
 * One JSON object per line, the fields of the text line: time (RFC 3339,
 * UTC, ms), ident, level, message. jansson escapes control characters, so
 * a message with a newline stays one line; bytes that are not UTF-8 (a
 * name read from sysfs, say) become '?' since JSON text must be UTF-8.
 */
static void json_line(const struct timespec *ts, int level, char *msg)
{
	char when[80];
	struct tm tm;
	json_t *o, *m;
	char *s;

	gmtime_r(&ts->tv_sec, &tm);
	snprintf(when, sizeof(when), "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", tm.tm_year + 1900,
		 tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
		 ts->tv_nsec / 1000000);
	m = json_string(msg);
	if (!m) {
		for (char *p = msg; *p; p++)
			if ((unsigned char)*p >= 0x80)
				*p = '?';
		m = json_string(msg);
	}
	o = json_pack("{s:s,s:s,s:s,s:o*}", "time", when, "ident", log_ident, "level",
		      level_tag(level), "message", m);
	s = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
	if (s)
		fprintf(stderr, "%s\n", s);
	else /* out of memory: still say something */
		fprintf(stderr,
			"{\"level\":\"%s\",\"message\":\"(log line lost: out of memory)\"}\n",
			level_tag(level));
	free(s);
	json_decref(o);
}

void ibvf_vlog(int level, const char *fmt, va_list ap)
{
	int saved = errno;

	if (level > log_max || log_target == IBVF_LOG_NONE)
		goto out;
	if (log_target == IBVF_LOG_SYSLOG) {
		vsyslog(level, fmt, ap);
	} else {
		char line[2048];
		struct timespec ts;
		struct tm tm;

		clock_gettime(CLOCK_REALTIME, &ts);
		vsnprintf(line, sizeof(line), fmt, ap);
		if (log_json) {
			json_line(&ts, level, line);
		} else {
			localtime_r(&ts.tv_sec, &tm);
			fprintf(stderr, "%02d:%02d:%02d.%03ld %s %s: %s\n", tm.tm_hour, tm.tm_min,
				tm.tm_sec, ts.tv_nsec / 1000000, log_ident, level_tag(level), line);
		}
	}
out:
	errno = saved;
}

void ibvf_log(int level, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	ibvf_vlog(level, fmt, ap);
	va_end(ap);
}

void ibvf_log_fatal(const char *fmt, ...)
{
	int saved = errno;
	va_list ap;

	va_start(ap, fmt);
	ibvf_vlog(LOG_ERR, fmt, ap);
	va_end(ap);
	if (log_target == IBVF_LOG_SYSLOG) {
		char line[2048];

		va_start(ap, fmt);
		vsnprintf(line, sizeof(line), fmt, ap);
		va_end(ap);
		fprintf(stderr, "%s: fatal: %s\n", log_ident, line);
	}
	errno = saved;
}
