/* SPDX-License-Identifier: MIT */
/*
 * systemd readiness notification without libsystemd: one datagram to the
 * AF_UNIX socket named by $NOTIFY_SOCKET (a path, or "@name" for the abstract
 * namespace), as sd_notify(3) describes ("READY=1", "STOPPING=1",
 * "RELOADING=1", "STATUS=...").
 */
#ifndef IBVF_SD_NOTIFY_H
#define IBVF_SD_NOTIFY_H

/**
 * ibvf_sd_notify() - send @state (newline-separated assignments).
 * Return: 1 sent, 0 $NOTIFY_SOCKET unset (not under systemd), -errno on error.
 */
int ibvf_sd_notify(const char *state);

#endif /* IBVF_SD_NOTIFY_H */
