import Foundation

/// Certificates for TLS tests, made by `openssl` in a test's directory: a CA of the test's
/// own, and a server certificate it signed for 127.0.0.1, ::1 and localhost — what a client
/// trusts with `--cacert ca.crt` (curl), `cafile` (mosquitto) or `-ca_file` (ffmpeg).
public struct TestCertificates: Sendable {
    /// The CA's certificate and key.
    public let caCertificate: String
    public let caKey: String
    /// The server's certificate (signed by the CA) and its private key, unencrypted.
    public let certificate: String
    public let key: String

    /// Makes them in `directory`, their names beginning with `name`.
    public init(in directory: TemporaryDirectory, name: String = "test") throws {
        let openssl = which("openssl") ?? "/usr/bin/openssl"
        func run(_ arguments: [String]) throws {
            let result = try runTool(openssl, arguments)
            guard result.status == 0 else {
                throw ToolError.failed("openssl \(arguments.joined(separator: " "))", result)
            }
        }
        caCertificate = directory.file("\(name)-ca.crt")
        caKey = directory.file("\(name)-ca.key")
        certificate = directory.file("\(name)-server.crt")
        key = directory.file("\(name)-server.key")
        try run([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", caKey, "-out", caCertificate, "-days", "2",
            "-subj", "/CN=Vigil test \(name) CA",
        ])
        let request = directory.file("\(name)-server.csr")
        try run([
            "req", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", request, "-subj", "/CN=localhost",
        ])
        let extensions = directory.file("\(name)-server.ext")
        try "subjectAltName=IP:127.0.0.1,IP:::1,DNS:localhost\n".write(
            toFile: extensions, atomically: true, encoding: .utf8)
        try run([
            "x509", "-req", "-in", request, "-CA", caCertificate, "-CAkey", caKey, "-CAcreateserial", "-out",
            certificate, "-days", "2", "-extfile", extensions,
        ])
    }
}
