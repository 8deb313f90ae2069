import Foundation

/// Certificates for TLS tests, made by `openssl` in a test's directory: a CA of the test's
/// own, and a server certificate it signed for 127.0.0.1, ::1 and localhost — what a client
/// trusts with `--cacert ca.crt` (curl), `cafile` (mosquitto) or `-ca_file` (ffmpeg). The keys
/// are mode 0600, as `openssl` writes them.
public struct TestCertificates: Sendable {
    /// The CA's certificate and key.
    public let caCertificate: String
    public let caKey: String
    /// The server's certificate (signed by the CA) and its private key, unencrypted.
    public let certificate: String
    public let key: String

    /// Makes them in `directory`, their names beginning with `name`: the server's certificate
    /// valid from now for 30 days, or from `validity.notBefore` to `validity.notAfter` (UTC, as
    /// `YYYYMMDDHHMMSSZ`: one that has expired, or is not valid yet).
    public init(
        in directory: TemporaryDirectory, name: String = "test",
        validity: (notBefore: String, notAfter: String)? = nil
    ) throws {
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
        guard let validity else {
            try run([
                "x509", "-req", "-in", request, "-CA", caCertificate, "-CAkey", caKey, "-CAcreateserial", "-out",
                certificate, "-days", "30", "-extfile", extensions,
            ])
            return
        }
        // `x509 -req` takes a number of days from now only: `ca` takes the dates themselves.
        let database = directory.file("\(name)-ca.index"), serial = directory.file("\(name)-ca.serial")
        let configuration = directory.file("\(name)-ca.cnf")
        try "".write(toFile: database, atomically: true, encoding: .utf8)
        try "1000\n".write(toFile: serial, atomically: true, encoding: .utf8)
        try """
        [ca]
        default_ca = test
        [test]
        database = \(database)
        serial = \(serial)
        new_certs_dir = \(directory.path)
        default_md = sha256
        policy = any
        unique_subject = no
        copy_extensions = none
        [any]
        commonName = supplied
        [server]
        subjectAltName = IP:127.0.0.1,IP:::1,DNS:localhost

        """.write(toFile: configuration, atomically: true, encoding: .utf8)
        try run([
            "ca", "-batch", "-notext", "-config", configuration, "-extensions", "server", "-cert", caCertificate,
            "-keyfile", caKey, "-in", request, "-out", certificate, "-startdate", validity.notBefore, "-enddate",
            validity.notAfter,
        ])
    }
}
