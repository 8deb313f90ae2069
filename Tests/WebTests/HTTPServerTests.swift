import Configuration
import Foundation
import POSIX
import Synchronization
import TestSupport
import Testing

@testable import Web

/// The server against real clients on a loopback port: curl (what a script or a browser sends)
/// and raw sockets (what an attacker or a stalled phone does).
@Suite struct HTTPServerTests {
    /// A server on 127.0.0.1, on a port the kernel chose, answering with `handler`.
    static func serve(
        limits: HTTPServer.Limits = HTTPServer.Limits(), _ handler: @escaping HTTPServer.Handler
    ) throws -> HTTPServer {
        try HTTPServer(address: "127.0.0.1", port: 0, limits: limits, handler: handler)
    }

    /// `curl` with `arguments` on `path`: the status, the headers (names in lower case) and the body.
    static func curl(
        _ server: HTTPServer, _ path: String, _ arguments: [String] = []
    ) throws -> (status: Int, headers: [String: String], body: Data) {
        let dir = try TemporaryDirectory("vigil-web-curl")
        defer { dir.remove() }
        let headerFile = dir.file("headers"), bodyFile = dir.file("body")
        let r = try runTool(
            "curl",
            ["-sS", "--path-as-is", "--max-time", "20", "-D", headerFile, "-o", bodyFile, "-w", "%{http_code}"]
                + arguments + ["http://127.0.0.1:\(server.port)\(path)"])
        #expect(r.status == 0, "curl: \(r.stderr)")
        var headers: [String: String] = [:]
        let text = (try? String(contentsOfFile: headerFile, encoding: .utf8)) ?? ""
        for line in text.split(separator: "\r\n") {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(
                in: .whitespaces)
        }
        let body = (try? Data(contentsOf: URL(fileURLWithPath: bodyFile))) ?? Data()
        return (Int(r.stdout) ?? 0, headers, body)
    }

    /// A connected TCP socket to the server (raw requests).
    static func connect(_ server: HTTPServer) throws -> FileHandle {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #expect(fd >= 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(server.port).bigEndian
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        let r = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Foundation.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        #expect(r == 0, "connect: \(String(cString: strerror(errno)))")
        var timeout = timeval(tv_sec: 20, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        return FileHandle(fileDescriptor: fd, closeOnDealloc: true)
    }

    /// Sends `request` as it is and reads the answer's status line ("" when the server closes
    /// the connection without one).
    static func raw(_ server: HTTPServer, _ request: String) throws -> String {
        let socket = try connect(server)
        socket.write(Data(request.utf8))
        return statusLine(socket)
    }

    /// The status line the server sends on `socket` ("" when it closes it without one, or says
    /// nothing for 20 s).
    static func statusLine(_ socket: FileHandle) -> String {
        var answer: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while !answer.contains(UInt8(ascii: "\n")) {
            let n = recv(socket.fileDescriptor, &buffer, buffer.count, 0)
            if n <= 0 { break }
            answer += buffer[..<n]
        }
        return String(decoding: answer.prefix { $0 != UInt8(ascii: "\r") }, as: UTF8.self)
    }

    @Test func answersWithTheHandlersResponseAndSeesTheRequest() throws {
        let seen = Mutex<[HTTPRequest]>([])
        let server = try Self.serve { request in
            seen.withLock { $0.append(request) }
            return .text(200, "hello \(request.path)", headers: [("X-Vigil", "yes")])
        }
        defer { server.stop() }
        #expect(server.port > 0)
        let r = try Self.curl(server, "/a%20b/c?day=2026-12-04&x", ["-H", "X-Test: one"])
        #expect(r.status == 200)
        #expect(String(decoding: r.body, as: UTF8.self) == "hello /a b/c")
        #expect(r.headers["x-vigil"] == "yes")
        #expect(r.headers["content-type"] == "text/plain; charset=utf-8")
        let request = try #require(seen.withLock { $0.first })
        #expect(request.method == "GET")
        #expect(request.query["day"] == "2026-12-04")
        #expect(request.header("X-TEST") == "one")
    }

    @Test func aPostsBodyReachesTheHandlerAndOneTooLargeIsRefused() throws {
        var limits = HTTPServer.Limits()
        limits.bodyBytes = 1000
        let server = try Self.serve(limits: limits) { request in
            .text(200, "\(request.method) \(request.body.count)")
        }
        defer { server.stop() }
        let small = try Self.curl(
            server, "/api/trigger", ["-X", "POST", "--data-binary", String(repeating: "x", count: 999)])
        #expect(small.status == 200)
        #expect(String(decoding: small.body, as: UTF8.self) == "POST 999")
        let large = try Self.curl(
            server, "/api/trigger", ["-X", "POST", "--data-binary", String(repeating: "x", count: 5000)])
        #expect(large.status == 413)
    }

    @Test func aFileIsServedWholeAndInTheRangesABrowserAsksFor() throws {
        let dir = try TemporaryDirectory("vigil-web-file")
        defer { dir.remove() }
        let bytes = (0..<100_000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        try Data(bytes).write(to: URL(fileURLWithPath: dir.file("clip.mov")))
        let server = try Self.serve { request in
            do {
                let file = try SharedFile(FileDescriptor(opening: dir.file("clip.mov"), .readOnly))
                return .file(file, type: "video/quicktime", request: request)
            } catch {
                return .error(500, "\(error)")
            }
        }
        defer { server.stop() }
        let whole = try Self.curl(server, "/clip.mov")
        #expect(whole.status == 200)
        #expect(whole.body == Data(bytes))
        #expect(whole.headers["accept-ranges"] == "bytes")
        #expect(whole.headers["content-type"] == "video/quicktime")
        let part = try Self.curl(server, "/clip.mov", ["-H", "Range: bytes=1000-1999"])
        #expect(part.status == 206)
        #expect(part.body == Data(bytes[1000...1999]))
        #expect(part.headers["content-range"] == "bytes 1000-1999/100000")
        let open = try Self.curl(server, "/clip.mov", ["-H", "Range: bytes=99990-"])
        #expect(open.body == Data(bytes[99990...]))
        let suffix = try Self.curl(server, "/clip.mov", ["-H", "Range: bytes=-10"])
        #expect(suffix.status == 206)
        #expect(suffix.body == Data(bytes[99990...]))
        let past = try Self.curl(server, "/clip.mov", ["-H", "Range: bytes=100000-"])
        #expect(past.status == 416)
        #expect(past.headers["content-range"] == "bytes */100000")
        // HEAD: the headers, no body.
        let head = try Self.curl(server, "/clip.mov", ["-I"])
        #expect(head.status == 200)
        #expect(head.headers["content-length"] == "100000")
    }

    @Test func rangeHeadersAreReadAsHTTPSays() {
        #expect(ByteRange.parse(nil, size: 10) == .whole)
        #expect(ByteRange.parse("bytes=0-0", size: 10) == .part(first: 0, last: 0))
        #expect(ByteRange.parse("bytes=2-", size: 10) == .part(first: 2, last: 9))
        #expect(ByteRange.parse("bytes=2-100", size: 10) == .part(first: 2, last: 9))
        #expect(ByteRange.parse("bytes=-3", size: 10) == .part(first: 7, last: 9))
        #expect(ByteRange.parse("bytes=-30", size: 10) == .part(first: 0, last: 9))
        #expect(ByteRange.parse("bytes=10-", size: 10) == .unsatisfiable)
        #expect(ByteRange.parse("bytes=-0", size: 10) == .unsatisfiable)
        #expect(ByteRange.parse("bytes=0-1,4-5", size: 10) == .whole)
        #expect(ByteRange.parse("bytes=5-2", size: 10) == .whole)
        #expect(ByteRange.parse("items=0-1", size: 10) == .whole)
        #expect(ByteRange.parse("bytes=x-1", size: 10) == .whole)
        #expect(ByteRange.parse("bytes=0-", size: 0) == .unsatisfiable)
    }

    @Test func malformedRequestsAreRefusedAndTheServerGoesOn() throws {
        let server = try Self.serve { _ in .text(200, "ok") }
        defer { server.stop() }
        // No request line: the connection is closed without a word.
        let nonsense = try Self.raw(server, "NONSENSE\r\n\r\n")
        #expect(nonsense == "", "\(nonsense)")
        let noHost = try Self.raw(server, "GET / HTTP/1.1\r\n\r\n")
        #expect(noHost.hasPrefix("HTTP/1.1 400"), "\(noHost)")
        let longLine = "GET /" + String(repeating: "a", count: 100_000) + " HTTP/1.1\r\nHost: localhost\r\n\r\n"
        let refused = try Self.raw(server, longLine)
        #expect(refused.hasPrefix("HTTP/1.1 414") || refused.hasPrefix("HTTP/1.1 431"), "\(refused)")
        let spaced = try Self.raw(server, "GET /a b HTTP/1.1\r\nHost: localhost\r\n\r\n")
        #expect(spaced == "" || spaced.hasPrefix("HTTP/1.1 400"), "\(spaced)")
        let manyHeaders =
            "GET / HTTP/1.1\r\nHost: localhost\r\n"
            + (0..<2000).map { "X-\($0): \(String(repeating: "v", count: 40))\r\n" }.joined()
            + "\r\n"
        let tooMany = try Self.raw(server, manyHeaders)
        #expect(tooMany.hasPrefix("HTTP/1.1 431"), "\(tooMany)")
        #expect(try Self.curl(server, "/").status == 200)
    }

    @Test func stalledClientsDoNotKeepOthersWaiting() throws {
        let server = try Self.serve { _ in .text(200, "ok") }
        defer { server.stop() }
        // Ten connections that send half a request and stop there.
        let stalled = try (0..<10).map { _ in
            let socket = try Self.connect(server)
            socket.write(Data("GET / HTTP/1.1\r\nHost: localhost\r\nX-Slow: ".utf8))
            return socket
        }
        for _ in 0..<5 { #expect(try Self.curl(server, "/").status == 200) }
        withExtendedLifetime(stalled) {}
    }

    @Test func aPortInUseIsSaidWithWhatToDo() throws {
        let first = try Self.serve { _ in .text(200, "ok") }
        defer { first.stop() }
        #expect {
            _ = try HTTPServer(address: "127.0.0.1", port: first.port) { _ in .text(200, "ok") }
        } throws: { error in
            let said = "\(error)"
            return said.contains("127.0.0.1:\(first.port)") && said.contains("Address already in use")
                && said.contains("web.port")
        }
    }

    @Test func anAddressThatIsNoneIsSaid() {
        #expect {
            _ = try HTTPServer(address: "camera.local", port: 0) { _ in .text(200, "ok") }
        } throws: { "\($0)".contains("web.listen \"camera.local\" is not an IP address") }
        #expect {
            _ = try HTTPServer(address: "192.0.2.1", port: 0) { _ in .text(200, "ok") }
        } throws: { "\($0)".contains("not one of this machine's") }
    }

    @Test func stoppingClosesThePortForTheNextServer() throws {
        let first = try Self.serve { _ in .text(200, "first") }
        let port = first.port
        first.stop()
        first.stop()
        let second = try HTTPServer(address: "127.0.0.1", port: port) { _ in .text(200, "second") }
        defer { second.stop() }
        #expect(String(decoding: try Self.curl(second, "/").body, as: UTF8.self) == "second")
    }

    /// With a certificate and key it speaks HTTPS, and only that: a client that trusts the CA
    /// gets the page (and a Digest sign-in over it), one that does not is refused by its own
    /// check, plain HTTP gets nothing; a key that is not the certificate's is said at start.
    @Test func withACertificateItSpeaksHTTPSOnly() throws {
        let dir = try TemporaryDirectory("vigil-web-tls")
        defer { dir.remove() }
        let certificates = try TestCertificates(in: dir)
        let other = try TestCertificates(in: dir, name: "other")
        let tls = Settings.Web.TLS(
            certificate: try String(contentsOfFile: certificates.certificate, encoding: .utf8),
            key: try String(contentsOfFile: certificates.key, encoding: .utf8))
        var passwords = WebPasswords(realm: "Vigil 0000beef")
        passwords.set(user: "admin", password: "pw")
        let server = try HTTPServer(address: "127.0.0.1", port: 0, passwords: passwords, tls: tls) { request in
            .text(200, "secret \(request.path)")
        }
        defer { server.stop() }
        func curl(_ arguments: [String]) throws -> ToolResult {
            try runTool("curl", ["-sS", "--max-time", "20", "-w", " %{http_code}"] + arguments)
        }
        let url = "https://127.0.0.1:\(server.port)/a"
        let signedIn = try curl(["--cacert", certificates.caCertificate, "--digest", "-u", "admin:pw", url])
        #expect(signedIn.status == 0 && signedIn.stdout == "secret /a 200", "\(signedIn)")
        let wrong = try curl(["--cacert", certificates.caCertificate, "--digest", "-u", "admin:no", url])
        #expect(wrong.stdout.hasSuffix(" 401") && !wrong.stdout.contains("secret"), "\(wrong)")
        // By name too (the certificate names localhost).
        let byName = try curl([
            "--cacert", certificates.caCertificate, "--digest", "-u", "admin:pw", "--resolve",
            "localhost:\(server.port):127.0.0.1", "https://localhost:\(server.port)/b",
        ])
        #expect(byName.stdout == "secret /b 200", "\(byName)")
        // A client that trusts another CA stops at the certificate (curl's 60).
        let untrusted = try curl(["--cacert", other.caCertificate, url])
        #expect(untrusted.status == 60 && !untrusted.stdout.contains("secret"), "\(untrusted)")
        // Plain HTTP on the HTTPS port: no answer a client could take for the page.
        let plain = try curl(["http://127.0.0.1:\(server.port)/a"])
        #expect(plain.status != 0 && !plain.stdout.contains("secret"), "\(plain)")
        #expect(
            try curl(["--cacert", certificates.caCertificate, "--digest", "-u", "admin:pw", url]).stdout
                == "secret /a 200", "the server went on after the plain request")

        // Another certificate's key.
        let mismatched = Settings.Web.TLS(
            certificate: tls.certificate, key: try String(contentsOfFile: other.key, encoding: .utf8))
        #expect {
            _ = try HTTPServer(address: "127.0.0.1", port: 0, tls: mismatched) { _ in .text(200, "ok") }
        } throws: { error in
            "\(error)".contains("GnuTLS refused its certificate and key") && "\(error)".contains("openssl pkey")
        }
    }

    @Test func ipv6LoopbackIsServed() throws {
        let server = try HTTPServer(address: "::1", port: 0) { _ in .text(200, "six") }
        defer { server.stop() }
        let r = try runTool("curl", ["-sS", "--max-time", "20", "http://[::1]:\(server.port)/"])
        #expect(r.stdout == "six")
    }

    /// A body that gives its parts one at a time, each once `release` is called (from the test's
    /// thread), and sleeps in between.
    final class Parts: HTTPStream {
        struct State {
            var parts: [[UInt8]]
            var released = 0
            var sent = 0
            var wake: (@Sendable () -> Void)?
            var closed = false
            var sleeps = 0
        }
        let state: Mutex<State>
        init(_ parts: [String]) { state = Mutex(State(parts: parts.map { Array($0.utf8) })) }

        func read(
            into buffer: UnsafeMutableRawBufferPointer, sleep: () -> Void, wake: @escaping @Sendable () -> Void
        ) -> HTTPStreamRead {
            state.withLock { s in
                if s.sent == s.parts.count { return .end }
                guard s.sent < s.released else {
                    sleep()
                    s.sleeps += 1
                    s.wake = wake
                    return .waiting
                }
                let part = s.parts[s.sent]
                precondition(part.count <= buffer.count)
                buffer.copyBytes(from: part)
                s.sent += 1
                return .bytes(part.count)
            }
        }

        /// Lets the next part go.
        func release() {
            let wake = state.withLock { s -> (@Sendable () -> Void)? in
                s.released += 1
                defer { s.wake = nil }
                return s.wake
            }
            wake?()
        }

        func close() { state.withLock { $0.closed = true } }
    }

    @Test func aStreamedBodyIsSentAsItIsMadeAndItsConnectionWaitsMeanwhile() throws {
        let parts = Parts(["one ", "two ", "three"])
        let server = try Self.serve { _ in HTTPResponse(status: 200, body: .stream(parts)) }
        defer { server.stop() }
        let feeder = Thread {
            for _ in 0..<3 {
                Thread.sleep(forTimeInterval: 0.3)
                parts.release()
            }
        }
        feeder.start()
        let r = try Self.curl(server, "/live")
        #expect(r.status == 200 && String(decoding: r.body, as: UTF8.self) == "one two three")
        #expect(r.headers["transfer-encoding"] == "chunked")
        let (sleeps, closed) = parts.state.withLock { ($0.sleeps, $0.closed) }
        #expect(sleeps >= 3, "it slept before each part, not spinning")
        #expect(closed)
        #expect(server.streamsOpen == 0)
    }

    @Test func stoppingEndsTheStreamsThatWaitAndTheirClientsGetTheEnd() throws {
        let parts = Parts(["first ", "never"])
        let server = try Self.serve { _ in HTTPResponse(status: 200, body: .stream(parts)) }
        parts.release()
        let output = try TemporaryDirectory("vigil-web-stream")
        defer { output.remove() }
        let curl = Process()
        curl.executableURL = URL(fileURLWithPath: "/usr/bin/curl")
        curl.arguments = ["-sS", "-o", output.file("body"), "http://127.0.0.1:\(server.port)/live"]
        try curl.run()
        // Once the first part is out, the stream waits (its connection suspended)…
        for _ in 0..<200 where parts.state.withLock({ $0.sleeps }) == 0 { Thread.sleep(forTimeInterval: 0.05) }
        #expect(server.streamsOpen == 1)
        // …and the server stops all the same, ending it: curl gets a whole (chunked) body.
        server.stop()
        curl.waitUntilExit()
        #expect(curl.terminationStatus == 0)
        #expect((try? String(contentsOfFile: output.file("body"), encoding: .utf8)) == "first ")
        #expect(parts.state.withLock { $0.closed })
    }

    @Test func withPasswordsEveryRequestSignsInByDigest() throws {
        var passwords = WebPasswords(realm: "Vigil 0badcafe")
        passwords.set(user: "admin", password: "correct horse")
        passwords.set(user: "bob", password: "b")
        let seen = Mutex(0)
        let server = try HTTPServer(address: "127.0.0.1", port: 0, passwords: passwords) { _ in
            seen.withLock { $0 += 1 }
            return .text(200, "inside")
        }
        defer { server.stop() }
        // Nobody, a wrong password, an unknown user, Basic instead of Digest: 401, asking for Digest.
        for arguments in [
            [], ["--digest", "-u", "admin:wrong"], ["--digest", "-u", "eve:correct horse"],
            ["--basic", "-u", "admin:correct horse"],
        ] {
            let r = try Self.curl(server, "/", arguments)
            #expect(r.status == 401, "\(arguments)")
            #expect(r.headers["www-authenticate"]?.hasPrefix("Digest realm=\"Vigil 0badcafe\"") == true)
            #expect(!String(decoding: r.body, as: UTF8.self).contains("inside"))
        }
        #expect(seen.withLock { $0 } == 0, "the handler never saw a request that did not sign in")
        // Each user with its password.
        #expect(try Self.curl(server, "/", ["--digest", "-u", "admin:correct horse"]).status == 200)
        let bob = try Self.curl(server, "/clip", ["--digest", "-u", "bob:b"])
        #expect(bob.status == 200 && String(decoding: bob.body, as: UTF8.self) == "inside")
        // A body sent without signing in is not taken.
        let post = try Self.curl(server, "/", ["-X", "POST", "--data-binary", "x"])
        #expect(post.status == 401)
        #expect(seen.withLock { $0 } == 2)
    }
}
