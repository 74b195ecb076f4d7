/* identity.c: who a client is to etcd, as a fleet's history records it: the common name of its client
 * certificate (etcd's user under --client-cert-auth), else the local user and host that ran it; and the
 * password of an etcd user, read from its file. */
#include <errno.h>
#include <pwd.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "dl.h"
#include "etcd.h"

static void crt_deinitp(gnutls_x509_crt_t *crt) {
        if (*crt)
                gnutls_api.x509_crt_deinit(*crt);
}

static void datum_freep(gnutls_datum_t *d) {
        if (d->data)
                (*gnutls_api.free)(d->data);
}

static int cert_cn(const char *file, char *buf, size_t size) {
        _cleanup_(datum_freep) gnutls_datum_t data = { 0 };
        _cleanup_(crt_deinitp) gnutls_x509_crt_t crt = NULL;
        size_t n = size;

        if (dl_load_curl(NULL) < 0 || gnutls_api.load_file(file, &data) < 0)
                return -EIO;
        if (gnutls_api.x509_crt_init(&crt) < 0 ||
            gnutls_api.x509_crt_import(crt, &data, GNUTLS_X509_FMT_PEM) < 0 ||
            gnutls_api.x509_crt_get_dn_by_oid(crt, GNUTLS_OID_X520_COMMON_NAME, 0, 0, buf, &n) < 0)
                return -EINVAL;
        return 0;
}

void etcd_identity(const EtcdCredentials *creds, char *buf, size_t size) {
        char cn[256], host[256] = "";
        const struct passwd *pw = getpwuid(getuid());

        if (creds && creds->user && *creds->user) {
                snprintf(buf, size, "%s", creds->user);
                return;
        }
        if (creds && creds->cert && cert_cn(creds->cert, cn, sizeof(cn)) >= 0) {
                snprintf(buf, size, "%s (client certificate)", cn);
                return;
        }
        (void) gethostname(host, sizeof(host) - 1);
        if (pw)
                snprintf(buf, size, "%s@%s", pw->pw_name, host);
        else
                snprintf(buf, size, "uid %u@%s", (unsigned) getuid(), host);
}

int etcd_password_read(const EtcdCredentials *creds, char **ret, Error *reterr) {
        _cleanup_free_ char *line = NULL;
        size_t n = 0;
        ssize_t len;
        FILE *f;

        *ret = NULL;
        if (!creds->user && !creds->password_file)
                return 0;
        if (!creds->user || !*creds->user || !creds->password_file)
                return error_set(reterr, EINVAL, ERROR_INVALID_VALUE,
                                 creds->user && *creds->user
                                         ? "an etcd user (%s) needs its password's file too"
                                         : "an etcd password file (%s) needs its user too",
                                 creds->user && *creds->user ? creds->user : creds->password_file);
        f = fopen(creds->password_file, "re");
        if (!f)
                return error_set(reterr, errno, ERROR_INVALID_VALUE, "%s: %m", creds->password_file);
        len = getline(&line, &n, f);
        fclose(f);
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
                line[--len] = 0;
        if (len <= 0)
                return error_set(reterr, EINVAL, ERROR_INVALID_VALUE, "%s: no password in its first line",
                                 creds->password_file);
        *ret = TAKE_PTR(line);
        return 0;
}
