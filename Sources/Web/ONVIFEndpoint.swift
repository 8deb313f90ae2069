import Agent
import Configuration
import Media
import ONVIF
import POSIX
import QuickTime
import Synchronization

/// ONVIF's device, media and events services (`/onvif/device_service`, `/onvif/media_service`,
/// `/onvif/events_service` and its pull points, `/onvif/pullpoint`) on the web server, so its
/// rules hold for them (the Host check, the sign-in throttle, the connection
/// limits). SOAP 1.2 POSTs, answered on the polling thread from memory: the camera as
/// `ONVIFDevice` describes it, its size from the live feed (the settings' until the first GOP).
///
/// Who may call: without passwords, anyone who reaches the server (this machine only). With
/// them, the PRE_AUTH operations (the clock, the services) anyone, the rest a user of the
/// password file: signed in with HTTP Digest (the server checked it), or with a WS-Security
/// UsernameToken whose password is text (hashed as the file's are, and compared, or compared
/// with `onvif.password_file`'s). A PasswordDigest hashes the password itself: checked against
/// `onvif.password_file` (each nonce taken once), refused with why and the fix without it.
public struct ONVIFEndpoint: Sendable {
    /// The camera, with the settings' size (the live feed's replaces it once there is one).
    let device: ONVIFDevice
    let passwords: WebPasswords?
    /// `onvif.password_file`'s users (the passwords themselves), which check a PasswordDigest.
    let clear: ONVIFPasswords?
    /// The nonces of the PasswordDigests taken lately (a replay is refused).
    let nonces = Nonces()
    /// Where the server listens (`address:port`): the authority of a request without `Host`.
    let listening: String
    /// Seconds since 1970, UTC: the clock GetSystemDateAndTime says and a token is checked on.
    let wallClock: @Sendable () -> Double

    /// The events service's pull point subscriptions (motion).
    let subscriptions = ONVIFSubscriptions()

    /// The paths it answers, whose sign-in may be in the body.
    public static let paths = ONVIFService.paths

    public init(
        device: ONVIFDevice, passwords: WebPasswords?, clear: ONVIFPasswords? = nil, listening: String,
        wallClock: @escaping @Sendable () -> Double = {
            let now = WallClock.now()
            return Double(now.seconds) + Double(now.nanoseconds) / 1e9
        }
    ) {
        self.device = device
        self.passwords = passwords
        self.clear = clear
        self.listening = listening
        self.wallClock = wallClock
    }

    /// The answer to `request` for `service`, with the stream as `live` has it.
    func respond(_ request: HTTPRequest, service: ONVIFService, live: [LiveFeed.Item]) -> HTTPResponse {
        guard request.method == "POST" else {
            return .methodNotAllowed("ONVIF's services take SOAP 1.2 requests, POSTed.", allowed: "POST")
        }
        var limits = XMLReader.Limits()
        limits.bytes = HTTPServer.Limits().bodyBytes
        let soap: SOAPRequest
        switch SOAPRequest.parse(request.body, limits: limits) {
        case .success(let parsed): soap = parsed
        case .failure(let problem):
            // A client that signs in with HTTP Digest first sends its POST without a body, to be
            // asked (curl does): one that has not signed in is asked, whatever it sent.
            if request.signInPending { return Self.refused(Self.signInFirst, failed: nil) }
            return Self.response(.badRequest(problem))
        }
        let now = wallClock()
        var signIn: HTTPResponse.SignIn?
        if let passwords, request.user == nil, !ONVIFDevice.preAuthentication(soap) {
            let checked = soap.usernameToken.map { token in
                nonces.memory.withLock {
                    token.check(
                        users: passwords.users, realm: passwords.realm, clear: clear?.users, nonces: &$0, now: now)
                }
            }
            switch checked {
            case .signedIn?: signIn = .succeeded
            case nil: return Self.refused(Self.signInFirst, failed: nil)
            case .wrongPassword(let user)?:
                return Self.refused("The user name or password is wrong.", failed: user)
            case .stale?:
                return Self.refused(
                    "The UsernameToken's Created time is more than 5 minutes from this camera's clock (UTC \(ISO8601.text(now))): a replay, or a clock to set right (GetSystemDateAndTime needs no sign-in).",
                    failed: nil)
            case .replayed?:
                return Self.refused(
                    "The UsernameToken's Nonce was taken before, or it has no Nonce or Created: a replay. Send a new Nonce and the time with each request.",
                    failed: nil)
            case .digestCannotBeChecked?:
                return Self.refused(
                    "This camera has no onvif.password_file, and its web.password_file keeps only Digest hashes, never a password, so it cannot check a WS-Security PasswordDigest: on the camera set onvif.password_file and run sudo vigil passwd --onvif USER, then restart it; or sign in with HTTP Digest, or send the password as PasswordText (over HTTPS).",
                    failed: nil)
            }
        }
        let authority = request.header("host").flatMap { HostCheck.hostPart($0) != nil ? $0.trimmingSpaces : nil }
        let reached = authority ?? listening
        let host = HostCheck.hostPart(reached) ?? reached
        let reply: SOAPReply
        switch (service, soap.operation.namespace, soap.operation.name) {
        case (.events, ONVIFEvents.namespace, "GetServiceCapabilities"): reply = ONVIFEvents.capabilitiesReply()
        case (.events, ONVIFEvents.namespace, "CreatePullPointSubscription"):
            let termination = ONVIFEvents.termination(
                soap.operation.child("InitialTerminationTime")?.text, now: now)
            let id = subscriptions.create(termination: termination, now: now)
            reply = ONVIFEvents.created(
                address: device.pullPoint(reached, id: id), now: now, termination: termination)
        case (.events, _, _): reply = .actionNotSupported(soap.operation.name)
        case (.pullpoint, _, _):
            reply = subscriptions.answer(
                soap.operation, id: request.query["subscription"].flatMap { Int($0) }, now: now)
        default: reply = described(live).answer(soap, service: service, authority: reached, host: host, now: now)
        }
        var response = Self.response(reply)
        response.signIn = signIn
        return response
    }

    /// The device with the stream as the live feed has it: its size and H.264 profile, its
    /// keyframe interval in frames.
    func described(_ live: [LiveFeed.Item]) -> ONVIFDevice {
        var described = device
        guard let newest = live.last else { return described }
        described.video.width = newest.movie.video.width
        described.video.height = newest.movie.video.height
        described.video.keyframeInterval = max(1, newest.gop.samples.count)
        let sps = newest.movie.video.sequenceParameterSet
        // profile_idc, after the NAL header byte.
        if sps.count > 1 {
            switch sps[1] {
            case 66: described.video.profile = "Baseline"
            case 77: described.video.profile = "Main"
            case 88: described.video.profile = "Extended"
            default: described.video.profile = "High"
            }
        }
        return described
    }

    /// The nonces of the PasswordDigests taken lately, shared by the server's threads.
    final class Nonces: Sendable {
        let memory = Mutex(NonceMemory())
    }

    static let signInFirst =
        "Sign in: this camera's ONVIF services need a user of its password file (HTTP Digest, or a WS-Security UsernameToken)."

    static func response(_ reply: SOAPReply) -> HTTPResponse {
        .text(reply.status, reply.body, type: SOAPReply.contentType, headers: [("Cache-Control", "no-store")])
    }

    /// A refusal (sent as a 401 that asks for Digest, with this fault as its body);
    /// `failed`: the user whose wrong password counts as a failed sign-in.
    static func refused(_ reason: String, failed: String?) -> HTTPResponse {
        var response = response(.notAuthorized(reason))
        response.signIn = .refused(failedUser: failed)
        return response
    }
}
