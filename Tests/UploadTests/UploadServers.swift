import Foundation
import TestSupport
import Testing

/// The real servers the upload tests send clips to, each on loopback ports of its own:
/// SeaweedFS (an S3-compatible object store) and wsgidav (WebDAV) from the Python environment
/// scripts/test-servers.sh makes, and OpenSSH's sshd (SFTP) from Debian.
enum TestServers {
    /// scripts/test-servers.sh's virtual environment.
    static var environment: String {
        let variables = ProcessInfo.processInfo.environment
        if let directory = variables["VIGIL_TEST_SERVERS"] { return directory + "/venv" }
        let cache = variables["XDG_CACHE_HOME"] ?? ((variables["HOME"] ?? NSTemporaryDirectory()) + "/.cache")
        return cache + "/vigil-test-servers/venv"
    }

    /// Whether the servers are installed; without them (and without CI set) the tests that
    /// need them are skipped: `make test` installs them first.
    static var installed: Bool {
        FileManager.default.isExecutableFile(atPath: environment + "/bin/weed")
            && FileManager.default.isExecutableFile(atPath: environment + "/bin/wsgidav")
    }

    static var required: Bool { installed || ProcessInfo.processInfo.environment["CI"] != nil }

    /// A program of the environment; a missing one fails the test with what to run.
    static func program(_ name: String) throws -> String {
        let path = environment + "/bin/" + name
        guard FileManager.default.isExecutableFile(atPath: path) else {
            throw ServerError(description: "\(path) is missing — run scripts/test-servers.sh (make test does)")
        }
        return path
    }

    /// A base for `count` consecutive loopback ports nothing listens on (and, for SeaweedFS,
    /// their gRPC ports 10000 above).
    static func freePorts(_ count: Int, grpc: Bool = false) throws -> Int {
        for _ in 0..<50 {
            let base = Int.random(in: 20_000...(grpc ? 45_000 : 60_000))
            let ports = Array(base..<(base + count)) + (grpc ? [base + 10_000 + count] : [])
            if ports.allSatisfy({ !accepts($0) }) { return base }
        }
        throw ServerError(description: "no free loopback ports found")
    }

    static func accepts(_ port: Int) -> Bool { loopbackAccepts(port) }

    /// Starts `arguments` with its output in `log`, in a process group of its own.
    static func launch(_ arguments: [String], log: String, directory: String) throws -> Process {
        if !FileManager.default.fileExists(atPath: log) { FileManager.default.createFile(atPath: log, contents: nil) }
        let output = try FileHandle(forWritingTo: URL(fileURLWithPath: log))
        output.seekToEndOfFile()
        let process = Process()
        process.executableURL = URL(fileURLWithPath: arguments[0])
        process.arguments = Array(arguments.dropFirst())
        process.currentDirectoryURL = URL(fileURLWithPath: directory)
        process.standardOutput = output
        process.standardError = output
        process.standardInput = FileHandle.nullDevice
        try process.run()
        return process
    }

    /// SIGKILL (a child of a test thread may have SIGTERM blocked), and waits for it.
    static func kill(_ process: Process?) {
        guard let process, process.isRunning else { return }
        Foundation.kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }
}

struct ServerError: Error, CustomStringConvertible {
    var description: String
}

/// SeaweedFS's `weed mini` (master, volume, filer and S3 gateway in one process) with one
/// bucket and one identity, its data in the test's directory (kept across `restart()`).
/// `@unchecked Sendable`: its state changes only in `restart()` and `stop()`, called by the test.
final class S3Server: @unchecked Sendable {
    let directory: TemporaryDirectory
    let bucket = "clips"
    let accessKey = "AKVIGILTEST"
    let secretKey = "vigil-test-secret"
    let region = "us-east-1"
    private var base: Int
    private var process: Process?
    private let weed: String

    var port: Int { base + 6 }
    var endpoint: String { "http://127.0.0.1:\(port)" }
    var log: String { (try? String(contentsOfFile: directory.file("weed.log"), encoding: .utf8)) ?? "" }

    init(_ directory: TemporaryDirectory) throws {
        self.directory = directory
        weed = try TestServers.program("weed")
        base = try TestServers.freePorts(9, grpc: true)
        try FileManager.default.createDirectory(atPath: directory.file("weed"), withIntermediateDirectories: true)
        let identities = """
            {"identities":[{"name":"vigil","credentials":[{"accessKey":"\(accessKey)","secretKey":"\(secretKey)"}],\
            "actions":["Admin","Read","Write","List","Tagging"]}]}
            """
        try identities.write(toFile: directory.file("s3.json"), atomically: true, encoding: .utf8)
        // A port found free may be taken by another test's server before weed binds it (the
        // suites run in parallel): weed then exits saying so, and other ports are tried.
        for attempt in 1... {
            do {
                try restart()
                return
            } catch  where attempt < 5 && log.contains("Port allocation failed") {
                try? FileManager.default.removeItem(atPath: directory.file("weed.log"))
                base = try TestServers.freePorts(9, grpc: true)
            }
        }
    }

    deinit { stop() }

    func stop() { TestServers.kill(process) }

    /// Freezes it (SIGSTOP): connections stay open, nothing is answered; `resume()` lets it go on.
    func pause() { process.map { _ = Foundation.kill($0.processIdentifier, SIGSTOP) } }
    func resume() { process.map { _ = Foundation.kill($0.processIdentifier, SIGCONT) } }

    /// Starts it (again, after `stop()`), and waits until the bucket answers.
    func restart() throws {
        stop()
        let b = base
        process = try TestServers.launch(
            [
                weed, "mini", "-dir=\(directory.file("weed"))", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
                "-s3.config=\(directory.file("s3.json"))", "-bucket=\(bucket)", "-admin.ui=false", "-webdav=false",
                "-master.port=\(b)", "-master.port.grpc=\(b + 1)", "-volume.port=\(b + 2)",
                "-volume.port.grpc=\(b + 3)", "-filer.port=\(b + 4)", "-filer.port.grpc=\(b + 5)",
                "-s3.port=\(b + 6)", "-admin.port=\(b + 7)", "-admin.port.grpc=\(b + 8)",
                "-s3.port.iceberg=0", "-s3.port.lance=0", "-metricsPort=0",
            ], log: directory.file("weed.log"), directory: directory.path)
        let deadline = Date().addingTimeInterval(90)
        while Date() < deadline {
            guard process?.isRunning == true else { break }
            if (try? request("HEAD", "/\(bucket)").status) == 200 { return }
            usleep(250_000)
        }
        throw ServerError(description: "SeaweedFS did not answer for its bucket within 90 s:\n\(log.suffix(3000))")
    }

    /// A signed request with curl (an independent client): the status, and the body.
    func request(_ method: String, _ path: String, secret: String? = nil) throws -> (status: Int, body: Data) {
        let out = directory.file("response-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(atPath: out) }
        var arguments = [
            "-sS", "--max-time", "20", "--aws-sigv4", "aws:amz:\(region):s3", "--user",
            "\(accessKey):\(secret ?? secretKey)", "-o", out, "-w", "%{http_code}", "-X", method,
        ]
        if method == "HEAD" { arguments.append("-I") }
        arguments.append(endpoint + path)
        let result = try runTool("curl", arguments)
        let body = (try? Data(contentsOf: URL(fileURLWithPath: out))) ?? Data()
        return (Int(result.stdout.trimmingCharacters(in: .whitespaces)) ?? 0, body)
    }

    /// The object's bytes, or nil when there is none.
    func object(_ key: String) throws -> Data? {
        let response = try request("GET", "/\(bucket)/\(key)")
        return response.status == 200 ? response.body : nil
    }

    /// Every key in the bucket under `prefix`, as the server lists them.
    func keys(prefix: String = "") throws -> [String] {
        var keys: [String] = []
        var token: String?
        repeat {
            var query = "list-type=2&max-keys=1000&prefix=\(prefix)"
            if let token {
                query +=
                    "&continuation-token="
                    + (token.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? token)
            }
            let response = try request("GET", "/\(bucket)?\(query)")
            guard response.status == 200 else {
                throw ServerError(description: "listing the bucket: HTTP \(response.status)")
            }
            let text = String(decoding: response.body, as: UTF8.self)
            keys += Self.values(of: "Key", in: text)
            token =
                text.contains("<IsTruncated>true</IsTruncated>")
                ? Self.values(of: "NextContinuationToken", in: text).first : nil
        } while token != nil
        return keys
    }

    private static func values(of element: String, in text: String) -> [String] {
        text.components(separatedBy: "<\(element)>").dropFirst().compactMap {
            $0.components(separatedBy: "</\(element)>").first
        }
    }
}

/// OpenSSH's sshd on a loopback port with a host key and one authorised key of its own,
/// serving SFTP (`internal-sftp`) to the user running the tests.
final class SFTPServer {
    let directory: TemporaryDirectory
    let port: Int
    /// The client's private key, and a known_hosts file with the server's key.
    var keyFile: String { directory.file("client_key") }
    var knownHosts: String { directory.file("known_hosts") }
    /// Where uploads go (an absolute directory).
    var root: String { directory.file("remote") }
    let user: String

    init(_ directory: TemporaryDirectory) throws {
        self.directory = directory
        guard FileManager.default.isExecutableFile(atPath: "/usr/sbin/sshd") else {
            throw ServerError(description: "/usr/sbin/sshd is missing (apt-get install openssh-server)")
        }
        user = String(cString: getpwuid(getuid()).pointee.pw_name)
        for key in ["host_key", "client_key"] {
            let result = try runTool("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-f", directory.file(key)])
            guard result.status == 0 else { throw ToolError.failed("ssh-keygen", result) }
        }
        try FileManager.default.copyItem(
            atPath: directory.file("client_key.pub"), toPath: directory.file("authorized_keys"))
        try FileManager.default.createDirectory(atPath: directory.file("remote"), withIntermediateDirectories: true)
        // sshd wants its privilege separation directory.
        try? FileManager.default.createDirectory(atPath: "/run/sshd", withIntermediateDirectories: true)
        port = try TestServers.freePorts(1)
        let config = """
            Port \(port)
            ListenAddress 127.0.0.1
            HostKey \(directory.file("host_key"))
            AuthorizedKeysFile \(directory.file("authorized_keys"))
            PubkeyAuthentication yes
            PasswordAuthentication no
            KbdInteractiveAuthentication no
            UsePAM no
            StrictModes no
            PidFile \(directory.file("sshd.pid"))
            Subsystem sftp internal-sftp
            """
        try config.write(toFile: directory.file("sshd_config"), atomically: true, encoding: .utf8)
        let hostKey = try String(contentsOfFile: directory.file("host_key.pub"), encoding: .utf8)
            .split(separator: " ").prefix(2).joined(separator: " ")
        try "[127.0.0.1]:\(port) \(hostKey)\n".write(toFile: knownHosts, atomically: true, encoding: .utf8)
        // As a daemon (not a child of the test process: a child sshd kept Foundation from
        // reaping the test's other children), its process id in its pid file.
        let started = try runTool(
            "/usr/sbin/sshd", ["-f", directory.file("sshd_config"), "-E", directory.file("sshd.log")])
        guard started.status == 0 else { throw ToolError.failed("sshd", started) }
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline, !TestServers.accepts(port) { usleep(50_000) }
        guard TestServers.accepts(port) else {
            let log = (try? String(contentsOfFile: directory.file("sshd.log"), encoding: .utf8)) ?? ""
            throw ServerError(description: "sshd did not start:\n\(log)")
        }
    }

    deinit {
        let pid = (try? String(contentsOfFile: directory.file("sshd.pid"), encoding: .utf8))
            .flatMap { Int32($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
        if let pid { Foundation.kill(pid, SIGKILL) }
    }
}

/// wsgidav (on cheroot) serving a directory as WebDAV on a loopback port, with one user
/// signing in by HTTP Digest (or Basic).
final class WebDAVServer {
    let directory: TemporaryDirectory
    let port: Int
    let user = "vigil"
    let password = "dav-secret"
    var root: String { directory.file("share") }
    private var process: Process?

    /// With `certificates`, HTTPS only, with the certificate their CA signed.
    init(_ directory: TemporaryDirectory, certificates: TestCertificates? = nil) throws {
        self.directory = directory
        let wsgidav = try TestServers.program("wsgidav")
        try FileManager.default.createDirectory(
            atPath: directory.file("share/fleet"), withIntermediateDirectories: true)
        port = try TestServers.freePorts(1)
        let config = """
            host: 127.0.0.1
            port: \(port)
            server: cheroot
            provider_mapping:
              "/dav": \(directory.file("share"))
            http_authenticator:
              domain_controller: null
              accept_basic: true
              accept_digest: true
              default_to_digest: true
            simple_dc:
              user_mapping:
                "*":
                  "\(user)":
                    password: "\(password)"
            verbose: 1
            """
            + (certificates.map {
                "\nssl_certificate: \($0.certificate)\nssl_private_key: \($0.key)\nssl_adapter: builtin\n"
            } ?? "")
        try config.write(toFile: directory.file("wsgidav.yaml"), atomically: true, encoding: .utf8)
        process = try TestServers.launch(
            [wsgidav, "--config", directory.file("wsgidav.yaml")], log: directory.file("wsgidav.log"),
            directory: directory.path)
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline, process?.isRunning == true, !TestServers.accepts(port) { usleep(50_000) }
        guard TestServers.accepts(port) else {
            let log = (try? String(contentsOfFile: directory.file("wsgidav.log"), encoding: .utf8)) ?? ""
            throw ServerError(description: "wsgidav did not start:\n\(log)")
        }
    }

    deinit { TestServers.kill(process) }
}
