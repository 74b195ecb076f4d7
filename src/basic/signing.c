/* signing.c: a minisign or signify secret key read, and a detached Ed25519 signature made with it
 * (libsodium), written as signify writes its own: "untrusted comment: …" and base64 of "Ed", the key's
 * id and the signature. minisign's and signify's public keys both verify it (signature.c). */
#include "signing.h"

#include <errno.h>
#include <sodium.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fileio.h"

#define KEY_ID_SIZE 8
#define KEY_FILE_MAX 4096

struct SecretKey {
        unsigned char id[KEY_ID_SIZE];
        unsigned char sk[crypto_sign_SECRETKEYBYTES]; /* the seed and the public key, as libsodium has it */
};

/* The second line of a key file, decoded: its length, or -EINVAL. */
static int key_bytes(const char *text, size_t size, unsigned char *out, size_t max) {
        const char *nl = memchr(text, '\n', size), *line, *end;
        size_t got = 0;

        if (!nl || strncmp(text, "untrusted comment:", 18) != 0)
                return -EINVAL;
        line = nl + 1;
        end = memchr(line, '\n', size - (size_t) (line - text)) ?: text + size;
        if (end > line && end[-1] == '\r')
                end--;
        if (sodium_base642bin(out, max, line, (size_t) (end - line), NULL, &got, NULL,
                              sodium_base64_VARIANT_ORIGINAL) != 0)
                return -EINVAL;
        return (int) got;
}

/* signify's: "Ed", "BK", the KDF's rounds (0: not encrypted), salt[16], checksum[8] (SHA-512 of the key),
 * the key's id[8], the key[64]. */
static int signify_key(const unsigned char *b, size_t n, SecretKey *k, Error *reterr) {
        unsigned char sum[crypto_hash_sha512_BYTES];

        if (n != 104 || memcmp(b, "EdBK", 4) != 0)
                return -EINVAL;
        if (b[4] | b[5] | b[6] | b[7])
                return error_set(
                        reterr, EINVAL, ERROR_INVALID_VALUE,
                        "the signify key is encrypted: make one with signify -G -n (or decrypt a copy)");
        memcpy(k->id, b + 32, KEY_ID_SIZE);
        memcpy(k->sk, b + 40, sizeof(k->sk));
        crypto_hash_sha512(sum, k->sk, sizeof(k->sk));
        if (memcmp(sum, b + 24, 8) != 0)
                return error_set(reterr, EINVAL, ERROR_INVALID_VALUE,
                                 "the signify key's checksum does not match");
        return 0;
}

/* minisign's: "Ed", the KDF ("\0\0": not encrypted), "B2", salt[32], opslimit[8], memlimit[8], then the
 * key's id[8], the key[64] and a checksum[32] (BLAKE2b-256 of "Ed", the id and the key). */
static int minisign_key(const unsigned char *b, size_t n, SecretKey *k, Error *reterr) {
        unsigned char sum[32], in[2 + KEY_ID_SIZE + crypto_sign_SECRETKEYBYTES];
        const unsigned char *kn = b + 54;

        if (n != 158 || memcmp(b, "Ed", 2) != 0 || memcmp(b + 4, "B2", 2) != 0)
                return -EINVAL;
        if (b[2] | b[3])
                return error_set(
                        reterr, EINVAL, ERROR_INVALID_VALUE,
                        "the minisign key is encrypted: make one with minisign -G -W (or decrypt a copy)");
        /* minisign writes no checksum (zeros) for a key without a password */
        static const unsigned char zero[32];
        memcpy(in, "Ed", 2);
        memcpy(in + 2, kn, KEY_ID_SIZE + crypto_sign_SECRETKEYBYTES);
        crypto_generichash(sum, sizeof(sum), in, sizeof(in), NULL, 0);
        const unsigned char *chk = kn + KEY_ID_SIZE + crypto_sign_SECRETKEYBYTES;
        if (memcmp(chk, zero, sizeof(zero)) != 0 && memcmp(sum, chk, sizeof(sum)) != 0)
                return error_set(reterr, EINVAL, ERROR_INVALID_VALUE,
                                 "the minisign key's checksum does not match");
        memcpy(k->id, kn, KEY_ID_SIZE);
        memcpy(k->sk, kn + KEY_ID_SIZE, sizeof(k->sk));
        return 0;
}

int secret_key_load(const char *path, SecretKey **ret, Error *reterr) {
        _cleanup_free_ char *text = NULL;
        unsigned char b[256];
        size_t size = 0;
        _cleanup_error_ Error e = ERROR_NULL;
        SecretKey *k;
        int n, r;

        if (sodium_init() < 0)
                return error_set(reterr, ENOMEM, ERROR_INTERNAL_ERROR, "libsodium cannot start");
        r = read_full_file(path, KEY_FILE_MAX, &text, &size);
        if (r < 0)
                return error_set(reterr, -r, ERROR_INVALID_VALUE, "%s: %s", path, strerror(-r));
        if (!(k = calloc(1, sizeof(*k))))
                return error_oom(reterr);
        n = key_bytes(text, size, b, sizeof(b));
        r = n == 104   ? signify_key(b, (size_t) n, k, &e)
            : n == 158 ? minisign_key(b, (size_t) n, k, &e)
                       : -EINVAL;
        sodium_memzero(b, sizeof(b));
        if (r >= 0) {
                /* the key's second half is its public key: the one its first half (the seed) makes */
                unsigned char pk[crypto_sign_PUBLICKEYBYTES], sk[crypto_sign_SECRETKEYBYTES];
                if (crypto_sign_seed_keypair(pk, sk, k->sk) != 0 ||
                    memcmp(pk, k->sk + crypto_sign_SEEDBYTES, sizeof(pk)) != 0)
                        r = error_set(&e, EINVAL, ERROR_INVALID_VALUE,
                                      "the key is damaged (its halves do not match)");
                sodium_memzero(sk, sizeof(sk));
        }
        if (r < 0) {
                secret_key_free(k);
                return error_set(reterr, EINVAL, ERROR_INVALID_VALUE, "%s: %s", path,
                                 e.message ?: "not a minisign or signify secret key");
        }
        *ret = k;
        return 0;
}

SecretKey *secret_key_free(SecretKey *k) {
        if (k) {
                sodium_memzero(k, sizeof(*k));
                free(k);
        }
        return NULL;
}

char *secret_key_sign(const SecretKey *k, const void *data, size_t size, const char *comment) {
        unsigned char raw[2 + KEY_ID_SIZE + crypto_sign_BYTES];
        char b64[sodium_base64_ENCODED_LEN(sizeof(raw), sodium_base64_VARIANT_ORIGINAL)];
        char *out = NULL;

        memcpy(raw, "Ed", 2);
        memcpy(raw + 2, k->id, KEY_ID_SIZE);
        crypto_sign_detached(raw + 2 + KEY_ID_SIZE, NULL, data, size, k->sk);
        sodium_bin2base64(b64, sizeof(b64), raw, sizeof(raw), sodium_base64_VARIANT_ORIGINAL);
        if (asprintf(&out, "untrusted comment: %s\n%s\n", comment, b64) < 0)
                return NULL;
        return out;
}
