/* SPDX-License-Identifier: MIT */
/*
 * The clocks, each written once: CLOCK_MONOTONIC (clock_gettime(2)), immune
 * to wall-clock steps, for every deadline, timeout and duration; and
 * CLOCK_REALTIME only for timestamps that are stored or shown to people
 * (the GUID pool's allocated/released times).
 */
#ifndef IBVF_CLOCK_H
#define IBVF_CLOCK_H

#include <stdint.h>

/** ibvf_mono_ms() - CLOCK_MONOTONIC in milliseconds. */
int64_t ibvf_mono_ms(void);

/** ibvf_mono_ns() - CLOCK_MONOTONIC in nanoseconds. */
uint64_t ibvf_mono_ns(void);

/** ibvf_wall_ms() - CLOCK_REALTIME in milliseconds since the Unix epoch. */
int64_t ibvf_wall_ms(void);

struct timespec;

/**
 * ibvf_mono_deadline_us() - @ts = CLOCK_MONOTONIC now + @us microseconds
 * (@us >= 0), normalised (tv_nsec < 1e9): the absolute time
 * pthread_cond_timedwait() takes on a condition variable whose clock is
 * CLOCK_MONOTONIC (pthread_condattr_setclock(3)).
 */
void ibvf_mono_deadline_us(int64_t us, struct timespec *ts);

#endif /* IBVF_CLOCK_H */
