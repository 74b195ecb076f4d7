/* dbus-auth.c: who a D-Bus caller is (its uid, capabilities and user namespace, as the kernel says of its
 * pid) and what it may do: reads for everyone or the reader role, changes for root or CAP_NET_ADMIN (or
 * the operator role); each change audited. */
#include <linux/capability.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-bus.h>

#include "api-internal.h"
#include "log.h"

#include "log.h"
#include "dbus.h"

/* The effective uid and capabilities of pid, from one read of /proc/PID/status (so from one moment). */
static int proc_status(pid_t pid, uid_t *ret_euid, uint64_t *ret_caps) {
        char path[64], line[256];
        _cleanup_fclose_ FILE *f = NULL;
        bool have_uid = false, have_caps = false;

        snprintf(path, sizeof(path), "/proc/%d/status", (int) pid);
        f = fopen(path, "re");
        if (!f)
                return -errno;
        while (fgets(line, sizeof(line), f)) {
                unsigned long r, e;
                unsigned long long caps;
                if (sscanf(line, "Uid: %lu %lu", &r, &e) == 2) {
                        *ret_euid = (uid_t) e;
                        have_uid = true;
                } else if (sscanf(line, "CapEff: %llx", &caps) == 1) {
                        *ret_caps = caps;
                        have_caps = true;
                }
        }
        return have_uid && have_caps ? 0 : -EBADMSG;
}

/* Whether pid is in clsd's user namespace. Capabilities are relative to the namespace that holds them:
 * an unprivileged user's "unshare -Ur" shows a full CapEff that is worth nothing to the host. */
static bool same_user_namespace(pid_t pid) {
        struct stat mine, theirs;
        char path[64];

        snprintf(path, sizeof(path), "/proc/%d/ns/user", (int) pid);
        return stat("/proc/self/ns/user", &mine) == 0 && stat(path, &theirs) == 0 &&
               mine.st_dev == theirs.st_dev && mine.st_ino == theirs.st_ino;
}

/* The audit's who of a D-Bus caller. */
void bus_who(sd_bus_message *m, char *buf, size_t size) {
        _cleanup_(sd_bus_creds_unrefp) sd_bus_creds *creds = NULL;
        uid_t euid = (uid_t) -1;
        pid_t pid = 0;

        if (sd_bus_query_sender_creds(m, SD_BUS_CREDS_EUID | SD_BUS_CREDS_PID, &creds) >= 0) {
                (void) sd_bus_creds_get_euid(creds, &euid);
                (void) sd_bus_creds_get_pid(creds, &pid);
        }
        snprintf(buf, size, "uid %d pid %d (D-Bus %s)", (int) euid, (int) pid,
                 strna(sd_bus_message_get_sender(m)));
}

void bus_audit(ApiDbus *b, sd_bus_message *m, unsigned status, const char *code) {
        char who[128], path[128];

        bus_who(m, who, sizeof(who));
        snprintf(path, sizeof(path), "org.clsd1.Manager.%s", strna(sd_bus_message_get_member(m)));
        api_audit(b->api,
                  &(AuditRecord){
                          .who = who, .method = "CALL", .path = path, .status = status, .code = code });
}

/* The access file's role for a uid: its grants and those of its groups in the user database (primary and
 * supplementary, as many as it has). */
static Role bus_role(const Api *a, uid_t uid) {
        _cleanup_free_ gid_t *gids = NULL;
        struct passwd *pw = getpwuid(uid);
        int n = 64;

        if (!pw)
                return access_role_of_unix(a->access, uid, NULL, 0);
        for (;;) {
                gid_t *v = realloc(gids, (size_t) n * sizeof(gid_t));
                int want = n;
                if (!v)
                        return access_role_of_unix(a->access, uid, &pw->pw_gid, 1);
                gids = v;
                if (getgrouplist(pw->pw_name, pw->pw_gid, gids, &want) >= 0) {
                        n = want;
                        break;
                }
                if (want <= n) /* no size to grow to: the primary group at least */
                        return access_role_of_unix(a->access, uid, &pw->pw_gid, 1);
                n = want;
        }
        return access_role_of_unix(a->access, uid, gids, (size_t) n);
}

/* With an access file, the methods that return documents and map contents need the reader role (root
 * always has it); the properties and signals are the bus policy's to grant. */
int require_reader(const Api *a, sd_bus_message *m, sd_bus_error *error) {
        _cleanup_(sd_bus_creds_unrefp) sd_bus_creds *creds = NULL;
        uid_t euid = (uid_t) -1;

        if (!a->access)
                return 0;
        if (sd_bus_query_sender_creds(m, SD_BUS_CREDS_EUID, &creds) >= 0 &&
            sd_bus_creds_get_euid(creds, &euid) >= 0 && (euid == 0 || bus_role(a, euid) >= ROLE_READER))
                return 0;
        log_warning("D-Bus: %s refused to %s (uid %d): needs the reader role (--access-file)",
                    sd_bus_message_get_member(m), strna(sd_bus_message_get_sender(m)), (int) euid);
        return sd_bus_error_setf(error, SD_BUS_ERROR_ACCESS_DENIED,
                                 "%s needs the reader role (--access-file)", sd_bus_message_get_member(m));
}

/* Root, an operator of the access file, or CAP_NET_ADMIN in the caller's effective set, in clsd's user
 * namespace. The euid and pid are
 * the ones dbus-daemon vouches for (the euid as the bus's namespace sees it: a user namespace's root
 * is its owner there). dbus-daemon 1.14 passes no pidfd, so the capabilities come from the caller's
 * /proc/PID/status; that read must show the euid the bus does, so that a caller which execs a setuid
 * program after sending cannot lend it its PID (what it would find there is the new euid). */
int require_privilege(const Api *a, sd_bus_message *m, sd_bus_error *error) {
        _cleanup_(sd_bus_creds_unrefp) sd_bus_creds *creds = NULL;
        uid_t euid = (uid_t) -1, proc_euid = (uid_t) -1;
        uint64_t caps = 0;
        pid_t pid = 0;

        if (sd_bus_query_sender_creds(m, SD_BUS_CREDS_EUID | SD_BUS_CREDS_PID, &creds) >= 0 &&
            sd_bus_creds_get_euid(creds, &euid) >= 0) {
                if (euid == 0)
                        return 0;
                /* An operator of the access file: the uid the bus vouches for, and its groups in the
                 * user database (as dbus-daemon's own group policies take them). */
                if (a->access && bus_role(a, euid) == ROLE_OPERATOR)
                        return 0;
                if (sd_bus_creds_get_pid(creds, &pid) >= 0 && pid > 0 &&
                    proc_status(pid, &proc_euid, &caps) >= 0 && proc_euid == euid &&
                    (caps & (UINT64_C(1) << CAP_NET_ADMIN)) && same_user_namespace(pid))
                        return 0;
        }
        log_warning("D-Bus: %s refused to %s (uid %d): needs root, CAP_NET_ADMIN (in the host's user "
                    "namespace) or the operator role (--access-file)",
                    sd_bus_message_get_member(m), strna(sd_bus_message_get_sender(m)), (int) euid);
        return sd_bus_error_setf(error, SD_BUS_ERROR_ACCESS_DENIED,
                                 "%s needs root, CAP_NET_ADMIN or the operator role",
                                 sd_bus_message_get_member(m));
}
