/* options.h: clsd's command line and configuration file, parsed into one struct that the composition root
 * (main.c) hands to the daemon, the API and the fleet. */
#pragma once

#include <stdbool.h>

#include "api.h"
#include "daemon.h"
#include "fleet.h"
#include "oci.h"

#define OBJECT_DIRS_MAX 16
#define OBJECT_DIR_DEFAULT "/usr/lib/clsd"
#define CONFIG_FILE_DEFAULT "/etc/clsd/clsd.conf"
#define DEFAULT_STATE_DIR "/var/lib/clsd"
#define DEFAULT_SOCKET "/run/clsd/clsd.sock"
#define REGISTRIES_FILE_DEFAULT "/etc/clsd/registries.json"

typedef struct Options {
        DaemonConfig daemon;
        ApiConfig api;
        FleetConfig fleet;
        bool check; /* --check[=FILE]: validate the hogs (or FILE) and exit */
        const char *check_file;
        bool flush; /* --flush: remove what clsd attached and exit */
        const char *trusted_keys_dir;
        const char *registries_file; /* --registries (NULL: the default, if it exists) */
        /* --object-dir as given, then each one's real path (NULL-terminated) for the API and the daemon */
        const char *object_dirs_given[OBJECT_DIRS_MAX];
        size_t n_object_dirs;
        char *object_dirs_real[OBJECT_DIRS_MAX + 1];
        /* owned: the configuration file's options as argv strings, the vector getopt permutes, the keys */
        char **config_strings;
        size_t n_config_strings;
        char **argv;
        TrustedKeys *trusted_keys;
        OciRegistries *registries;
} Options;

/* The configuration file's options, then the command line's (which win), into o with the defaults
 * around them: 1 to run, 0 to exit 0 (--help, --version), -EINVAL for a usage error (said on stderr),
 * -ENOMEM. */
int options_parse(Options *o, int argc, char **argv);
/* What the options name, made real: the trusted keys and the registries file read (-EINVAL said on
 * stderr, or 0). */
int options_resolve(Options *o);
/* The registries file --registries names (or the default one, if it exists), read. */
int options_registries_load(const Options *o, OciRegistries **ret, Error *reterr);
/* The object directories' real paths, for the API and the daemon (-EINVAL said on stderr, or 0). */
int options_resolve_object_dirs(Options *o);
void options_done(Options *o);
/* Whether the configuration file may set the option (full name): how clsd runs, not what the command
 * does (check, flush, worker, help, version, config are the command line's). */
bool options_file_may_set(const char *name);
