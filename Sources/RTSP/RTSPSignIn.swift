import Configuration
import Logging
import Media
import POSIX
import Synchronization
import Web

/// RTSP's Digest sign-in (RFC 2617, MD5) with the users of `web.password_file`, under the
/// web's rule against guessing passwords: failed sign-ins are counted per address
/// (`SignInThrottle`, the web's), and an address that failed too often is hung up on as it
/// connects, and refused unheard on a connection it holds, until its wait is over.
final class RTSPSignIn: Sendable {
    let passwords: WebPasswords
    let log: Logger
    let clock: Clock
    private let throttle = Mutex(SignInThrottle())

    init(passwords: WebPasswords, log: Logger, clock: Clock = .monotonic) {
        self.passwords = passwords
        self.log = log
        self.clock = clock
    }

    /// Whether a client from `address` (4 or 16 bytes) may try now.
    func admits(_ address: [UInt8]) -> Bool {
        guard let client = ClientAddress(bytes: address) else { return true }
        let now = clock.now().seconds
        return throttle.withLock { $0.wait(for: client, at: now) } == nil
    }

    /// Whether `credentials` sign a request for `method` in: a user of the file, `realm`, the
    /// connection's `nonce`, and the response its password makes. A wrong password (or user)
    /// counts against `address`; a right one with a nonce the server no longer takes does not.
    func check(_ credentials: DigestCredentials, realm: String, nonce: String, method: String, address: [UInt8]) -> Bool
    {
        guard let client = ClientAddress(bytes: address) else { return false }
        let now = clock.now().seconds
        guard throttle.withLock({ $0.wait(for: client, at: now) }) == nil else { return false }
        let user = credentials.parameters["username"] ?? ""
        let right =
            credentials.parameters["realm"] == realm
            && passwords.users[user].map { credentials.answers(ha1: $0, method: method) } == true
        if right {
            guard credentials.parameters["nonce"] == nonce else { return false }
            if let failures = throttle.withLock({ $0.succeeded(client) }) {
                log.info(
                    "an address slowed for failed sign-ins signed in: it is served again",
                    [
                        ("address", .string(client.groupText)), ("user", .string(String(user.prefix(64)))),
                        ("failures", .int(failures)), ("server", .string("rtsp")),
                    ])
            }
            return true
        }
        guard let slowed = throttle.withLock({ $0.failed(client, at: now) }) else { return false }
        log.warning(
            "failed sign-ins from one address: it waits before it may try again — if that is not you, someone is guessing passwords",
            [
                ("address", .string(client.groupText)), ("user", .string(String(user.prefix(64)))),
                ("tried", .string("password")), ("failures", .int(slowed.failures)),
                ("wait_s", .int(Int(slowed.wait))), ("server", .string("rtsp")),
            ])
        return false
    }
}
