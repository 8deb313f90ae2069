import Configuration
import Logging
import POSIX
import Synchronization
import Web

/// The web's rule against guessing passwords, kept for RTSP's Digest sign-in (gst-rtsp-server
/// answers every wrong password at once): failed sign-ins are counted per address
/// (`SignInThrottle`, the web's), and an address that failed too often is hung up on as it
/// connects until its wait is over. A request refused although its password was right (a
/// nonce the server no longer takes) is no failure: the response is checked against the file's
/// hash as the web checks it (`DigestCredentials`).
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

    /// Whether a client from `address` may try now.
    func admits(_ address: String) -> Bool {
        guard let client = NumericAddress.parse(address).flatMap({ ClientAddress(bytes: $0) }) else { return true }
        let now = clock.now().seconds
        return throttle.withLock { $0.wait(for: client, at: now) } == nil
    }

    /// A request from `address` that carried `authorization` was answered (`signedIn`) or refused.
    func answered(_ address: String, signedIn: Bool, authorization: String, method: String) {
        guard let client = NumericAddress.parse(address).flatMap({ ClientAddress(bytes: $0) }) else { return }
        let credentials = DigestCredentials(header: authorization)
        let user = credentials?.parameters["username"]
        if signedIn {
            if let failures = throttle.withLock({ $0.succeeded(client) }) {
                log.info(
                    "an address slowed for failed sign-ins signed in: it is served again",
                    [
                        ("address", .string(client.groupText)), ("user", .string(String((user ?? "").prefix(64)))),
                        ("failures", .int(failures)), ("server", .string("rtsp")),
                    ])
            }
            return
        }
        if let user, let ha1 = passwords.users[user], credentials?.answers(ha1: ha1, method: method) == true { return }
        let now = clock.now().seconds
        guard let slowed = throttle.withLock({ $0.failed(client, at: now) }) else { return }
        log.warning(
            "failed sign-ins from one address: it waits before it may try again — if that is not you, someone is guessing passwords",
            [
                ("address", .string(client.groupText)), ("user", .string(String((user ?? "").prefix(64)))),
                ("tried", .string("password")), ("failures", .int(slowed.failures)),
                ("wait_s", .int(Int(slowed.wait))), ("server", .string("rtsp")),
            ])
    }
}
