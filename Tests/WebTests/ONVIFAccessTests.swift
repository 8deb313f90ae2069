import Configuration
import Foundation
import Logging
import Media
import ONVIF
import TestSupport
import Testing

@testable import Agent
@testable import Web

/// ONVIF's services on the web server with a password file, against curl on a loopback port:
/// the clock and the services for anyone; the rest for a user, by HTTP Digest or a WS-Security
/// UsernameToken with the password as text; a wrong one refused and counted toward the web's
/// sign-in throttle; a PasswordDigest and a token far from the clock refused, not counted; the
/// web's Host check before anything.
@Suite struct ONVIFAccessTests {
    static let device = ONVIFDevice(
        camera: "yard", version: "0.1.0", machine: "test", hardware: "x86_64",
        video: .init(width: 320, height: 240, framesPerSecond: 15, keyframeInterval: 15, profile: "High"),
        rtspPort: 8554, webScheme: "http")
    /// 2026-12-07T14:00:00Z.
    static let now = 1_796_652_000.0

    /// A server with `WebAccessTests.passwords` (admin, "right") answering ONVIF on `clock`.
    static func server(_ clock: ManualClock, log: Logger? = nil) throws -> HTTPServer {
        let endpoint = ONVIFEndpoint(
            device: device, passwords: WebAccessTests.passwords, listening: "127.0.0.1:0", wallClock: { now })
        let site = WebSite(
            camera: "yard", version: "0.1.0", storage: MemoryStorage(), context: SinkContext(requests: AgentControl()),
            signIn: true, onvif: endpoint)
        return try HTTPServer(
            address: "127.0.0.1", port: 0, passwords: WebAccessTests.passwords, log: log, clock: clock.clock,
            signInInBody: ONVIFEndpoint.paths, handler: site.respond)
    }

    /// A request for `operation` of the device service, with `token` (a UsernameToken's inside).
    static func request(_ operation: String, token: String? = nil) -> String {
        let header = token.map {
            "<wsse:Security xmlns:wsse=\"\(Namespace.security)\"><wsse:UsernameToken>\($0)</wsse:UsernameToken></wsse:Security>"
        }
        return """
            <?xml version="1.0"?><s:Envelope xmlns:s="http://www.w3.org/2003/05/soap-envelope"><s:Header>\(header ?? "")</s:Header><s:Body><d:\(operation) xmlns:d="http://www.onvif.org/ver10/device/wsdl"/></s:Body></s:Envelope>
            """
    }

    static func text(_ password: String, created: String = "2026-12-07T14:00:10Z", user: String = "admin") -> String {
        "<wsse:Username>\(user)</wsse:Username><wsse:Password Type=\"http://docs.oasis-open.org/wss/2004/01/oasis-200401-wss-username-token-profile-1.0#PasswordText\">\(password)</wsse:Password><wsu:Created xmlns:wsu=\"\(Namespace.utility)\">\(created)</wsu:Created>"
    }

    static func post(
        _ server: HTTPServer, _ body: String, _ arguments: [String] = []
    ) throws -> (
        status: Int, headers: [String: String], body: String
    ) {
        let r = try HTTPServerTests.curl(
            server, "/onvif/device_service",
            ["-X", "POST", "-H", "Content-Type: application/soap+xml; charset=utf-8", "--data-binary", body]
                + arguments)
        return (r.status, r.headers, String(decoding: r.body, as: UTF8.self))
    }

    @Test func theClockAndTheServicesNeedNoSignInTheRestAUser() throws {
        let clock = ManualClock(.s(1000))
        let server = try Self.server(clock)
        defer { server.stop() }
        for open in ["GetSystemDateAndTime", "GetServices", "GetCapabilities"] {
            let answer = try Self.post(server, Self.request(open))
            #expect(answer.status == 200, "\(open): \(answer.body)")
            #expect(answer.headers["content-type"] == "application/soap+xml; charset=utf-8")
        }
        #expect(try Self.post(server, Self.request("GetSystemDateAndTime")).body.contains("<tt:Year>2026</tt:Year>"))

        let refused = try Self.post(server, Self.request("GetDeviceInformation"))
        #expect(refused.status == 401)
        #expect(refused.headers["www-authenticate"]?.hasPrefix("Digest ") == true, "\(refused.headers)")
        #expect(refused.body.contains("ter:NotAuthorized") && !refused.body.contains("Vigil</tds:Manufacturer>"))

        let text = try Self.post(server, Self.request("GetDeviceInformation", token: Self.text("right")))
        #expect(text.status == 200 && text.body.contains("<tds:Manufacturer>Vigil</tds:Manufacturer>"), "\(text)")
        let digest = try Self.post(server, Self.request("GetDeviceInformation"), ["--digest", "-u", "admin:right"])
        #expect(digest.status == 200 && digest.body.contains("<tds:SerialNumber>"), "\(digest)")
        let wrongDigest = try Self.post(server, Self.request("GetDeviceInformation"), ["--digest", "-u", "admin:x"])
        #expect(wrongDigest.status == 401)
    }

    /// Five wrong passwords in UsernameTokens and the address waits, the right one too, as for
    /// the web's own sign-in; tokens that cannot be checked (a PasswordDigest) or are far from
    /// the clock (a replay) are refused without counting.
    @Test func wrongTokensCountTowardTheThrottleUncheckableOnesAreRefusedWithWhy() throws {
        let clock = ManualClock(.s(1000))
        let lines = MemoryLogSink()
        let server = try Self.server(clock, log: Logger(level: .info, sink: lines))
        defer { server.stop() }
        let digest =
            "<wsse:Username>admin</wsse:Username><wsse:Password Type=\"http://docs.oasis-open.org/wss/2004/01/oasis-200401-wss-username-token-profile-1.0#PasswordDigest\">bm90IGEgZGlnZXN0</wsse:Password><wsse:Nonce>AAAA</wsse:Nonce><wsu:Created xmlns:wsu=\"\(Namespace.utility)\">2026-12-07T14:00:00Z</wsu:Created>"
        for _ in 0..<6 {
            let answer = try Self.post(server, Self.request("GetDeviceInformation", token: digest))
            #expect(answer.status == 401)
            #expect(answer.body.contains("cannot check a WS-Security PasswordDigest"), "\(answer.body)")
            #expect(answer.body.contains("run sudo vigil passwd --onvif USER"), "the fix: \(answer.body)")
        }
        for _ in 0..<6 {
            let stale = try Self.post(
                server, Self.request("GetDeviceInformation", token: Self.text("right", created: "2026-12-07T13:50:00Z"))
            )
            #expect(stale.status == 401 && stale.body.contains("more than 5 minutes from this camera"))
        }
        #expect(lines.written(at: .warning).isEmpty, "\(lines.written)")

        var statuses: [Int] = []
        for _ in 0..<6 {
            statuses.append(
                try Self.post(server, Self.request("GetDeviceInformation", token: Self.text("wrong"))).status)
        }
        #expect(statuses == [401, 401, 401, 401, 401, 429], "\(statuses)")
        let waiting = try Self.post(server, Self.request("GetDeviceInformation", token: Self.text("right")))
        #expect(waiting.status == 429 && waiting.headers["retry-after"] == "1", "\(waiting)")
        let warned = try #require(lines.written(at: .warning).first)
        #expect(logValue(warned, "tried") == "ws-security password" && logValue(warned, "user") == "admin")
        clock.advance(seconds: 1)
        let inside = try Self.post(server, Self.request("GetDeviceInformation", token: Self.text("right")))
        #expect(inside.status == 200, "\(inside)")
        #expect(lines.written(at: .info).contains { $0.contains("signed in: it is served again") }, "\(lines.written)")
    }

    @Test func anotherNameIsMisdirectedAndWhatIsNotSOAPIsAFault() throws {
        let clock = ManualClock(.s(1000))
        let server = try Self.server(clock)
        defer { server.stop() }
        let misdirected = try Self.post(
            server, Self.request("GetSystemDateAndTime"), ["-H", "Host: attacker.example:8080"])
        #expect(misdirected.status == 421)
        // Signed in, what is not SOAP is a fault; not signed in, it is asked to sign in first.
        for broken in ["", "<a>", "<!DOCTYPE x [<!ENTITY e \"e\">]><x>&e;</x>", "not xml at all"] {
            let answer = try Self.post(server, broken, ["--digest", "-u", "admin:right"])
            #expect(answer.status == 400, "\(broken): \(answer)")
            #expect(answer.body.contains("env:Fault") && answer.body.contains("ter:WellFormed"))
            #expect(try Self.post(server, broken).status == 401)
        }
        let get = try HTTPServerTests.curl(server, "/onvif/device_service", ["--digest", "-u", "admin:right"])
        #expect(get.status == 405 && get.headers["allow"] == "POST")
        let unknown = try Self.post(server, Self.request("SystemReboot", token: Self.text("right")))
        #expect(unknown.status == 400 && unknown.body.contains("ter:ActionNotSupported"), "\(unknown)")
    }
}
