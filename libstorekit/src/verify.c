/*
 * The signed data checks, as Sources/StoreKitSigning/SignedDataVerifier.swift and
 * ReceiptSignature.swift make them, with OpenSSL's libcrypto (no cryptography of our own).
 *
 * A compact JWS is trusted when: it has three canonical base64url parts; its header is a JSON
 * object whose alg is ES256 and whose x5c holds at least leaf and intermediate; the leaf chains
 * through the intermediate to the root under OpenSSL's strict X.509 rules at the payload's
 * signedDate (so an old signature stays verifiable after the leaf is replaced); leaf and
 * intermediate carry Apple's marker extensions; and the signature (raw r||s, turned into DER)
 * verifies over "header.payload" with the leaf's P-256 key. The JSON reader is strict and whole
 * (every value is checked, not only the members read), and reads only alg, x5c and signedDate.
 *
 * Beside the root certificate the daemon publishes its intermediate's revocation list
 * (revoked-certificates.pem, `storekitctl rotate-key --revoke`): a list the intermediate signed
 * that names the leaf makes the JWS or receipt REVOKED_CERTIFICATE, whatever its date. A list
 * that is there but cannot be read trusts nothing (INVALID_CHAIN, with why).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/objects.h>
#include <openssl/pem.h>
#include <openssl/pkcs7.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>

#include "internal.h"

#define LEAF_MARKER "1.2.840.113635.100.6.11.1"
#define INTERMEDIATE_MARKER "1.2.840.113635.100.6.2.1"
#define ROOT_FILE_NAME "root-certificate.pem"
#define SYSTEM_ROOT "/var/lib/storekitd/root-certificate.pem"
#define REVOCATIONS_FILE_NAME "revoked-certificates.pem"

/* What a check trusts: the root, and the revocation list published beside it (NULL: none). */
typedef struct trust {
    X509 *root;
    X509_CRL *revocations;
} trust;

static void trust_free(trust *t) {
    X509_free(t->root);
    X509_CRL_free(t->revocations);
    t->root = NULL;
    t->revocations = NULL;
}

/* ---- base64 ------------------------------------------------------------------------------- */

static int base64_value(unsigned char c, bool url) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == (url ? '-' : '+')) return 62;
    if (c == (url ? '_' : '/')) return 63;
    return -1;
}

/*
 * Decodes base64url without padding (url) or standard base64 with padding: only the canonical
 * spelling (no stray characters, no bits set past the end). malloc'd, NULL when not canonical.
 */
static uint8_t *base64_decode(const char *text, size_t length, bool url, size_t *out_length) {
    if (!url) {
        if (length % 4 != 0) return NULL;
        size_t padding = 0;
        while (padding < 2 && padding < length && text[length - 1 - padding] == '=') padding++;
        length -= padding;
        if (padding > 0 && length % 4 == 0) return NULL;
    }
    if (length % 4 == 1) return NULL;
    uint8_t *output = malloc(length * 3 / 4 + 1);
    if (!output) return NULL;
    uint32_t accumulator = 0;
    int bits = 0;
    size_t count = 0;
    for (size_t i = 0; i < length; i++) {
        int value = base64_value((unsigned char)text[i], url);
        if (value < 0) {
            free(output);
            return NULL;
        }
        accumulator = (accumulator << 6 | (uint32_t)value) & 0xFFFFFF;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            output[count++] = (uint8_t)(accumulator >> bits);
        }
    }
    if (accumulator & ((1u << bits) - 1)) {
        free(output);
        return NULL;
    }
    *out_length = count;
    return output;
}

/* ---- JSON --------------------------------------------------------------------------------- */

typedef enum json_type { JSON_NULL, JSON_BOOL, JSON_NUMBER, JSON_STRING, JSON_ARRAY, JSON_OBJECT } json_type;

typedef struct json {
    json_type type;
    double number;
    char *string;   /* JSON_STRING: decoded, NUL-terminated */
    size_t count;   /* JSON_ARRAY, JSON_OBJECT */
    struct json *items;
    char **keys;    /* JSON_OBJECT */
} json;

typedef struct json_parser {
    const char *at;
    const char *end;
    int depth;
} json_parser;

static void json_free(json *value) {
    free(value->string);
    for (size_t i = 0; i < value->count; i++) {
        json_free(&value->items[i]);
        if (value->keys) free(value->keys[i]);
    }
    free(value->items);
    free(value->keys);
    *value = (json){0};
}

static void skip_space(json_parser *p) {
    while (p->at < p->end && (*p->at == ' ' || *p->at == '\t' || *p->at == '\n' || *p->at == '\r')) p->at++;
}

static bool literal(json_parser *p, const char *word) {
    size_t length = strlen(word);
    if ((size_t)(p->end - p->at) < length || memcmp(p->at, word, length) != 0) return false;
    p->at += length;
    return true;
}

static int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static bool read_hex4(json_parser *p, uint32_t *value) {
    if (p->end - p->at < 4) return false;
    *value = 0;
    for (int i = 0; i < 4; i++) {
        int digit = hex_digit(p->at[i]);
        if (digit < 0) return false;
        *value = *value << 4 | (uint32_t)digit;
    }
    p->at += 4;
    return true;
}

static bool parse_string(json_parser *p, char **out) {
    if (p->at >= p->end || *p->at != '"') return false;
    p->at++;
    sk_buffer text = {0};
    while (p->at < p->end && *p->at != '"') {
        unsigned char c = (unsigned char)*p->at;
        if (c < 0x20) goto bad;
        if (c != '\\') {
            const char *run = p->at;
            while (p->at < p->end && *p->at != '"' && *p->at != '\\' && (unsigned char)*p->at >= 0x20) p->at++;
            if (!sk_utf8_valid((const uint8_t *)run, (size_t)(p->at - run))) goto bad;
            sk_buffer_append(&text, run, (size_t)(p->at - run));
            continue;
        }
        p->at++;
        if (p->at >= p->end) goto bad;
        char escaped = *p->at++;
        const char *simple = strchr("\"\\/bfnrt", escaped);
        if (escaped && simple) {
            static const char replacements[] = "\"\\/\b\f\n\r\t";
            sk_buffer_u8(&text, (uint8_t)replacements[simple - "\"\\/bfnrt"]);
            continue;
        }
        if (escaped != 'u') goto bad;
        uint32_t code;
        if (!read_hex4(p, &code)) goto bad;
        if (code >= 0xD800 && code <= 0xDBFF) {
            uint32_t low;
            if (!literal(p, "\\u") || !read_hex4(p, &low) || low < 0xDC00 || low > 0xDFFF) goto bad;
            code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
        } else if (code >= 0xDC00 && code <= 0xDFFF) {
            goto bad;
        }
        if (code == 0) goto bad; /* a NUL would cut the C string short */
        uint8_t utf8[4];
        size_t n;
        if (code < 0x80) {
            utf8[0] = (uint8_t)code;
            n = 1;
        } else if (code < 0x800) {
            utf8[0] = (uint8_t)(0xC0 | code >> 6);
            utf8[1] = (uint8_t)(0x80 | (code & 0x3F));
            n = 2;
        } else if (code < 0x10000) {
            utf8[0] = (uint8_t)(0xE0 | code >> 12);
            utf8[1] = (uint8_t)(0x80 | (code >> 6 & 0x3F));
            utf8[2] = (uint8_t)(0x80 | (code & 0x3F));
            n = 3;
        } else {
            utf8[0] = (uint8_t)(0xF0 | code >> 18);
            utf8[1] = (uint8_t)(0x80 | (code >> 12 & 0x3F));
            utf8[2] = (uint8_t)(0x80 | (code >> 6 & 0x3F));
            utf8[3] = (uint8_t)(0x80 | (code & 0x3F));
            n = 4;
        }
        sk_buffer_append(&text, utf8, n);
    }
    if (p->at >= p->end) goto bad;
    p->at++;
    sk_buffer_u8(&text, 0);
    if (text.failed) goto bad;
    *out = (char *)text.bytes;
    return true;
bad:
    sk_buffer_free(&text);
    return false;
}

static bool parse_number(json_parser *p, double *out) {
    const char *start = p->at;
    if (p->at < p->end && *p->at == '-') p->at++;
    if (p->at >= p->end) return false;
    if (*p->at == '0') {
        p->at++;
    } else if (*p->at >= '1' && *p->at <= '9') {
        while (p->at < p->end && *p->at >= '0' && *p->at <= '9') p->at++;
    } else {
        return false;
    }
    if (p->at < p->end && *p->at == '.') {
        p->at++;
        const char *digits = p->at;
        while (p->at < p->end && *p->at >= '0' && *p->at <= '9') p->at++;
        if (p->at == digits) return false;
    }
    if (p->at < p->end && (*p->at == 'e' || *p->at == 'E')) {
        p->at++;
        if (p->at < p->end && (*p->at == '+' || *p->at == '-')) p->at++;
        const char *digits = p->at;
        while (p->at < p->end && *p->at >= '0' && *p->at <= '9') p->at++;
        if (p->at == digits) return false;
    }
    char copy[64];
    size_t length = (size_t)(p->at - start);
    if (length >= sizeof copy) return false;
    memcpy(copy, start, length);
    copy[length] = 0;
    *out = strtod(copy, NULL);
    return true;
}

static bool parse_value(json_parser *p, json *out);

static bool append_item(json *container, json *item, char *key) {
    json *items = realloc(container->items, (container->count + 1) * sizeof *items);
    if (!items) return false;
    container->items = items;
    if (container->type == JSON_OBJECT) {
        char **keys = realloc(container->keys, (container->count + 1) * sizeof *keys);
        if (!keys) return false;
        container->keys = keys;
        keys[container->count] = key;
    }
    items[container->count++] = *item;
    return true;
}

static bool parse_container(json_parser *p, json *out, bool object) {
    out->type = object ? JSON_OBJECT : JSON_ARRAY;
    p->at++;
    skip_space(p);
    if (p->at < p->end && *p->at == (object ? '}' : ']')) {
        p->at++;
        return true;
    }
    for (;;) {
        char *key = NULL;
        skip_space(p);
        if (object) {
            if (!parse_string(p, &key)) return false;
            skip_space(p);
            if (p->at >= p->end || *p->at != ':') {
                free(key);
                return false;
            }
            p->at++;
        }
        json item = {0};
        if (!parse_value(p, &item) || !append_item(out, &item, key)) {
            json_free(&item);
            free(key);
            return false;
        }
        skip_space(p);
        if (p->at < p->end && *p->at == ',') {
            p->at++;
            continue;
        }
        if (p->at < p->end && *p->at == (object ? '}' : ']')) {
            p->at++;
            return true;
        }
        return false;
    }
}

static bool parse_value(json_parser *p, json *out) {
    *out = (json){0};
    skip_space(p);
    if (p->at >= p->end) return false;
    switch (*p->at) {
    case '{':
    case '[': {
        if (++p->depth > 64) return false;
        bool ok = parse_container(p, out, *p->at == '{');
        p->depth--;
        return ok;
    }
    case '"':
        out->type = JSON_STRING;
        return parse_string(p, &out->string);
    case 't':
        out->type = JSON_BOOL;
        out->number = 1;
        return literal(p, "true");
    case 'f':
        out->type = JSON_BOOL;
        return literal(p, "false");
    case 'n':
        return literal(p, "null");
    default:
        out->type = JSON_NUMBER;
        return parse_number(p, &out->number);
    }
}

/* A whole document that is one object; false for anything else. */
static bool parse_object(const uint8_t *bytes, size_t length, json *out) {
    json_parser parser = {.at = (const char *)bytes, .end = (const char *)bytes + length};
    if (!parse_value(&parser, out)) {
        json_free(out);
        return false;
    }
    skip_space(&parser);
    if (parser.at != parser.end || out->type != JSON_OBJECT) {
        json_free(out);
        return false;
    }
    return true;
}

static const json *member(const json *object, const char *name) {
    for (size_t i = 0; i < object->count; i++)
        if (strcmp(object->keys[i], name) == 0) return &object->items[i];
    return NULL;
}

/* ---- certificates ------------------------------------------------------------------------- */

static bool has_extension(X509 *certificate, const char *oid) {
    ASN1_OBJECT *object = OBJ_txt2obj(oid, 1);
    if (!object) return false;
    bool found = X509_get_ext_by_OBJ(certificate, object, -1) >= 0;
    ASN1_OBJECT_free(object);
    return found;
}

static X509 *certificate_from_der(const uint8_t *der, size_t length) {
    if (length > 1 << 20) return NULL;
    const unsigned char *at = der;
    X509 *certificate = d2i_X509(NULL, &at, (long)length);
    if (certificate && at != der + length) {
        X509_free(certificate);
        return NULL;
    }
    return certificate;
}

/*
 * The revocation list beside the root certificate at `root_path`: STOREKIT_OK with *out NULL when
 * there is none, INVALID_CHAIN with why when one is there but cannot be read.
 */
static int load_revocations(const char *root_path, X509_CRL **out, char *message, size_t message_size) {
    *out = NULL;
    char path[4096];
    const char *slash = strrchr(root_path, '/');
    size_t length = slash ? (size_t)(slash - root_path) : 1;
    if (length + sizeof "/" REVOCATIONS_FILE_NAME > sizeof path) {
        sk_format(message, message_size, "the path of the revocation list beside %s is too long to read", root_path);
        return STOREKIT_ERROR_INVALID_CHAIN;
    }
    if (slash) {
        memcpy(path, root_path, length);
        path[length] = 0;
    } else {
        strcpy(path, ".");
    }
    strcat(path, "/" REVOCATIONS_FILE_NAME);
    FILE *file = fopen(path, "rb");
    if (!file) {
        if (errno == ENOENT) return STOREKIT_OK;
        sk_format(message, message_size, "cannot read the revocation list %s: %s", path, strerror(errno));
        return STOREKIT_ERROR_INVALID_CHAIN;
    }
    X509_CRL *list = PEM_read_X509_CRL(file, NULL, NULL, NULL);
    fclose(file);
    ERR_clear_error();
    if (!list) {
        sk_format(message, message_size, "%s holds no revocation list (PEM)", path);
        return STOREKIT_ERROR_INVALID_CHAIN;
    }
    *out = list;
    return STOREKIT_OK;
}

/*
 * Whether a list `intermediate` signed names `leaf` (which `intermediate` issued: the chain is
 * verified first). A list of another issuer, or one whose signature fails, names nothing.
 */
static bool revoked(X509_CRL *list, X509 *leaf, X509 *intermediate, char *message, size_t message_size) {
    if (!list) return false;
    EVP_PKEY *key = X509_get0_pubkey(intermediate);
    X509_REVOKED *entry = NULL;
    bool named = key && X509_NAME_cmp(X509_CRL_get_issuer(list), X509_get_subject_name(intermediate)) == 0
        && X509_CRL_verify(list, key) == 1 && X509_CRL_get0_by_serial(list, &entry, X509_get0_serialNumber(leaf)) == 1;
    ERR_clear_error();
    if (named) {
        BIGNUM *number = ASN1_INTEGER_to_BN(X509_get0_serialNumber(leaf), NULL);
        char *hex = number ? BN_bn2hex(number) : NULL;
        sk_format(message, message_size, "the signing certificate (serial %s) has been revoked", hex ? hex : "?");
        OPENSSL_free(hex);
        BN_free(number);
    }
    return named;
}

/* Reads a root certificate file, PEM or DER, and the list beside it: STOREKIT_OK, or
 * NO_ROOT_CERTIFICATE / INVALID_CHAIN with why. */
static int load_root(const char *path, trust *out, char *message, size_t message_size) {
    FILE *file = fopen(path, "rb");
    if (!file) {
        sk_format(message, message_size, "cannot read the root certificate %s: %s", path, strerror(errno));
        return STOREKIT_ERROR_NO_ROOT_CERTIFICATE;
    }
    uint8_t *bytes = malloc(1 << 20);
    size_t length = bytes ? fread(bytes, 1, 1 << 20, file) : 0;
    fclose(file);
    if (!bytes) {
        sk_format(message, message_size, "out of memory");
        return STOREKIT_ERROR_NO_MEMORY;
    }
    X509 *root = NULL;
    BIO *bio = BIO_new_mem_buf(bytes, (int)length);
    if (bio) {
        root = PEM_read_bio_X509(bio, NULL, NULL, NULL);
        BIO_free(bio);
    }
    if (!root) root = certificate_from_der(bytes, length);
    free(bytes);
    ERR_clear_error();
    if (!root) {
        sk_format(message, message_size, "%s holds no certificate (PEM or DER)", path);
        return STOREKIT_ERROR_NO_ROOT_CERTIFICATE;
    }
    int result = load_revocations(path, &out->revocations, message, message_size);
    if (result != STOREKIT_OK) {
        X509_free(root);
        return result;
    }
    out->root = root;
    return STOREKIT_OK;
}

static bool file_exists(const char *path) {
    struct stat status;
    return stat(path, &status) == 0;
}

/*
 * The root as RootCertificateLocation finds it: $STOREKIT_ROOT_CERTIFICATE; root-certificate.pem
 * beside the socket (in a directory only its user or root may change); the system daemon's.
 */
static int find_root(const char *socket_path, trust *out, char *message, size_t message_size) {
    const char *explicit = getenv("STOREKIT_ROOT_CERTIFICATE");
    if (explicit && explicit[0]) {
        if (!file_exists(explicit)) {
            sk_format(message, message_size, "No storekitd root certificate at %s (STOREKIT_ROOT_CERTIFICATE)", explicit);
            return STOREKIT_ERROR_NO_ROOT_CERTIFICATE;
        }
        return load_root(explicit, out, message, message_size);
    }
    if (!socket_path) socket_path = getenv("STOREKITD_SOCKET");
    char beside[4096] = "";
    const char *slash = socket_path ? strrchr(socket_path, '/') : NULL;
    if (slash && (size_t)(slash - socket_path) + sizeof "/" ROOT_FILE_NAME < sizeof beside) {
        char directory[4096];
        size_t length = (size_t)(slash - socket_path);
        memcpy(directory, socket_path, length);
        directory[length] = 0;
        sk_format(beside, sizeof beside, "%s/" ROOT_FILE_NAME, directory);
        char why[512];
        if (file_exists(beside) && sk_directory_trusted(length ? directory : "/", why, sizeof why))
            return load_root(beside, out, message, message_size);
    }
    struct stat status;
    if (file_exists(SYSTEM_ROOT) && lstat("/var/lib/storekitd", &status) == 0 && S_ISDIR(status.st_mode)
        && !(status.st_mode & 022))
        return load_root(SYSTEM_ROOT, out, message, message_size);
    sk_format(message, message_size, "No storekitd root certificate at %s%s" SYSTEM_ROOT " (set STOREKIT_ROOT_CERTIFICATE)",
              beside, beside[0] ? " or " : "");
    return STOREKIT_ERROR_NO_ROOT_CERTIFICATE;
}

/* OpenSSL's strict path validation of leaf through intermediate to root at `when`. */
static bool chain_verifies(X509 *leaf, X509 *intermediate, X509 *root, time_t when, char *message, size_t message_size) {
    bool verified = false;
    X509_STORE *store = X509_STORE_new();
    STACK_OF(X509) *untrusted = sk_X509_new_null();
    X509_STORE_CTX *context = X509_STORE_CTX_new();
    if (store && untrusted && context && X509_STORE_add_cert(store, root) == 1 && sk_X509_push(untrusted, intermediate) > 0
        && X509_STORE_CTX_init(context, store, leaf, untrusted) == 1) {
        X509_VERIFY_PARAM *parameters = X509_STORE_CTX_get0_param(context);
        X509_VERIFY_PARAM_set_flags(parameters, X509_V_FLAG_X509_STRICT);
        X509_VERIFY_PARAM_set_time(parameters, when);
        verified = X509_verify_cert(context) == 1;
        if (!verified)
            sk_format(message, message_size, "the certificate chain does not verify: %s",
                      X509_verify_cert_error_string(X509_STORE_CTX_get_error(context)));
    } else {
        sk_format(message, message_size, "cannot set up the certificate check");
    }
    X509_STORE_CTX_free(context);
    sk_X509_free(untrusted);
    X509_STORE_free(store);
    ERR_clear_error();
    return verified;
}

/* ES256: `signature` is JWS's raw r||s (64 bytes); EVP wants DER. */
static bool es256_verifies(X509 *leaf, const uint8_t *signature, size_t signature_length, const char *input,
                           size_t input_length) {
    if (signature_length != 64) return false;
    EVP_PKEY *key = X509_get0_pubkey(leaf);
    if (!key || !EVP_PKEY_is_a(key, "EC") || EVP_PKEY_get_bits(key) != 256) return false;
    bool verified = false;
    ECDSA_SIG *sig = ECDSA_SIG_new();
    BIGNUM *r = BN_bin2bn(signature, 32, NULL);
    BIGNUM *s = BN_bin2bn(signature + 32, 32, NULL);
    unsigned char *der = NULL;
    EVP_MD_CTX *context = EVP_MD_CTX_new();
    if (sig && r && s && ECDSA_SIG_set0(sig, r, s) == 1) {
        r = s = NULL; /* owned by sig now */
        int der_length = i2d_ECDSA_SIG(sig, &der);
        verified = der_length > 0 && context && EVP_DigestVerifyInit(context, NULL, EVP_sha256(), NULL, key) == 1
            && EVP_DigestVerify(context, der, (size_t)der_length, (const unsigned char *)input, input_length) == 1;
    }
    EVP_MD_CTX_free(context);
    OPENSSL_free(der);
    BN_free(r);
    BN_free(s);
    ECDSA_SIG_free(sig);
    ERR_clear_error();
    return verified;
}

/* ---- the checks --------------------------------------------------------------------------- */

static int verify_jws(const char *jws, const trust *trusted, char **payload_json, char *message, size_t message_size) {
    if (!jws) {
        sk_format(message, message_size, "no JWS");
        return STOREKIT_ERROR_BAD_ARGUMENT;
    }
    const char *first = strchr(jws, '.');
    const char *second = first ? strchr(first + 1, '.') : NULL;
    if (!first || !second || strchr(second + 1, '.')) {
        sk_format(message, message_size, "a compact JWS has three parts separated by dots");
        return STOREKIT_ERROR_INVALID_ENCODING;
    }
    int result = STOREKIT_ERROR_INVALID_ENCODING;
    size_t header_length = 0, payload_length = 0, signature_length = 0;
    uint8_t *header = base64_decode(jws, (size_t)(first - jws), true, &header_length);
    uint8_t *payload = base64_decode(first + 1, (size_t)(second - first - 1), true, &payload_length);
    uint8_t *signature = base64_decode(second + 1, strlen(second + 1), true, &signature_length);
    json header_json = {0}, payload_json_value = {0};
    X509 *leaf = NULL, *intermediate = NULL;
    bool header_parsed = false, payload_parsed = false;

    if (!header || !payload || !signature) {
        sk_format(message, message_size, "a part of the JWS is not canonical base64url");
        goto done;
    }
    header_parsed = parse_object(header, header_length, &header_json);
    if (!header_parsed) {
        sk_format(message, message_size, "the JWS header is not a JSON object");
        goto done;
    }
    const json *alg = member(&header_json, "alg");
    if (!alg || alg->type != JSON_STRING || strcmp(alg->string, "ES256") != 0) {
        sk_format(message, message_size, "the JWS header's alg is not ES256");
        goto done;
    }
    const json *x5c = member(&header_json, "x5c");
    bool chain_ok = x5c && x5c->type == JSON_ARRAY && x5c->count >= 2;
    for (size_t i = 0; chain_ok && i < x5c->count; i++) chain_ok = x5c->items[i].type == JSON_STRING;
    if (!chain_ok) {
        sk_format(message, message_size, "the JWS header has no x5c chain of leaf and intermediate");
        result = STOREKIT_ERROR_INVALID_CHAIN;
        goto done;
    }
    X509 **slots[2] = {&leaf, &intermediate};
    for (size_t i = 0; i < 2; i++) {
        size_t der_length = 0;
        uint8_t *der = base64_decode(x5c->items[i].string, strlen(x5c->items[i].string), false, &der_length);
        *slots[i] = der ? certificate_from_der(der, der_length) : NULL;
        free(der);
        if (!*slots[i]) {
            ERR_clear_error();
            sk_format(message, message_size, "certificate %zu of x5c cannot be read", i);
            result = STOREKIT_ERROR_INVALID_CHAIN;
            goto done;
        }
    }
    payload_parsed = parse_object(payload, payload_length, &payload_json_value);
    if (!payload_parsed) {
        sk_format(message, message_size, "the JWS payload is not a JSON object");
        goto done;
    }
    time_t when = time(NULL);
    const json *signed_date = member(&payload_json_value, "signedDate");
    if (signed_date) {
        if (signed_date->type != JSON_NUMBER || signed_date->number < 0 || signed_date->number > 253402300799999.0) {
            sk_format(message, message_size, "the payload's signedDate is not a date in milliseconds");
            goto done;
        }
        when = (time_t)(signed_date->number / 1000);
    }
    result = STOREKIT_ERROR_INVALID_CHAIN;
    if (!has_extension(leaf, LEAF_MARKER)) {
        sk_format(message, message_size, "the leaf lacks the signing marker extension " LEAF_MARKER);
        goto done;
    }
    if (!has_extension(intermediate, INTERMEDIATE_MARKER)) {
        sk_format(message, message_size, "the intermediate lacks its marker extension " INTERMEDIATE_MARKER);
        goto done;
    }
    if (!chain_verifies(leaf, intermediate, trusted->root, when, message, message_size)) goto done;
    if (revoked(trusted->revocations, leaf, intermediate, message, message_size)) {
        result = STOREKIT_ERROR_REVOKED_CERTIFICATE;
        goto done;
    }
    if (!es256_verifies(leaf, signature, signature_length, jws, (size_t)(second - jws))) {
        sk_format(message, message_size, "the signature does not verify with the leaf's key");
        result = STOREKIT_ERROR_INVALID_SIGNATURE;
        goto done;
    }
    result = STOREKIT_OK;
    if (payload_json) {
        *payload_json = malloc(payload_length + 1);
        if (!*payload_json) {
            result = STOREKIT_ERROR_NO_MEMORY;
            sk_format(message, message_size, "out of memory");
        } else {
            memcpy(*payload_json, payload, payload_length);
            (*payload_json)[payload_length] = 0;
        }
    }
done:
    if (header_parsed) json_free(&header_json);
    if (payload_parsed) json_free(&payload_json_value);
    X509_free(leaf);
    X509_free(intermediate);
    free(header);
    free(payload);
    free(signature);
    ERR_clear_error();
    return result;
}

int sk_verify_jws_with_socket(const char *jws, const char *socket_path, char **payload_json, char *message,
                              size_t message_size) {
    if (payload_json) *payload_json = NULL;
    trust trusted = {0};
    int result = find_root(socket_path, &trusted, message, message_size);
    if (result != STOREKIT_OK) return result;
    result = verify_jws(jws, &trusted, payload_json, message, message_size);
    trust_free(&trusted);
    return result;
}

SK_EXPORT int storekit_verify_jws_with_root(const char *jws, const char *root_certificate_path, char **payload_json) {
    char message[512];
    if (payload_json) *payload_json = NULL;
    if (!root_certificate_path) return STOREKIT_ERROR_BAD_ARGUMENT;
    trust trusted = {0};
    int result = load_root(root_certificate_path, &trusted, message, sizeof message);
    if (result != STOREKIT_OK) return result;
    result = verify_jws(jws, &trusted, payload_json, message, sizeof message);
    trust_free(&trusted);
    return result;
}

int sk_verify_receipt_with_socket(const uint8_t *receipt, size_t length, const char *socket_path, char *message,
                                  size_t message_size) {
    if (!receipt || length == 0 || length > (size_t)1 << 30) {
        sk_format(message, message_size, "no receipt bytes");
        return STOREKIT_ERROR_BAD_ARGUMENT;
    }
    trust trusted = {0};
    int result = find_root(socket_path, &trusted, message, message_size);
    if (result != STOREKIT_OK) return result;

    const unsigned char *at = receipt;
    PKCS7 *pkcs7 = d2i_PKCS7(NULL, &at, (long)length);
    X509_STORE *store = NULL;
    BIO *content = NULL;
    STACK_OF(X509) *signers = NULL;
    if (!pkcs7 || at != receipt + length || !PKCS7_type_is_signed(pkcs7)) {
        sk_format(message, message_size, "the receipt is not PKCS#7 signed data (DER)");
        result = STOREKIT_ERROR_INVALID_ENCODING;
        goto done;
    }
    store = X509_STORE_new();
    content = BIO_new(BIO_s_mem());
    if (!store || !content || X509_STORE_add_cert(store, trusted.root) != 1) {
        sk_format(message, message_size, "cannot set up the receipt check");
        result = STOREKIT_ERROR_NO_MEMORY;
        goto done;
    }
    X509_VERIFY_PARAM *parameters = X509_STORE_get0_param(store);
    X509_VERIFY_PARAM_set_flags(parameters, X509_V_FLAG_X509_STRICT);
    X509_VERIFY_PARAM_set_time(parameters, time(NULL));
    ERR_clear_error();
    if (PKCS7_verify(pkcs7, NULL, store, NULL, content, PKCS7_BINARY) != 1) {
        unsigned long error = ERR_peek_last_error();
        bool chain = ERR_GET_LIB(error) == ERR_LIB_PKCS7 && ERR_GET_REASON(error) == PKCS7_R_CERTIFICATE_VERIFY_ERROR;
        char words[256];
        ERR_error_string_n(error, words, sizeof words);
        sk_format(message, message_size, "the receipt does not verify: %s", words);
        result = chain ? STOREKIT_ERROR_INVALID_CHAIN : STOREKIT_ERROR_INVALID_SIGNATURE;
        goto done;
    }
    signers = PKCS7_get0_signers(pkcs7, NULL, 0);
    if (!signers || sk_X509_num(signers) != 1 || !has_extension(sk_X509_value(signers, 0), LEAF_MARKER)) {
        sk_format(message, message_size, "the receipt's signer is not one certificate with the signing marker extension");
        result = STOREKIT_ERROR_INVALID_CHAIN;
        goto done;
    }
    /* Every certificate of the receipt that issued the signer is asked for its list: the chain
     * went through one of them, and one added beside it cannot hide the list. */
    STACK_OF(X509) *carried = pkcs7->d.sign->cert;
    for (int i = 0; carried && trusted.revocations && i < sk_X509_num(carried); i++) {
        X509 *candidate = sk_X509_value(carried, i);
        if (X509_check_issued(candidate, sk_X509_value(signers, 0)) == X509_V_OK
            && revoked(trusted.revocations, sk_X509_value(signers, 0), candidate, message, message_size)) {
            result = STOREKIT_ERROR_REVOKED_CERTIFICATE;
            goto done;
        }
    }
    result = STOREKIT_OK;
done:
    sk_X509_free(signers);
    BIO_free(content);
    X509_STORE_free(store);
    PKCS7_free(pkcs7);
    trust_free(&trusted);
    ERR_clear_error();
    return result;
}
