/* signature.c: minisign and signify signatures over libsodium's Ed25519 and BLAKE2b. */
#include "signature.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sodium.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fileio.h"
#include "sha256.h"
#include "signature-cosign.h"

#define KEY_ID_SIZE 8
#define KEY_FILE_MAX 4096
#define SIG_LINE_MAX 1024

typedef struct TrustedKey {
        unsigned char id[KEY_ID_SIZE];
        unsigned char pk[crypto_sign_PUBLICKEYBYTES];
        char *file;
} TrustedKey;

struct TrustedKeys {
        TrustedKey *keys;
        size_t n;
        CosignKey *cosign; /* cosign's: ECDSA P-256 in PEM (cosign.pub) */
        size_t n_cosign;
};

#define PEM_PUBLIC_KEY "-----BEGIN PUBLIC KEY-----"

static int cosign_key_add(TrustedKeys *k, const char *file, char **text, size_t size, Error *reterr) {
        CosignKey *v;

        if (cosign_key_check(*text, size, reterr) < 0)
                return -EINVAL;
        v = realloc(k->cosign, (k->n_cosign + 1) * sizeof(*v));
        if (!v)
                return -ENOMEM;
        k->cosign = v;
        v[k->n_cosign] = (CosignKey){ .pem = *text, .size = size, .file = strdup(file) };
        if (!v[k->n_cosign].file)
                return -ENOMEM;
        *text = NULL;
        k->n_cosign++;
        return 0;
}

/* Splits text into at most max lines (without their '\n'; a '\r' before it is dropped): their count,
 * or -EINVAL for a line too long, a NUL byte, or more than max lines. */
static int split_lines(const char *text, size_t size, char lines[][SIG_LINE_MAX], size_t max) {
        size_t n = 0, i = 0;

        while (i < size) {
                const char *nl = memchr(text + i, '\n', size - i);
                size_t end = nl ? (size_t) (nl - text) : size, len = end - i;
                if (n == max || len >= SIG_LINE_MAX || memchr(text + i, '\0', len))
                        return -EINVAL;
                if (len > 0 && text[i + len - 1] == '\r')
                        len--;
                memcpy(lines[n], text + i, len);
                lines[n++][len] = '\0';
                i = end + 1;
        }
        while (n > 0 && !lines[n - 1][0]) /* a blank line at the end */
                n--;
        return (int) n;
}

/* Decodes a base64 line into exactly size bytes. */
static bool decode_exact(const char *line, void *out, size_t size) {
        size_t got = 0;

        return sodium_base642bin(out, size, line, strlen(line), NULL, &got, NULL,
                                 sodium_base64_VARIANT_ORIGINAL) == 0 &&
               got == size;
}

static int key_parse(const char *text, size_t size, TrustedKey *k) {
        char lines[2][SIG_LINE_MAX];
        unsigned char raw[2 + KEY_ID_SIZE + crypto_sign_PUBLICKEYBYTES];
        int n = split_lines(text, size, lines, 2);

        if (n != 2 || strncmp(lines[0], "untrusted comment:", 18) != 0 ||
            !decode_exact(lines[1], raw, sizeof(raw)) || memcmp(raw, "Ed", 2) != 0)
                return -EINVAL;
        memcpy(k->id, raw + 2, KEY_ID_SIZE);
        memcpy(k->pk, raw + 2 + KEY_ID_SIZE, sizeof(k->pk));
        return 0;
}

static void key_id_string(const unsigned char id[KEY_ID_SIZE], char out[2 * KEY_ID_SIZE + 1]) {
        /* as minisign prints it: the little-endian 64-bit number in hex, without leading zeros */
        uint64_t v = 0;

        for (int i = KEY_ID_SIZE - 1; i >= 0; i--)
                v = v << 8 | id[i];
        snprintf(out, 2 * KEY_ID_SIZE + 1, "%" PRIX64, v);
}

int trusted_keys_load(const char *dir, TrustedKeys **ret, Error *reterr) {
        _cleanup_(closedirp) DIR *d = opendir(dir);
        TrustedKeys *k = calloc(1, sizeof(*k));
        struct dirent *de;

        if (!k)
                return error_oom(reterr);
        if (!d) {
                free(k);
                return error_set(reterr, errno, ERROR_INVALID_CONFIG, "--trusted-keys %s: %s", dir,
                                 strerror(errno));
        }
        while ((de = readdir(d))) {
                _cleanup_free_ char *path = NULL, *text = NULL;
                size_t len = strlen(de->d_name), size;
                TrustedKey key = { 0 };
                int r;

                if (de->d_name[0] == '.' || len < 5 || strcmp(de->d_name + len - 4, ".pub") != 0)
                        continue;
                if (asprintf(&path, "%s/%s", dir, de->d_name) < 0) {
                        path = NULL;
                        trusted_keys_free(k);
                        return error_oom(reterr);
                }
                r = read_regular_file(path, KEY_FILE_MAX, &text, &size);
                if (r >= 0 && startswith(text, PEM_PUBLIC_KEY)) {
                        r = cosign_key_add(k, de->d_name, &text, size, NULL);
                        if (r == 0)
                                continue;
                } else if (r >= 0)
                        r = key_parse(text, size, &key);
                for (size_t i = 0; r >= 0 && i < k->n; i++)
                        if (memcmp(k->keys[i].id, key.id, KEY_ID_SIZE) == 0)
                                r = -EEXIST;
                if (r < 0) {
                        trusted_keys_free(k);
                        return error_set(
                                reterr, EINVAL, ERROR_INVALID_CONFIG, "--trusted-keys: %s: %s", path,
                                r == -EINVAL
                                        ? "not a minisign, signify or cosign (ECDSA, PEM) public key file"
                                : r == -EEXIST ? "a key id another file holds"
                                               : strerror(-r));
                }
                TrustedKey *v = realloc(k->keys, (k->n + 1) * sizeof(*v));
                if (v)
                        k->keys = v;
                if (!v || !(key.file = strdup(de->d_name))) {
                        trusted_keys_free(k);
                        return error_oom(reterr);
                }
                k->keys = v;
                k->keys[k->n++] = key;
        }
        *ret = k;
        return 0;
}

TrustedKeys *trusted_keys_free(TrustedKeys *k) {
        if (!k)
                return NULL;
        for (size_t i = 0; i < k->n; i++)
                free(k->keys[i].file);
        for (size_t i = 0; i < k->n_cosign; i++) {
                free(k->cosign[i].pem);
                free(k->cosign[i].file);
        }
        free(k->cosign);
        free(k->keys);
        free(k);
        return NULL;
}

size_t trusted_keys_count(const TrustedKeys *k) {
        return k ? k->n + k->n_cosign : 0;
}

int trusted_keys_verify(const TrustedKeys *k, const void *data, size_t size, const char *sig,
                        size_t sig_size, const char *what, Error *reterr) {
        char lines[4][SIG_LINE_MAX], id[2 * KEY_ID_SIZE + 1];
        unsigned char raw[2 + KEY_ID_SIZE + crypto_sign_BYTES], global[crypto_sign_BYTES];
        unsigned char hash[crypto_generichash_BYTES_MAX];
        const TrustedKey *key = NULL;
        int n;

        if (!sig)
                return error_set(reterr, EPERM, ERROR_OBJECT_UNSIGNED,
                                 "%s is not signed, and only objects a trusted key signed are loaded "
                                 "(--trusted-keys)",
                                 what);
        if (sig_size > 0 && sig[0] == '{') { /* a pulled image's cosign signatures (src/oci/pull.c) */
                char digest[SHA256_DIGEST_STRING_MAX];
                sha256_digest_string(data, size, digest);
                if (!k || k->n_cosign == 0)
                        return error_set(
                                reterr, EPERM, ERROR_OBJECT_SIGNATURE_INVALID,
                                "%s is signed with cosign, and no trusted key is a cosign key (an ECDSA "
                                "public key in PEM, as cosign.pub)",
                                what);
                return cosign_verify(k->cosign, k->n_cosign, digest, sig, sig_size, what, reterr);
        }
        n = split_lines(sig, sig_size, lines, 4);
        if ((n != 2 && n != 4) || strncmp(lines[0], "untrusted comment:", 18) != 0 ||
            !decode_exact(lines[1], raw, sizeof(raw)) ||
            (memcmp(raw, "Ed", 2) != 0 && memcmp(raw, "ED", 2) != 0) ||
            (n == 4 && (strncmp(lines[2], "trusted comment: ", 17) != 0 ||
                        !decode_exact(lines[3], global, sizeof(global)))))
                return error_set(reterr, EPERM, ERROR_OBJECT_SIGNATURE_INVALID,
                                 "%s: the signature is not a minisign or signify signature", what);
        key_id_string(raw + 2, id);
        for (size_t i = 0; k && i < k->n && !key; i++)
                if (memcmp(k->keys[i].id, raw + 2, KEY_ID_SIZE) == 0)
                        key = &k->keys[i];
        if (!key)
                return error_set(reterr, EPERM, ERROR_OBJECT_SIGNATURE_INVALID,
                                 "%s is signed by key %s, which is not a trusted key", what, id);
        if (raw[1] == 'D') { /* minisign's prehashed signature: over the BLAKE2b-512 of the bytes */
                crypto_generichash(hash, sizeof(hash), data, size, NULL, 0);
                data = hash;
                size = sizeof(hash);
        }
        if (crypto_sign_verify_detached(raw + 2 + KEY_ID_SIZE, data, size, key->pk) != 0)
                return error_set(reterr, EPERM, ERROR_OBJECT_SIGNATURE_INVALID,
                                 "%s: the signature by key %s (%s) does not match its bytes: altered, or "
                                 "signed as something else",
                                 what, id, key->file);
        if (n == 4) { /* minisign signs its trusted comment together with the signature */
                size_t clen = strlen(lines[2] + 17);
                _cleanup_free_ unsigned char *m = malloc(crypto_sign_BYTES + clen);
                if (!m)
                        return error_oom(reterr);
                memcpy(m, raw + 2 + KEY_ID_SIZE, crypto_sign_BYTES);
                memcpy(m + crypto_sign_BYTES, lines[2] + 17, clen);
                if (crypto_sign_verify_detached(global, m, crypto_sign_BYTES + clen, key->pk) != 0)
                        return error_set(reterr, EPERM, ERROR_OBJECT_SIGNATURE_INVALID,
                                         "%s: the trusted comment of its signature by key %s was altered",
                                         what, id);
        }
        return 0;
}
