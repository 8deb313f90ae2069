import Media

/// WS-Security's PasswordDigest (OASIS UsernameToken Profile 1.0, §3.1):
/// `Base64(SHA-1(nonce + created + password))`, the nonce being the Base64-decoded `Nonce`.
/// What every ONVIF client sends (Home Assistant's onvif-zeep-async always), and why the
/// camera keeps the password itself in `onvif.password_file`.
public enum PasswordDigest {
    /// The digest a client holding `password` sends for `nonce` (raw bytes) and `created`.
    public static func make(nonce: [UInt8], created: String, password: String) -> String {
        Base64.encode(SHA1.digest(nonce + Array(created.utf8) + Array(password.utf8)))
    }

    /// Whether `given` (as sent) is the digest of `password` for `nonce` (as sent: Base64) and
    /// `created`; compared in constant time over the bytes.
    public static func matches(_ given: String, nonce: String, created: String, password: String) -> Bool {
        guard let nonceBytes = Base64.decode(nonce), let givenBytes = Base64.decode(given) else { return false }
        let expected = SHA1.digest(nonceBytes + Array(created.utf8) + Array(password.utf8))
        return ConstantTime.equal(givenBytes, expected)
    }
}

/// Byte strings compared without a branch on where they differ.
public enum ConstantTime {
    public static func equal(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        var difference: UInt8 = a.count == b.count ? 0 : 1
        for index in 0..<max(a.count, b.count) {
            difference |= (index < a.count ? a[index] : 0) ^ (index < b.count ? b[index] : 0xFF)
        }
        return difference == 0
    }
}

/// The nonces of PasswordDigests taken in the last minutes, per user, so the same token is
/// not taken twice (a replay). A nonce is kept until its token's `Created` leaves the window
/// (a token that old is refused anyway); at most `limit` a user — only a token with the right
/// digest is kept, so only a holder of the password fills it, and past the limit a new token
/// is refused (never a remembered nonce forgotten early).
public struct NonceMemory: Sendable {
    /// Nonces a user, at most: Home Assistant signs about one call a second (its pull point),
    /// 300 in 5 minutes.
    public static let limit = 4096
    /// User → nonce → until when (seconds since 1970) it is kept.
    var seen: [String: [String: Double]] = [:]

    public init() {}

    public enum Outcome: Sendable, Equatable {
        case new, replayed, full
    }

    /// Remembers `nonce` of `user` until `until`, if it is new; what it was.
    public mutating func take(_ nonce: String, user: String, until: Double, now: Double) -> Outcome {
        var nonces = seen[user, default: [:]]
        if nonces[nonce].map({ $0 >= now }) == true { return .replayed }
        if nonces.count >= Self.limit { nonces = nonces.filter { $0.value >= now } }
        guard nonces.count < Self.limit else {
            seen[user] = nonces
            return .full
        }
        nonces[nonce] = until
        seen[user] = nonces
        return .new
    }

    /// How many nonces are kept for `user`.
    public func count(_ user: String) -> Int { seen[user]?.count ?? 0 }
}

/// SHA-1 (FIPS 180-4): what WS-Security's PasswordDigest hashes with. Not for anything else.
public enum SHA1 {
    public static func digest(_ message: [UInt8]) -> [UInt8] {
        var h: (UInt32, UInt32, UInt32, UInt32, UInt32) = (
            0x6745_2301, 0xEFCD_AB89, 0x98BA_DCFE, 0x1032_5476, 0xC3D2_E1F0
        )
        var padded = message
        padded.append(0x80)
        while padded.count % 64 != 56 { padded.append(0) }
        let bits = UInt64(message.count) &* 8
        for shift in stride(from: 56, through: 0, by: -8) {
            padded.append(UInt8(truncatingIfNeeded: bits >> UInt64(shift)))
        }
        var w = [UInt32](repeating: 0, count: 80)
        for chunk in stride(from: 0, to: padded.count, by: 64) {
            for i in 0..<16 {
                let at = chunk + i * 4
                w[i] =
                    UInt32(padded[at]) << 24 | UInt32(padded[at + 1]) << 16 | UInt32(padded[at + 2]) << 8
                    | UInt32(padded[at + 3])
            }
            for i in 16..<80 {
                let x = w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16]
                w[i] = x << 1 | x >> 31
            }
            var (a, b, c, d, e) = h
            for i in 0..<80 {
                let f: UInt32
                let k: UInt32
                switch i {
                case 0..<20: (f, k) = ((b & c) | (~b & d), 0x5A82_7999)
                case 20..<40: (f, k) = (b ^ c ^ d, 0x6ED9_EBA1)
                case 40..<60: (f, k) = ((b & c) | (b & d) | (c & d), 0x8F1B_BCDC)
                default: (f, k) = (b ^ c ^ d, 0xCA62_C1D6)
                }
                let t = (a << 5 | a >> 27) &+ f &+ e &+ k &+ w[i]
                e = d
                d = c
                c = b << 30 | b >> 2
                b = a
                a = t
            }
            h = (h.0 &+ a, h.1 &+ b, h.2 &+ c, h.3 &+ d, h.4 &+ e)
        }
        return [h.0, h.1, h.2, h.3, h.4].flatMap { word in
            [
                UInt8(truncatingIfNeeded: word >> 24), UInt8(truncatingIfNeeded: word >> 16),
                UInt8(truncatingIfNeeded: word >> 8), UInt8(truncatingIfNeeded: word),
            ]
        }
    }
}
