// OpenSSL's libcrypto (Debian's libssl-dev), for keys, certificates, ECDSA and PKCS#7.
// Function-like macros do not import into Swift: the few used are wrapped here as inline functions.
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/ec.h>
#include <openssl/ecdsa.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/objects.h>
#include <openssl/pem.h>
#include <openssl/pkcs7.h>
#include <openssl/rand.h>
#include <openssl/sha.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <openssl/x509_vfy.h>

static inline STACK_OF(X509) *storekit_sk_X509_new(void) { return sk_X509_new_null(); }
static inline int storekit_sk_X509_push(STACK_OF(X509) *stack, X509 *certificate) { return sk_X509_push(stack, certificate); }
static inline void storekit_sk_X509_free(STACK_OF(X509) *stack) { sk_X509_free(stack); }
static inline int storekit_sk_X509_num(const STACK_OF(X509) *stack) { return sk_X509_num(stack); }
static inline X509 *storekit_sk_X509_value(const STACK_OF(X509) *stack, int index) { return sk_X509_value(stack, index); }
static inline void storekit_X509V3_set_ctx_nodb(X509V3_CTX *ctx) { X509V3_set_ctx_nodb(ctx); }
static inline long storekit_BIO_get_mem_data(BIO *bio, char **data) { return BIO_get_mem_data(bio, data); }
static inline int storekit_sk_X509_REVOKED_num(const STACK_OF(X509_REVOKED) *stack) { return sk_X509_REVOKED_num(stack); }
static inline X509_REVOKED *storekit_sk_X509_REVOKED_value(const STACK_OF(X509_REVOKED) *stack, int index) {
    return sk_X509_REVOKED_value(stack, index);
}
