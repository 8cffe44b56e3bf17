import AtollStore
import COpenSSL

/// An RSA public key read from PEM, for checking RS256 signatures (RSASSA-PKCS1-v1_5 with
/// SHA-256, RFC 7518 §3.3) of custom JWTs. Immutable once read, so any thread may verify with it.
final class RSAPublicKey: @unchecked Sendable {
    private let key: OpaquePointer

    /// Reads a `-----BEGIN PUBLIC KEY-----` (SubjectPublicKeyInfo) block, or the key of a
    /// `-----BEGIN CERTIFICATE-----`.
    /// - Throws: `AtollError(.invalidArgument)` when the text is neither, or the key is not RSA.
    init(pem: String) throws {
        let bytes = Array(pem.utf8)
        func read<T>(_ body: (OpaquePointer) -> T?) -> T? {
            bytes.withUnsafeBytes { raw -> T? in
                guard let bio = BIO_new_mem_buf(raw.baseAddress, Int32(raw.count)) else { return nil }
                defer { BIO_free(bio) }
                return body(bio)
            }
        }
        var pkey = read { PEM_read_bio_PUBKEY($0, nil, nil, nil) }
        if pkey == nil, let certificate = read({ PEM_read_bio_X509($0, nil, nil, nil) }) {
            pkey = X509_get_pubkey(certificate)
            X509_free(certificate)
        }
        ERR_clear_error()
        guard let pkey else {
            throw AtollError(.invalidArgument, "not a PEM public key or certificate (expected -----BEGIN PUBLIC KEY-----)")
        }
        guard EVP_PKEY_get_base_id(pkey) == NID_rsaEncryption else {
            EVP_PKEY_free(pkey)
            throw AtollError(.invalidArgument, "the public key is not an RSA key (RS256 needs one)")
        }
        key = pkey
    }

    deinit { EVP_PKEY_free(key) }

    /// Whether `signature` is this key's RS256 signature of `message`.
    func verifiesRS256(_ signature: [UInt8], of message: [UInt8]) -> Bool {
        guard let context = EVP_MD_CTX_new() else { return false }
        defer {
            EVP_MD_CTX_free(context)
            ERR_clear_error()
        }
        guard EVP_DigestVerifyInit(context, nil, EVP_sha256(), nil, key) == 1 else { return false }
        return EVP_DigestVerify(context, signature, signature.count, message, message.count) == 1
    }
}
