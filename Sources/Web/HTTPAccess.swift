internal import CMicroHTTPD
import Configuration
import Logging
import Media
import POSIX

// Who may reach the server, decided when a request's headers are in, before its body is read
// and before the handler sees it, on the server's polling thread (nothing here waits):
// 1. its `Host` must be one of this machine's names or an address (`HostCheck`: a page of
//    another site reaching the server through a name of its own gets 421);
// 2. with passwords, an address that failed to sign in too often waits (`SignInThrottle`: 429
//    with Retry-After, whatever it sends, the right password too);
// 3. `Authorization: Bearer TOKEN` with the metrics token reads `/metrics`, and nothing else;
// 4. else HTTP Digest, checked by the library; a stale nonce is said stale whoever it names
//    (an unknown user is checked against a random hash), so the answer says nothing of who
//    exists.

/// What becomes of a request whose headers are in.
enum Admission {
    /// It is served; `user` signed in (nil without passwords, or for the metrics token).
    case admitted(user: String?)
    /// It was answered (421, 429, 403 or the 401 that asks to sign in), queued.
    case refused(MHD_Result)
    /// It goes to the handler without `Authorization`, to a path whose sign-in may be in its
    /// body (ONVIF's WS-Security), which decides (`settle`).
    case signInInBody
}

/// Whether the request on `connection` for `path` with `method` is served.
func admit(_ connection: OpaquePointer?, path: String, method: String, server: Context) -> Admission {
    guard server.hosts.allows(header(connection, "Host")) else {
        return .refused(queue(.error(421, server.hosts.refusal), on: connection, server: server))
    }
    guard let passwords = server.passwords else { return .admitted(user: nil) }
    let client = clientAddress(connection)
    let now = server.clock.now().seconds
    if let client, let wait = server.throttle.withLock({ $0.wait(for: client, at: now) }) {
        let seconds = max(1, Int(wait.rounded(.up)))
        var refused = HTTPResponse.error(
            429, "Too many failed sign-ins from this address: wait \(seconds) s, then try again.")
        refused.headers.append(("Retry-After", "\(seconds)"))
        return .refused(queue(refused, on: connection, server: server))
    }
    let authorization = header(connection, "Authorization")
    if authorization == nil, server.signInInBody.contains(path) { return .signInInBody }
    if let token = server.metricsToken, let given = authorization.flatMap(bearerToken) {
        guard sameSecret(given, token) else {
            failed(client, tried: "metrics token", user: nil, at: now, server: server)
            return .refused(challenge(connection, passwords, stale: false, server: server))
        }
        // A right token does not end the address's failures: it would let one who holds it
        // guess passwords without end.
        guard path == "/metrics", method == "GET" || method == "HEAD" else {
            return .refused(
                queue(
                    .error(
                        403, "The metrics token reads /metrics only: sign in with a user and password for the rest."),
                    on: connection, server: server))
        }
        return .admitted(user: nil)
    }
    guard let name = MHD_digest_auth_get_username(connection) else {
        return .refused(challenge(connection, passwords, stale: false, server: server))
    }
    let user = String(cString: name)
    MHD_free(name)
    let known = passwords.users[user]
    let ha1 = known ?? server.unknownUserHash
    let checked = ha1.withUnsafeBufferPointer {
        MHD_digest_auth_check_digest2(
            connection, passwords.realm, user, $0.baseAddress, $0.count, 300, vigil_mhd_digest_md5)
    }
    if checked == MHD_Result.YES.rawValue, known != nil {
        if let client, let failures = server.throttle.withLock({ $0.succeeded(client) }) {
            server.log?.info(
                "an address slowed for failed sign-ins signed in: it is served again",
                [("address", .string(client.groupText)), ("user", .string(user)), ("failures", .int(failures))])
        }
        return .admitted(user: user)
    }
    // A nonce that is not the server's, or too old: the response was not looked at.
    if checked == MHD_INVALID_NONCE { return .refused(challenge(connection, passwords, stale: true, server: server)) }
    // Refused: a wrong password, or the right one the library refused for another reason (a
    // nonce counter seen before, a nonce pushed out of its table, another URI), which is no
    // failed sign-in.
    let right =
        known != nil
        && authorization.flatMap(DigestCredentials.init(header:))?.answers(ha1: ha1, method: method) == true
    if !right { failed(client, tried: "password", user: user, at: now, server: server) }
    return .refused(challenge(connection, passwords, stale: false, server: server))
}

/// Sends the handler's answer to a request whose sign-in was in its body (`signInInBody`): a
/// refusal as the 401 that asks for Digest, with the handler's body (a SOAP fault, which
/// WS-Security clients read), a wrong password counted toward the throttle as the web's own.
func settle(_ response: HTTPResponse, on connection: OpaquePointer?, server: Context) -> MHD_Result {
    let client = clientAddress(connection)
    switch response.signIn {
    case .refused(let failedUser)?:
        if let failedUser {
            failed(
                client, tried: "ws-security password", user: failedUser, at: server.clock.now().seconds, server: server)
        }
        guard let passwords = server.passwords else { break }
        return challenge(connection, passwords, stale: false, server: server, answer: response)
    case .succeeded?:
        if let client, let failures = server.throttle.withLock({ $0.succeeded(client) }) {
            server.log?.info(
                "an address slowed for failed sign-ins signed in: it is served again",
                [("address", .string(client.groupText)), ("failures", .int(failures))])
        }
    case nil: break
    }
    return queue(response, on: connection, server: server)
}

/// Counts a failed sign-in from `client`, and says it once when the address starts to wait.
private func failed(_ client: ClientAddress?, tried: String, user: String?, at now: Double, server: Context) {
    guard let client, let slowed = server.throttle.withLock({ $0.failed(client, at: now) }) else { return }
    var data: [(String, LogValue)] = [("address", .string(client.groupText))]
    if let user { data.append(("user", .string(String(user.prefix(64))))) }
    data += [("tried", .string(tried)), ("failures", .int(slowed.failures)), ("wait_s", .int(Int(slowed.wait)))]
    server.log?.warning(
        "failed sign-ins from one address: it waits before it may try again — if that is not you, someone is guessing passwords",
        data)
}

/// The 401 that asks for a user and password (HTTP Digest, MD5), queued; `stale`: the nonce
/// sent was not (or no longer) the server's, and the browser asks again without asking the
/// person.
private func challenge(
    _ connection: OpaquePointer?, _ passwords: WebPasswords, stale: Bool, server: Context,
    answer: HTTPResponse? = nil
)
    -> MHD_Result
{
    var text = Array("Sign in to see this camera: a user and password made with `vigil passwd`.\n".utf8)
    var headers = HTTPResponse.error(401, "").headers
    if let answer, case .bytes(let bytes) = answer.body {
        text = bytes
        headers = answer.headers
    }
    guard
        let response = text.withUnsafeBytes({
            MHD_create_response_from_buffer(
                text.count, UnsafeMutableRawPointer(mutating: $0.baseAddress), MHD_ResponseMemoryMode.RESPMEM_MUST_COPY)
        })
    else { return MHD_Result.NO }
    defer { MHD_destroy_response(response) }
    for (name, value) in headers + commonHeaders {
        _ = MHD_add_response_header(response, name, value)
    }
    let queued = MHD_queue_auth_fail_response2(
        connection, passwords.realm, server.opaque, response, stale ? 1 : 0, vigil_mhd_digest_md5)
    // libmicrohttpd 0.9.75 (Debian bookworm's) writes the algorithm as "md5"; FFmpeg (and so
    // Home Assistant's stream, VLC's HTTP access) answers only a challenge that says "MD5", the
    // way RFC 7616 spells it, and sends no sign-in at all otherwise. The challenge is on this
    // response, not yet sent (that happens after this handler returns, on this thread): it is
    // put right here. Newer libraries write "MD5" already.
    if queued == MHD_Result.YES, let given = MHD_get_response_header(response, "WWW-Authenticate") {
        let header = String(cString: given)
        let fixed = header.replacing("algorithm=md5", with: "algorithm=MD5")
        if fixed != header, MHD_del_response_header(response, "WWW-Authenticate", header) == MHD_Result.YES {
            _ = MHD_add_response_header(response, "WWW-Authenticate", fixed)
        }
    }
    return queued
}

/// What every response says, whatever made it: no browser takes a text page (an error that
/// repeats what was asked) for a script or a page of its own.
let commonHeaders: [(name: String, value: String)] = [("X-Content-Type-Options", "nosniff")]

/// The request header `name` (any case), as the library keeps it.
private func header(_ connection: OpaquePointer?, _ name: String) -> String? {
    MHD_lookup_connection_value(connection, MHD_ValueKind.HEADER_KIND, name).map { String(cString: $0) }
}

/// The address the request came from.
func clientAddress(_ connection: OpaquePointer?) -> ClientAddress? {
    guard let connection, let address = vigil_mhd_client_address(connection) else { return nil }
    return NumericAddress.bytes(ofSocketAddress: UnsafeRawPointer(address)).flatMap { ClientAddress(bytes: $0) }
}

/// The token of `Authorization: Bearer TOKEN`; nil for another scheme.
private func bearerToken(_ authorization: String) -> String? {
    let text = authorization.drop { $0 == " " }
    guard text.prefix(7).lowercased() == "bearer " else { return nil }
    let token = text.dropFirst(7).drop { $0 == " " }
    return token.isEmpty ? nil : String(token.prefix { $0 != " " })
}

/// Whether `given` is the token whose MD5 is `digest`, in a time that does not depend on how
/// much of it is right (both are made 16 bytes first, so not on its length either).
private func sameSecret(_ given: String, _ digest: [UInt8]) -> Bool {
    let sent = MD5.digest(Array(given.utf8))
    var difference: UInt8 = 0
    for (a, b) in zip(sent, digest) { difference |= a ^ b }
    return difference == 0 && sent.count == digest.count
}
