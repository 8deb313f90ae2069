import Media
import ONVIF
import Testing

/// WS-Security's PasswordDigest checked against `onvif.password_file`'s passwords: a vector
/// computed by Python's hashlib (base64.b64encode(hashlib.sha1(nonce + created +
/// password).digest())), a wrong password, a nonce taken twice, a token far from the clock.
@Suite struct PasswordDigestTests {
    /// 2026-12-07T14:00:00Z.
    static let now = 1_796_652_000.0
    static let nonce = "AAECAwQFBgcICQoLDA0ODw=="  // bytes 0…15
    static let created = "2026-12-07T14:00:10Z"
    /// hashlib's digest of the nonce, `created` and "s3cret:pw".
    static let vector = "F9FJ6QEHe7wXZ4VvaDetU8gf5MM="
    static let clear = ["admin": "s3cret:pw"]
    static let hashes = ["admin": MD5.digest(Array("admin:Vigil 0:other".utf8))]

    static func token(
        _ digest: String, nonce: String? = nonce, created: String? = created, user: String = "admin"
    )
        -> UsernameToken
    {
        UsernameToken(username: user, password: .digest(digest), created: created, nonce: nonce)
    }

    @Test func sha1AndBase64AreTheStandardOnes() {
        #expect(SHA1.digest(Array("abc".utf8)).lowercaseHex == "a9993e364706816aba3e25717850c26c9cd0d89d")
        #expect(
            SHA1.digest([UInt8](repeating: UInt8(ascii: "a"), count: 1000)).lowercaseHex
                == "291e9a6c66994949b57ba5e650361e98fc36b1ba")
        #expect(Base64.encode(Array(0..<16)) == Self.nonce)
        #expect(Base64.decode(Self.nonce) == Array(0..<16))
        for text in ["", "f", "fo", "foo", "foob", "fooba", "foobar"] {
            #expect(Base64.decode(Base64.encode(Array(text.utf8))) == Array(text.utf8))
        }
        #expect(Base64.encode(Array("fo".utf8)) == "Zm8=")
        #expect(Base64.decode("Zm9v!") == nil && Base64.decode("Z") == nil && Base64.decode("Zm=9") == nil)
        #expect(PasswordDigest.make(nonce: Array(0..<16), created: Self.created, password: "s3cret:pw") == Self.vector)
    }

    @Test func theClientsDigestSignsInOnceAndAReplayIsRefused() {
        var nonces = NonceMemory()
        func check(_ token: UsernameToken, now: Double = Self.now) -> TokenCheck {
            token.check(users: Self.hashes, realm: "Vigil 0", clear: Self.clear, nonces: &nonces, now: now)
        }
        #expect(check(Self.token(Self.vector)) == .signedIn("admin"))
        #expect(check(Self.token(Self.vector)) == .replayed("admin"), "the same token again")
        #expect(check(Self.token(Self.vector), now: Self.now + 200) == .replayed("admin"))
        #expect(check(Self.token(Self.vector), now: Self.now + 311) == .stale("admin"), "past the window")
        let other = PasswordDigest.make(nonce: [9, 9, 9], created: Self.created, password: "s3cret:pw")
        #expect(check(Self.token(other, nonce: Base64.encode([9, 9, 9]))) == .signedIn("admin"), "a new nonce")
        #expect(nonces.count("admin") == 2)

        let wrong = PasswordDigest.make(nonce: [1], created: Self.created, password: "guess")
        #expect(check(Self.token(wrong, nonce: Base64.encode([1]))) == .wrongPassword("admin"))
        #expect(check(Self.token(Self.vector, user: "nobody")) == .wrongPassword("nobody"))
        #expect(check(Self.token("not base64!", nonce: Base64.encode([2]))) == .wrongPassword("admin"))
        #expect(check(Self.token(Self.vector, nonce: nil)) == .replayed("admin"), "no nonce: cannot be kept")
        #expect(check(Self.token(Self.vector, created: nil)) == .replayed("admin"))

        let old = "2026-12-07T13:54:00Z"
        let stale = PasswordDigest.make(nonce: [3], created: old, password: "s3cret:pw")
        #expect(check(Self.token(stale, nonce: Base64.encode([3]), created: old)) == .stale("admin"))
    }

    @Test func withoutTheONVIFFileADigestCannotBeCheckedAndTextMatchesEitherFile() {
        var nonces = NonceMemory()
        let digest = Self.token(Self.vector)
        #expect(
            digest.check(users: Self.hashes, realm: "Vigil 0", clear: nil, nonces: &nonces, now: Self.now)
                == .digestCannotBeChecked("admin"))
        for (password, expected) in [
            ("s3cret:pw", TokenCheck.signedIn("admin")), ("other", .signedIn("admin")),
            ("s3cret", .wrongPassword("admin")),
        ] {
            let text = UsernameToken(username: "admin", password: .text(password), created: Self.created)
            #expect(
                text.check(users: Self.hashes, realm: "Vigil 0", clear: Self.clear, nonces: &nonces, now: Self.now)
                    == expected, "\(password)")
        }
    }

    @Test func theNoncesKeptAreBoundedAndForgottenOnceTheirTokenIsStale() {
        var nonces = NonceMemory()
        for n in 0..<NonceMemory.limit {
            #expect(nonces.take("n\(n)", user: "admin", until: Self.now + 300, now: Self.now) == .new)
        }
        #expect(nonces.take("more", user: "admin", until: Self.now + 300, now: Self.now) == .full)
        #expect(nonces.take("more", user: "other", until: Self.now + 300, now: Self.now) == .new, "per user")
        #expect(nonces.take("more", user: "admin", until: Self.now + 700, now: Self.now + 301) == .new)
        #expect(nonces.count("admin") == 1)
    }
}
