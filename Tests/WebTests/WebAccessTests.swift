import Configuration
import Foundation
import Logging
import Media
import POSIX
import Synchronization
import TestSupport
import Testing

@testable import Agent
@testable import Web

/// Who may reach the server, against real clients on a loopback port: the names it answers to
/// (DNS rebinding), failed sign-ins slowed per address, a challenge that says nothing of who
/// exists, the metrics token, and `nosniff` on every answer.
@Suite struct WebAccessTests {
    /// A password file's users: admin (password "right").
    static let passwords: WebPasswords = {
        var passwords = WebPasswords(realm: "Vigil 0badcafe")
        passwords.set(user: "admin", password: "right")
        return passwords
    }()
    static let token = "0123456789abcdef0123456789abcdef"

    /// `curl` once on each of `count` copies of `path`, in one process (one connection, as
    /// fast as it goes): each answer's status, in order.
    static func statuses(_ server: HTTPServer, _ path: String, count: Int, _ arguments: [String]) throws -> [Int] {
        let url = "http://127.0.0.1:\(server.port)\(path)"
        let r = try runTool(
            "curl",
            ["-sS", "--max-time", "60", "-w", "%{http_code}\\n"] + arguments
                + (0..<count).flatMap { _ in ["-o", "/dev/null", url] })
        #expect(r.status == 0, "curl: \(r.stderr)")
        return r.stdout.split(separator: "\n").compactMap { Int($0) }
    }

    /// The site of an agent that is not running: `control` says what it was asked.
    static func site(_ control: AgentControl) -> WebSite {
        WebSite(camera: "yard", version: "0.1.0", storage: MemoryStorage(), context: SinkContext(requests: control))
    }

    /// A page another site's script reaches through a name that resolves to this machine (DNS
    /// rebinding) gets 421 on every address, before any sign-in, and nothing is done; the names
    /// that are this machine's (and web.url's) are served, with any port.
    @Test func aNameThatIsNotThisMachinesIsMisdirected() throws {
        let control = AgentControl()
        let site = Self.site(control)
        let server = try HTTPServer(address: "127.0.0.1", port: 0, names: ["garage.example"]) { site.respond($0) }
        defer { server.stop() }
        let port = server.port
        let post = ["-X", "POST", "-H", "Content-Type: application/json", "-d", "{\"seconds\": 5}"]
        for host in ["evil.example", "evil.example:\(port)", "localhost.evil.example", "127.0.0.1.evil.example"] {
            for (path, extra) in [
                ("/", []), ("/live.mp4", []), ("/api/clips", []), ("/metrics", []), ("/api/trigger", post),
            ] {
                let r = try HTTPServerTests.curl(server, path, ["-H", "Host: \(host)"] + extra)
                #expect(r.status == 421, "\(host)\(path)")
                let text = String(decoding: r.body, as: UTF8.self)
                #expect(text.contains("web.url") && !text.contains("<h1>"), "\(host)\(path): \(text)")
            }
        }
        #expect(control.take().record == nil, "nothing was triggered")
        let machine = HostName.current.lowercased()
        let short = machine.split(separator: ".").first.map(String.init) ?? machine
        for host in [
            "localhost", "localhost:\(port)", "LocalHost.", "yard.localhost:\(port)", "127.0.0.1:\(port)", "127.0.0.1",
            "[::1]:\(port)", "[::1]", "192.168.1.20:8080", machine, "\(machine):\(port)", "\(short).local",
            "garage.example", "Garage.Example:8080",
        ] {
            let r = try HTTPServerTests.curl(server, "/api/clips", ["-H", "Host: \(host)"])
            #expect(r.status == 200, "\(host)")
        }
        #expect(try HTTPServerTests.curl(server, "/api/trigger", post).status == 202)

        // With passwords, too: refused before the challenge (a rebinding page gets no 401).
        let signed = try HTTPServer(address: "127.0.0.1", port: 0, passwords: Self.passwords) { site.respond($0) }
        defer { signed.stop() }
        let misdirected = try HTTPServerTests.curl(
            signed, "/", ["-H", "Host: evil.example", "--digest", "-u", "admin:right"])
        #expect(misdirected.status == 421 && misdirected.headers["www-authenticate"] == nil)
        #expect(try HTTPServerTests.curl(signed, "/", ["--digest", "-u", "admin:right"]).status == 200)
    }

    /// Five wrong passwords from one address, and that address waits (429, Retry-After),
    /// whatever it sends — the right password too — until the wait is over; another address is
    /// not slowed; one warning line says so, and one line when the address signs in again.
    @Test func failedSignInsFromOneAddressAreSlowedAndSaidOnce() throws {
        let clock = ManualClock(.s(1000))
        let lines = MemoryLogSink()
        let server = try HTTPServer(
            address: "127.0.0.1", port: 0, passwords: Self.passwords, log: Logger(level: .info, sink: lines),
            clock: clock.clock
        ) { _ in .text(200, "inside") }
        defer { server.stop() }
        let tries = try Self.statuses(server, "/", count: 50, ["--digest", "-u", "admin:wrong"])
        #expect(tries.count == 50)
        #expect(Array(tries.prefix(5)) == [401, 401, 401, 401, 401], "\(tries)")
        #expect(tries.dropFirst(5).allSatisfy { $0 == 429 }, "\(tries)")
        let waiting = try HTTPServerTests.curl(server, "/", ["--digest", "-u", "admin:right"])
        #expect(waiting.status == 429 && waiting.headers["retry-after"] == "1", "\(waiting.headers)")
        #expect(!String(decoding: waiting.body, as: UTF8.self).contains("inside"))
        // Another address (127.0.0.2 is this machine's too) is not slowed.
        let other = try HTTPServerTests.curl(
            server, "/", ["--interface", "127.0.0.2", "--digest", "-u", "admin:right"])
        #expect(other.status == 200)
        let warned = lines.written(at: .warning)
        #expect(warned.count == 1, "\(lines.written)")
        let line = try #require(warned.first)
        #expect(
            logValue(line, "address") == "127.0.0.1" && logValue(line, "user") == "admin"
                && logValue(line, "failures") == "5" && logValue(line, "wait_s") == "1", "\(line)")

        // The wait over, the right password: in, and the address starts anew.
        clock.advance(seconds: 1)
        #expect(try HTTPServerTests.curl(server, "/", ["--digest", "-u", "admin:right"]).status == 200)
        #expect(lines.written(at: .info).contains { $0.contains("address=127.0.0.1") }, "\(lines.written)")
        let again = try Self.statuses(server, "/", count: 5, ["--digest", "-u", "admin:wrong"])
        #expect(again == [401, 401, 401, 401, 401], "\(again)")
        #expect(lines.written(at: .warning).count == 2, "a new burst, a new line")
        // Each failure past the limit doubles the wait.
        clock.advance(seconds: 1)
        #expect(try Self.statuses(server, "/", count: 2, ["--digest", "-u", "admin:wrong"]) == [401, 429])
        let doubled = try HTTPServerTests.curl(server, "/", ["--digest", "-u", "admin:right"])
        #expect(doubled.status == 429 && doubled.headers["retry-after"] == "2", "\(doubled.headers)")
        #expect(lines.written(at: .warning).count == 2, "nothing more for the same burst")
    }

    /// An `Authorization` header with a made-up nonce, for `user` (the response is not checked
    /// before the nonce is); the challenge's `WWW-Authenticate`.
    static func challenge(_ server: HTTPServer, user: String) throws -> String {
        let nonce = String(repeating: "5e", count: 16) + "00000001"
        let header =
            "Authorization: Digest username=\"\(user)\", realm=\"Vigil 0badcafe\", nonce=\"\(nonce)\", uri=\"/\", "
            + "response=\"\(String(repeating: "0", count: 32))\", qop=auth, nc=00000001, cnonce=\"abcdef\""
        let r = try HTTPServerTests.curl(server, "/", ["-H", header])
        #expect(r.status == 401)
        return r.headers["www-authenticate"] ?? ""
    }

    /// A stale nonce is said stale whoever it names: the answer does not tell who exists; and
    /// a nonce that is not the server's is no failed sign-in.
    @Test func theChallengeSaysNothingOfWhoExists() throws {
        let clock = ManualClock(.s(1000))
        let server = try HTTPServer(
            address: "127.0.0.1", port: 0, passwords: Self.passwords, clock: clock.clock
        ) { _ in .text(200, "inside") }
        defer { server.stop() }
        let known = try Self.challenge(server, user: "admin")
        let unknown = try Self.challenge(server, user: "eve")
        #expect(known.contains("stale=\"true\""), "\(known)")
        #expect(unknown.contains("stale=\"true\""), "\(unknown)")
        for _ in 0..<10 { _ = try Self.challenge(server, user: "eve") }
        #expect(try HTTPServerTests.curl(server, "/", ["--digest", "-u", "admin:right"]).status == 200)
        // A wrong password for an unknown user counts as one for a known one.
        let unknownTries = try Self.statuses(server, "/", count: 6, ["--digest", "-u", "eve:right"])
        #expect(unknownTries == [401, 401, 401, 401, 401, 429], "\(unknownTries)")
    }

    /// Prometheus's scrape with `Authorization: Bearer TOKEN` (its credentials_file) reads
    /// /metrics, and nothing else; a wrong token is a failed sign-in.
    @Test func theMetricsTokenOpensMetricsOnly() throws {
        let clock = ManualClock(.s(1000))
        let server = try HTTPServer(
            address: "127.0.0.1", port: 0, passwords: Self.passwords, metricsToken: Self.token, clock: clock.clock
        ) { request in .text(200, "served \(request.path)") }
        defer { server.stop() }
        let bearer = ["-H", "Authorization: Bearer \(Self.token)"]
        let metrics = try HTTPServerTests.curl(server, "/metrics", bearer)
        #expect(metrics.status == 200 && String(decoding: metrics.body, as: UTF8.self) == "served /metrics")
        #expect(try HTTPServerTests.curl(server, "/metrics", bearer + ["-I"]).status == 200)
        for (path, extra) in [("/", []), ("/api/clips", []), ("/live.mp4", []), ("/metrics", ["-X", "POST"])] {
            let r = try HTTPServerTests.curl(server, path, bearer + extra)
            #expect(r.status == 403, "\(path) \(extra)")
            #expect(!String(decoding: r.body, as: UTF8.self).contains("served"))
        }
        #expect(try HTTPServerTests.curl(server, "/metrics").status == 401)
        #expect(try HTTPServerTests.curl(server, "/metrics", ["--digest", "-u", "admin:right"]).status == 200)
        let wrong = try Self.statuses(
            server, "/metrics", count: 6, ["-H", "Authorization: Bearer \(Self.token.dropLast())0"])
        #expect(wrong == [401, 401, 401, 401, 401, 429], "\(wrong)")
        #expect(try HTTPServerTests.curl(server, "/metrics", bearer).status == 429, "the right token waits too")
    }

    /// Every answer, the errors that repeat what was asked above all, says `nosniff`: no
    /// browser takes a text page for a script or a page.
    @Test func everyAnswerSaysNosniff() throws {
        let clock = ManualClock(.s(1000))
        let site = Self.site(AgentControl())
        let open = try HTTPServer(address: "127.0.0.1", port: 0) { site.respond($0) }
        defer { open.stop() }
        for (path, arguments, status) in [
            ("/nothing%3Cscript%3E", [String](), 404), ("/", ["-X", "DELETE"], 405), ("/?day=%3Cb%3E", [], 400),
            ("/api/trigger", ["-X", "POST", "-d", "x"], 415), ("/api/clips", [], 200), ("/", [], 200),
            ("/", ["-H", "Host: evil.example"], 421),
        ] {
            let r = try HTTPServerTests.curl(open, path, arguments)
            #expect(r.status == status, "\(path)")
            #expect(r.headers["x-content-type-options"] == "nosniff", "\(path) \(arguments): \(r.headers)")
        }
        let signed = try HTTPServer(
            address: "127.0.0.1", port: 0, passwords: Self.passwords, clock: clock.clock
        ) { site.respond($0) }
        defer { signed.stop() }
        let challenge = try HTTPServerTests.curl(signed, "/")
        #expect(challenge.status == 401 && challenge.headers["x-content-type-options"] == "nosniff")
        _ = try Self.statuses(signed, "/", count: 5, ["--digest", "-u", "admin:wrong"])
        let slowed = try HTTPServerTests.curl(signed, "/")
        #expect(slowed.status == 429 && slowed.headers["x-content-type-options"] == "nosniff")
    }
}
