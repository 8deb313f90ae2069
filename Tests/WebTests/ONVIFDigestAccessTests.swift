import Configuration
import Foundation
import Logging
import Media
import ONVIF
import TestSupport
import Testing

@testable import Agent
@testable import Web

/// A WS-Security PasswordDigest (what Home Assistant signs every call with) against the real
/// server on a loopback port, with `onvif.password_file`: the right one signs in, once per
/// nonce; a wrong one is refused and counted toward the web's sign-in throttle like a wrong
/// password on the page; the PasswordText of either file signs in.
@Suite struct ONVIFDigestAccessTests {
    static let clear = ONVIFPasswords(users: ["admin": "onvif-secret"])

    static func server(_ clock: ManualClock, log: Logger? = nil) throws -> HTTPServer {
        let endpoint = ONVIFEndpoint(
            device: ONVIFAccessTests.device, passwords: WebAccessTests.passwords, clear: clear,
            listening: "127.0.0.1:0", wallClock: { ONVIFAccessTests.now })
        let site = WebSite(
            camera: "yard", version: "0.1.0", storage: MemoryStorage(), context: SinkContext(requests: AgentControl()),
            signIn: true, onvif: endpoint)
        return try HTTPServer(
            address: "127.0.0.1", port: 0, passwords: WebAccessTests.passwords, log: log, clock: clock.clock,
            signInInBody: ONVIFEndpoint.paths, handler: site.respond)
    }

    /// A UsernameToken with the PasswordDigest of `password` for `nonce`.
    static func digest(_ password: String, nonce: [UInt8], created: String = "2026-12-07T14:00:10Z") -> String {
        let value = PasswordDigest.make(nonce: nonce, created: created, password: password)
        return
            "<wsse:Username>admin</wsse:Username><wsse:Password Type=\"http://docs.oasis-open.org/wss/2004/01/oasis-200401-wss-username-token-profile-1.0#PasswordDigest\">\(value)</wsse:Password><wsse:Nonce EncodingType=\"http://docs.oasis-open.org/wss/2004/01/oasis-200401-wss-soap-message-security-1.0#Base64Binary\">\(Base64.encode(nonce))</wsse:Nonce><wsu:Created xmlns:wsu=\"\(Namespace.utility)\">\(created)</wsu:Created>"
    }

    @Test func theRightDigestSignsInOnceAReplayIsRefused() throws {
        let server = try Self.server(ManualClock(.s(1000)))
        defer { server.stop() }
        let token = Self.digest("onvif-secret", nonce: [1, 2, 3, 4, 5, 6, 7, 8])
        let signedIn = try ONVIFAccessTests.post(server, ONVIFAccessTests.request("GetDeviceInformation", token: token))
        #expect(
            signedIn.status == 200 && signedIn.body.contains("<tds:Manufacturer>Vigil</tds:Manufacturer>"),
            "\(signedIn)")
        let replay = try ONVIFAccessTests.post(server, ONVIFAccessTests.request("GetDeviceInformation", token: token))
        #expect(replay.status == 401 && replay.body.contains("Nonce was taken before"), "\(replay)")
        let next = try ONVIFAccessTests.post(
            server,
            ONVIFAccessTests.request("GetDeviceInformation", token: Self.digest("onvif-secret", nonce: [9, 9])))
        #expect(next.status == 200, "a new nonce: \(next)")
        // The web's password as a digest is not the ONVIF one; as text, either file's signs in.
        let webs = try ONVIFAccessTests.post(
            server, ONVIFAccessTests.request("GetDeviceInformation", token: Self.digest("right", nonce: [7])))
        #expect(webs.status == 401 && webs.body.contains("The user name or password is wrong"), "\(webs)")
        for password in ["right", "onvif-secret"] {
            let text = try ONVIFAccessTests.post(
                server, ONVIFAccessTests.request("GetDeviceInformation", token: ONVIFAccessTests.text(password)))
            #expect(text.status == 200, "\(password): \(text)")
        }
    }

    @Test func wrongDigestsCountTowardTheThrottle() throws {
        let clock = ManualClock(.s(1000))
        let lines = MemoryLogSink()
        let server = try Self.server(clock, log: Logger(level: .info, sink: lines))
        defer { server.stop() }
        var statuses: [Int] = []
        for n in 0..<6 {
            let wrong = Self.digest("guess", nonce: [UInt8(n), 42])
            statuses.append(
                try ONVIFAccessTests.post(server, ONVIFAccessTests.request("GetDeviceInformation", token: wrong)).status
            )
        }
        #expect(statuses == [401, 401, 401, 401, 401, 429], "\(statuses)")
        let right = Self.digest("onvif-secret", nonce: [77])
        #expect(
            try ONVIFAccessTests.post(server, ONVIFAccessTests.request("GetDeviceInformation", token: right)).status
                == 429)
        let warned = try #require(lines.written(at: .warning).first)
        #expect(logValue(warned, "user") == "admin", "\(warned)")
        clock.advance(seconds: 1)
        let inside = try ONVIFAccessTests.post(
            server, ONVIFAccessTests.request("GetDeviceInformation", token: Self.digest("onvif-secret", nonce: [78])))
        #expect(inside.status == 200, "\(inside)")
    }
}
