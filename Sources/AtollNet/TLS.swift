import COpenSSL
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// TLS for a server: a certificate chain and its private key, both PEM files.
public struct TLSServerConfiguration: Sendable {
    public var certificateFile: String
    public var privateKeyFile: String
    public init(certificateFile: String, privateKeyFile: String) {
        self.certificateFile = certificateFile
        self.privateKeyFile = privateKeyFile
    }
}

/// TLS for a client. By default the peer is verified against the system's trusted roots and
/// the URL's host name; `trustedCertificatesFile` adds (or, for a self-signed server, provides)
/// the roots to trust.
public struct TLSClientConfiguration: Sendable {
    /// A PEM file of certificates to trust; nil = the system's default roots.
    public var trustedCertificatesFile: String?
    /// Verify the peer's certificate and host name (the default). Turn off only for tests.
    public var verifyPeer: Bool
    public init(trustedCertificatesFile: String? = nil, verifyPeer: Bool = true) {
        self.trustedCertificatesFile = trustedCertificatesFile
        self.verifyPeer = verifyPeer
    }
}

/// An OpenSSL `SSL_CTX`, freed with the last connection that uses it.
final class TLSContext: @unchecked Sendable {
    let context: OpaquePointer
    let verifyPeer: Bool

    private init(_ context: OpaquePointer, verifyPeer: Bool) {
        self.context = context
        self.verifyPeer = verifyPeer
    }

    deinit { SSL_CTX_free(context) }

    static func lastError() -> String {
        var messages: [String] = []
        while true {
            let code = ERR_get_error()
            if code == 0 { break }
            var buffer = [CChar](repeating: 0, count: 256)
            ERR_error_string_n(code, &buffer, buffer.count)
            messages.append(nulTerminated(buffer))
        }
        return messages.isEmpty ? "unknown error" : messages.joined(separator: "; ")
    }

    static func server(_ configuration: TLSServerConfiguration) throws -> TLSContext {
        guard let ctx = SSL_CTX_new(TLS_server_method()) else { throw NetError.tls(lastError()) }
        let context = TLSContext(ctx, verifyPeer: false)
        _ = atoll_ssl_ctx_set_min_proto_version(ctx, TLS1_2_VERSION)
        atoll_ssl_ctx_ignore_unexpected_eof(ctx)
        guard SSL_CTX_use_certificate_chain_file(ctx, configuration.certificateFile) == 1 else {
            throw NetError.tls("certificate \(configuration.certificateFile): \(lastError())")
        }
        guard SSL_CTX_use_PrivateKey_file(ctx, configuration.privateKeyFile, SSL_FILETYPE_PEM) == 1 else {
            throw NetError.tls("private key \(configuration.privateKeyFile): \(lastError())")
        }
        guard SSL_CTX_check_private_key(ctx) == 1 else {
            throw NetError.tls("the private key does not match the certificate: \(lastError())")
        }
        return context
    }

    static func client(_ configuration: TLSClientConfiguration) throws -> TLSContext {
        guard let ctx = SSL_CTX_new(TLS_client_method()) else { throw NetError.tls(lastError()) }
        let context = TLSContext(ctx, verifyPeer: configuration.verifyPeer)
        _ = atoll_ssl_ctx_set_min_proto_version(ctx, TLS1_2_VERSION)
        // A peer that closes without close_notify ends the stream (as with plain TCP), which
        // bodies delimited by the connection's end rely on.
        atoll_ssl_ctx_ignore_unexpected_eof(ctx)
        if let file = configuration.trustedCertificatesFile {
            guard SSL_CTX_load_verify_locations(ctx, file, nil) == 1 else {
                throw NetError.tls("trusted certificates \(file): \(lastError())")
            }
        } else {
            _ = SSL_CTX_set_default_verify_paths(ctx)
        }
        SSL_CTX_set_verify(ctx, configuration.verifyPeer ? SSL_VERIFY_PEER : SSL_VERIFY_NONE, nil)
        return context
    }
}

/// A TLS session over a non-blocking socket.
final class TLSTransport: Transport {
    let fd: Int32
    private let ssl: OpaquePointer
    private let context: TLSContext
    private let isServer: Bool
    private var isClosed = false
    private(set) var wantsWrite = false

    init(fd: Int32, context: TLSContext, serverName: String?) throws {
        guard let ssl = SSL_new(context.context) else { throw NetError.tls(TLSContext.lastError()) }
        self.fd = fd
        self.ssl = ssl
        self.context = context
        self.isServer = serverName == nil
        _ = atoll_ssl_set_mode(ssl, Int(SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER))
        SSL_set_fd(ssl, fd)
        if let name = serverName {
            // SNI for names, and host-name (or IP) verification of the peer's certificate.
            if inet_addr(name) == INADDR_NONE && !name.contains(":") {
                _ = atoll_ssl_set_tlsext_host_name(ssl, name)
            }
            if context.verifyPeer {
                let param = SSL_get0_param(ssl)
                if X509_VERIFY_PARAM_set1_ip_asc(param, name) != 1 {
                    _ = X509_VERIFY_PARAM_set1_host(param, name, 0)
                }
            }
            SSL_set_connect_state(ssl)
        } else {
            SSL_set_accept_state(ssl)
        }
    }

    deinit { SSL_free(ssl) }

    private func classify(_ result: Int32, _ what: String) -> IOResult {
        let error = SSL_get_error(ssl, result)
        switch error {
        case SSL_ERROR_WANT_READ:
            wantsWrite = false
            return .wouldBlock
        case SSL_ERROR_WANT_WRITE:
            wantsWrite = true
            return .wouldBlock
        case SSL_ERROR_ZERO_RETURN:
            return .closed
        case SSL_ERROR_SYSCALL:
            let code = errno
            ERR_clear_error()
            return code == 0 ? .closed : .failed("\(what): \(String(cString: strerror(code)))")
        default:
            var message = TLSContext.lastError()
            if !isServer, context.verifyPeer {
                let verify = SSL_get_verify_result(ssl)
                if verify != X509_V_OK { message += " (\(String(cString: X509_verify_cert_error_string(verify))))" }
            }
            return .failed("\(what): \(message)")
        }
    }

    // OpenSSL keeps errors in a per-thread queue, and SSL_get_error reads it: one connection's
    // leftover error must not make another's would-block look fatal. Clear it before each call.

    func handshake() -> IOResult {
        ERR_clear_error()
        let result = SSL_do_handshake(ssl)
        if result == 1 { wantsWrite = false; return .done(0) }
        return classify(result, "handshake")
    }

    func read(into buffer: UnsafeMutableRawBufferPointer) -> IOResult {
        ERR_clear_error()
        let n = SSL_read(ssl, buffer.baseAddress, Int32(min(buffer.count, Int(Int32.max))))
        if n > 0 { wantsWrite = false; return .done(Int(n)) }
        return classify(n, "read")
    }

    func write(_ bytes: UnsafeRawBufferPointer) -> IOResult {
        if bytes.isEmpty { return .done(0) }
        ERR_clear_error()
        let n = SSL_write(ssl, bytes.baseAddress, Int32(min(bytes.count, Int(Int32.max))))
        if n > 0 { wantsWrite = false; return .done(Int(n)) }
        return classify(n, "write")
    }

    func close() {
        guard !isClosed else { return }
        isClosed = true
        // A close_notify only after a finished handshake; never wait for the peer's.
        if SSL_is_init_finished(ssl) == 1 {
            ERR_clear_error()
            _ = SSL_shutdown(ssl)
        }
        ERR_clear_error()
        Glibc.close(fd)
    }
}

/// Crypto helpers from libcrypto.
enum Crypto {
    static func randomBytes(_ count: Int) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        if RAND_bytes(&bytes, Int32(count)) != 1 {
            // RAND_bytes only fails without entropy; fall back to the system generator.
            for index in bytes.indices { bytes[index] = UInt8.random(in: 0...255) }
        }
        return bytes
    }

    /// Sec-WebSocket-Accept for a Sec-WebSocket-Key (RFC 6455 §4.2.2).
    static func webSocketAccept(key: String) -> String {
        let input = Array((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").utf8)
        var digest = [UInt8](repeating: 0, count: Int(SHA_DIGEST_LENGTH))
        _ = SHA1(input, input.count, &digest)
        return Data(digest).base64EncodedString()
    }
}
