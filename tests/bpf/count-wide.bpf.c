// SPDX-License-Identifier: GPL-2.0
/* count-wide.bpf.c: contrib's counter with a map of 2 entries: the same instructions, so the same
 * program tag, but another object and another program. */
#define COUNTERS_MAX_ENTRIES 2
#include "../../contrib/bpf/count.bpf.c"
