/* config-file.h: the configuration file's options as argv strings (config-file.c). */
#pragma once

#include <stddef.h>

/* Whether the file may set the option (its full name): 1 yes, -1 it is the command's own (check, flush,
 * …), 0 no such option. */
typedef int (*ConfigMaySet)(const char *name);

/* The file --config names in argv (else default_path when it exists; --config '' for none), made
 * "--name=value" strings (*ret_strings, *ret_n; the caller frees them), and the vector getopt reads:
 * argv[0], the file's, then the rest of argv (which win). -EINVAL said on stderr with the file and line,
 * -EPERM for a file others may change, -ENOMEM. */
int config_file_argv(int argc, char **argv, const char *default_path, ConfigMaySet may_set,
                     char ***ret_strings, size_t *ret_n, char ***ret_argv);
