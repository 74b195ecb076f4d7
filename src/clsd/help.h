/* help.h: clsd --help. */
#pragma once

void options_help(void);
