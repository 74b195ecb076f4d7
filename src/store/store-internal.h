/* store-internal.h: what the store's files share and nothing outside src/store/ may use. */
#pragma once

#include "store.h"
#include "store-policy.h"

struct Store {
        char *dir;
        int dir_fd;
        int documents_fd;
        int hogs_fd; /* what each hog attached last (the hogs themselves are configuration) */
        int objects_fd;
        int policies_fd;
        int lock_fd; /* flock()ed while the store is open */
};

int store_quarantine(Store *s, int from_fd, const char *name, char **ret_path);
int store_list_dir(int dir_fd, const char *suffix, char ***ret, size_t *ret_n);
/* qsort() comparator of char * */
int strcmp_ptr(const void *a, const void *b);
/* An "object" value at path: a digest, an absolute path or an OCI reference; 0, or -EINVAL saying why. */
int object_name_check(const char *o, const char *path, Error *reterr);
int document_file_parse(const char *text, size_t size, StoredDocument *ret, Error *reterr);
int policy_file_parse(const char *text, size_t size, Policy **ret, Error *reterr);
void log_problem(StoreProblemFunc problem, void *userdata, const char *path, const char *reason,
                 const char *moved_to);
