/* SHA-256 and HMAC-SHA-256 through libcrypto (OpenSSL's EVP interface): the
 * hashes of tensor bytes and argument text, and the keyed hashes of secret
 * values. libzip, which the pack writer already needs, links libcrypto
 * itself, so the shim loads no library it did not load before; OpenSSL picks
 * the CPU's SHA extensions when there are some. */
#include "cc_internal.h"

#include <limits.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

static void msp_cc_hex(const unsigned char *md, unsigned n, char hex[65])
{
    static const char digits[] = "0123456789abcdef";
    for (unsigned i = 0; i < n && i < 32; i++) {
        hex[2 * i] = digits[md[i] >> 4];
        hex[2 * i + 1] = digits[md[i] & 15];
    }
    hex[n == 32 ? 64 : 0] = '\0';
}

int msp_cc_sha256_hex(const void *data, size_t len, char hex[65])
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned n = 0;
    if (!EVP_Digest(len ? data : "", len, md, &n, EVP_sha256(), NULL) || n != 32) {
        hex[0] = '\0';
        return -1;
    }
    msp_cc_hex(md, n, hex);
    return 0;
}

int msp_cc_hmac_sha256_hex(const void *key, size_t klen, const void *msg, size_t mlen, char hex[65])
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned n = 0;
    if (klen > INT_MAX ||
        !HMAC(EVP_sha256(), klen ? key : "", (int)klen, (const unsigned char *)(mlen ? msg : ""),
              mlen, md, &n) ||
        n != 32) {
        hex[0] = '\0';
        return -1;
    }
    msp_cc_hex(md, n, hex);
    return 0;
}
