import Media
import Testing

@testable import Web

/// The values behind who may reach the server, with chosen inputs and times: the names a
/// `Host` header may give, the sign-in throttle, and the reading of a Digest response.
@Suite struct WebAccessRulesTests {
    @Test func hostHeadersAreReadWithTheirPortsAndAddresses() {
        let check = HostCheck(machine: "Garage.home.lan", extra: ["camera.example", "[2001:DB8::7]"])
        #expect(
            check.names == [
                "localhost", "garage.home.lan", "garage", "garage.local", "camera.example", "[2001:db8::7]",
            ])
        for served in [
            nil, "localhost", "LOCALHOST:8080", "localhost.", "a.b.localhost", "garage", "garage.local:443",
            "Garage.Home.Lan.", "camera.example:8080", "10.0.0.7", "10.0.0.7:8080", "[::1]", "[fe80::1%25eth0]:80",
            "[2001:db8::7]:8080", "::1", " localhost ",
        ] as [String?] {
            #expect(check.allows(served), "\(served ?? "no Host")")
        }
        for refused in [
            "", "evil.example", "garage.evil.example", "localhost.evil.example", "10.0.0.7.nip.io", "localhost:",
            "localhost:80x", "localhost:123456", "[::1]x", "[evil.example]", "[::1", "10.1",
            "garage.lan", "local", "x:1:2",
        ] {
            #expect(!check.allows(refused), "\(refused)")
        }
        #expect(check.allows("camera.example."), "a trailing dot is the same name")
        #expect(check.refusal.contains("web.url") && check.refusal.contains("\"garage.local\""))
        #expect(HostCheck(machine: "").names == ["localhost"])
    }

    static func address(_ bytes: [UInt8]) -> ClientAddress {
        ClientAddress(bytes: bytes)!
    }
    static let one = address([192, 0, 2, 1])
    static let two = address([192, 0, 2, 2])

    @Test func failuresAreSlowedAfterFiveWithAWaitThatDoubles() {
        var throttle = SignInThrottle()
        for i in 0..<4 {
            #expect(throttle.failed(Self.one, at: Double(i)) == nil)
            #expect(throttle.wait(for: Self.one, at: Double(i)) == nil)
        }
        #expect(throttle.failed(Self.one, at: 10) == SignInThrottle.Slowed(failures: 5, wait: 1))
        #expect(throttle.wait(for: Self.one, at: 10) == 1)
        #expect(throttle.wait(for: Self.one, at: 10.5) == 0.5)
        #expect(throttle.wait(for: Self.one, at: 11) == nil)
        #expect(throttle.wait(for: Self.two, at: 10) == nil, "another address is not slowed")
        // Each failure after the wait doubles the next, up to five minutes; said once.
        var now = 11.0
        var waits: [Double] = []
        for _ in 0..<12 {
            #expect(throttle.failed(Self.one, at: now) == nil)
            let wait = throttle.wait(for: Self.one, at: now) ?? 0
            waits.append(wait)
            now += wait
        }
        #expect(waits == [2, 4, 8, 16, 32, 64, 128, 256, 300, 300, 300, 300])
        // A success ends it, and says it was slowed; the next failures start from nothing.
        #expect(throttle.succeeded(Self.one) == 17)
        #expect(throttle.wait(for: Self.one, at: now) == nil)
        #expect(throttle.succeeded(Self.one) == nil)
        for i in 0..<4 { #expect(throttle.failed(Self.one, at: now + Double(i)) == nil) }
        #expect(throttle.failed(Self.one, at: now + 4)?.failures == 5)
    }

    @Test func failuresFarApartAreForgotten() {
        var throttle = SignInThrottle()
        for i in 0..<10 { #expect(throttle.failed(Self.one, at: Double(i) * 901) == nil) }
        #expect(throttle.records[Self.one.group]?.failures == 1)
        var success = SignInThrottle()
        _ = success.failed(Self.one, at: 0)
        #expect(success.succeeded(Self.one) == nil, "not slowed: nothing to say")
    }

    @Test func theTableIsBoundedAndPushesOutTheOldest() {
        var rules = SignInThrottle.Rules()
        rules.addresses = 3
        var throttle = SignInThrottle(rules: rules)
        for i in 0..<5 { _ = throttle.failed(Self.one, at: Double(i)) }
        #expect(throttle.wait(for: Self.one, at: 4) != nil)
        for (i, last) in [UInt8(10), 11, 12].enumerated() {
            _ = throttle.failed(Self.address([198, 51, 100, last]), at: 5 + Double(i))
        }
        #expect(throttle.records.count == 3)
        #expect(throttle.records[Self.one.group] == nil, "the oldest went")
        #expect(throttle.records[Self.address([198, 51, 100, 12]).group] != nil)
    }

    @Test func ipv6AddressesCountByTheirSlash64() {
        let a = Self.address([0x20, 0x01, 0x0d, 0xb8, 0, 1, 0, 2] + [0, 0, 0, 0, 0, 0, 0, 1])
        let b = Self.address([0x20, 0x01, 0x0d, 0xb8, 0, 1, 0, 2] + [0xde, 0xad, 0, 0, 0, 0, 0, 9])
        let c = Self.address([0x20, 0x01, 0x0d, 0xb8, 0, 1, 0, 3] + [0, 0, 0, 0, 0, 0, 0, 1])
        #expect(a.group == b.group && a.group != c.group)
        #expect(a.groupText == "2001:db8:1:2::/64")
        var throttle = SignInThrottle()
        for i in 0..<5 { _ = throttle.failed(i.isMultiple(of: 2) ? a : b, at: Double(i)) }
        #expect(throttle.wait(for: b, at: 4) == 1 && throttle.wait(for: c, at: 4) == nil)
        let mapped = Self.address(Array(repeating: 0, count: 10) + [0xFF, 0xFF, 192, 0, 2, 1])
        #expect(mapped == Self.one && mapped.groupText == "192.0.2.1")
        #expect(ClientAddress(bytes: [1, 2, 3]) == nil)
    }

    /// RFC 2617 §3.5's example, and the forms a header takes.
    @Test func aDigestResponseIsCheckedAsTheRFCComputesIt() throws {
        let header =
            "Digest username=\"Mufasa\", realm=\"testrealm@host.com\", nonce=\"dcd98b7102dd2f0e8b11d0f600bfb0c093\", uri=\"/dir/index.html\", qop=auth, nc=00000001, cnonce=\"0a4f113b\", response=\"6629fae49393a05397450978507c4ef1\", opaque=\"5ccc069c403ebaf9f0171e9517f40e41\""
        let credentials = try #require(DigestCredentials(header: header))
        #expect(credentials.parameters["username"] == "Mufasa" && credentials.parameters["qop"] == "auth")
        let ha1 = MD5.digest(Array("Mufasa:testrealm@host.com:Circle Of Life".utf8))
        #expect(credentials.answers(ha1: ha1, method: "GET"))
        #expect(!credentials.answers(ha1: ha1, method: "POST"))
        #expect(!credentials.answers(ha1: MD5.digest(Array("Mufasa:testrealm@host.com:wrong".utf8)), method: "GET"))
        #expect(DigestCredentials(header: "Basic YWRtaW46cHc=") == nil)
        #expect(DigestCredentials(header: "Digest username=\"unclosed") == nil)
        let escaped = try #require(DigestCredentials(header: "digest username=\"a\\\"b\",uri=/x"))
        #expect(escaped.parameters == ["username": "a\"b", "uri": "/x"])
    }
}
