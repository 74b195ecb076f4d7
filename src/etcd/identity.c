/* identity.c: who a client is to etcd, as a fleet's history records it: the common name of its client
 * certificate (etcd's user under --client-cert-auth), else the local user and host that ran it. */
#include <pwd.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "etcd-dl.h"
#include "etcd.h"

static int cert_cn(const char *file, char *buf, size_t size) {
        gnutls_datum_t data = { 0 };
        gnutls_x509_crt_t crt = NULL;
        size_t n = size;
        int r;

        if (etcd_dl_load(NULL) < 0 || gnutls_api.load_file(file, &data) < 0)
                return -EIO;
        r = gnutls_api.x509_crt_init(&crt);
        if (r >= 0)
                r = gnutls_api.x509_crt_import(crt, &data, GNUTLS_X509_FMT_PEM);
        if (r >= 0)
                r = gnutls_api.x509_crt_get_dn_by_oid(crt, GNUTLS_OID_X520_COMMON_NAME, 0, 0, buf, &n);
        if (crt)
                gnutls_api.x509_crt_deinit(crt);
        (*gnutls_api.free)(data.data);
        return r < 0 ? -EINVAL : 0;
}

void etcd_identity(const EtcdTls *tls, const char *user, char *buf, size_t size) {
        char cn[256], host[256] = "";
        const struct passwd *pw = getpwuid(getuid());

        if (user && *user) {
                snprintf(buf, size, "%s", user);
                return;
        }
        if (tls && tls->cert && cert_cn(tls->cert, cn, sizeof(cn)) >= 0) {
                snprintf(buf, size, "%s (client certificate)", cn);
                return;
        }
        (void) gethostname(host, sizeof(host) - 1);
        if (pw)
                snprintf(buf, size, "%s@%s", pw->pw_name, host);
        else
                snprintf(buf, size, "uid %u@%s", (unsigned) getuid(), host);
}
