import Agent
internal import CGStreamer
import Configuration
import Logging
import POSIX
import Synchronization
import Web

/// Why the RTSP server cannot start.
public struct RTSPServerError: Error, CustomStringConvertible, Sendable {
    public let description: String
}

/// The RTSP server as one of the agent's sinks (`rtsp.enabled`): gst-rtsp-server on a GMainLoop
/// of its own thread serves `rtsp://HOST:PORT/<camera.name>`, each client a media of its own,
/// `appsrc ! rtph264pay`, fed the GOPs the agent encoded for its clips (`RTSPFeeder`, from the
/// live feed: nothing is encoded again). It starts with the agent, keeps the live feed open
/// while it runs, and stops with it (step 5: the sinks finish), ending every client's session.
public final class RTSPSink: EventSink, @unchecked Sendable {
    // `@unchecked Sendable`: the C pointers are set once in `init` and used by `finish`, after
    // the loop's thread has stopped.
    private let feeder = RTSPFeeder()
    private let context: OpaquePointer
    private let loop: OpaquePointer
    private let server: UnsafeMutablePointer<GstRTSPServer>
    private let tick: UnsafeMutablePointer<GSource>
    private let ticker: RTSPTicker
    private var thread: JoinableThread?
    private let finished = Atomic<Bool>(false)
    /// The port it listens on.
    public let port: Int
    /// How many clients are served at once: one more is closed as it connects (each client is a
    /// media of its own, a few threads and up to `RTSPFeeder.queuedBytes` queued).
    public static let clientLimit = 32
    /// The stream's path: `/<camera.name>`.
    public let path: String

    /// Failed sign-ins counted per address (with a password file).
    private let signIn: RTSPSignIn?

    /// Starts the server `settings` describe for the camera named `camera`.
    public init(settings: Settings.RTSP, camera: String, log: Logger) throws(RTSPServerError) {
        var problem: UnsafeMutablePointer<GError>?
        guard gst_init_check(nil, nil, &problem) != 0 else {
            let text = problem.map { String(cString: $0.pointee.message) } ?? "unknown"
            throw RTSPServerError(description: "GStreamer cannot start (\(text)) — is its package installed?")
        }
        path = "/" + camera
        context = g_main_context_new()
        loop = g_main_loop_new(context, 0)
        signIn = settings.realm == nil ? nil : settings.passwords.map { RTSPSignIn(passwords: $0, log: log) }
        var sourceID: UInt32 = 0
        let admit: vigil_rtsp_admit = { context, address in
            guard let context, let address else { return 1 }
            return Unmanaged<RTSPSignIn>.fromOpaque(context).takeUnretainedValue().admits(String(cString: address))
                ? 1 : 0
        }
        let signed: vigil_rtsp_signed = { context, address, signedIn, authorization, method in
            guard let context, let address, let authorization, let method else { return }
            Unmanaged<RTSPSignIn>.fromOpaque(context).takeUnretainedValue().answered(
                String(cString: address), signedIn: signedIn != 0, authorization: String(cString: authorization),
                method: String(cString: method))
        }
        let made: vigil_rtsp_media_made = { context, source in
            guard let context, let source else { return }
            Unmanaged<RTSPFeeder>.fromOpaque(context).takeUnretainedValue().add(source)
        }
        guard
            let server = vigil_rtsp_server_start(
                context, settings.listen, Int32(settings.port), path, RTSPFeeder.queuedBytes, UInt32(Self.clientLimit),
                RTSPTicker.burst, signIn == nil ? nil : admit, signIn == nil ? nil : signed,
                signIn.map { Unmanaged.passUnretained($0).toOpaque() },
                settings.realm == nil ? nil : settings.passwordFile, settings.realm, made,
                Unmanaged.passUnretained(feeder).toOpaque(), &sourceID)
        else {
            g_main_loop_unref(loop)
            g_main_context_unref(context)
            throw RTSPServerError(
                description:
                    "the RTSP server cannot listen on \(settings.listen) port \(settings.port) (taken, or not this machine's address), or cannot read web.password_file — choose another rtsp.port or rtsp.listen, or fix the file"
            )
        }
        self.server = server
        port = Int(vigil_rtsp_server_port(server))
        ticker = RTSPTicker(feeder: feeder, server: server, log: log)
        let tickFunction: GSourceFunc = { context in
            Unmanaged<RTSPTicker>.fromOpaque(context!).takeUnretainedValue().tick()
            return 1
        }
        tick = vigil_rtsp_add_tick(
            context, RTSPFeeder.tickMilliseconds, tickFunction, Unmanaged.passUnretained(ticker).toOpaque())
        let loop = UncheckedPointer(loop)
        thread = startThread("rtsp") { g_main_loop_run(loop.value) }
        log.info(
            "rtsp server listening",
            [
                ("address", .string(HTTPEndpoint.text(settings.listen, port))),
                ("url", .string("rtsp://\(HTTPEndpoint.text(settings.listen, port))\(path)")),
                ("sign_in", .string(settings.realm == nil ? "none: this machine only" : "web.password_file (Digest)")),
            ])
    }

    /// The agent's run begins: the live feed is kept, and clients are fed from it.
    public func start(_ context: SinkContext) {
        context.live.open()
        feeder.attach(context.live)
    }

    public func handle(_ event: AgentEvent) {}

    /// Ends every client's session and stops the server's loop and thread.
    public func finish() {
        guard !finished.exchange(true, ordering: .acquiringAndReleasing) else { return }
        vigil_rtsp_close_clients(server)
        g_source_destroy(tick)
        g_source_unref(tick)
        g_main_loop_quit(loop)
        _ = thread?.join(timeout: 1)
        feeder.removeAll()
    }
}

/// What the server's loop does every `RTSPFeeder.tickMilliseconds`: feeds the clients, and
/// every `policingTicks` looks at what each has sent (`vigil_rtsp_police`): a client that sends
/// more than a player asks (requests without end: gst-rtsp-server keeps every header line of
/// a request until it ends), or holds a place for `grace` without a session, is hung up on.
private final class RTSPTicker: @unchecked Sendable {
    // `@unchecked Sendable`: used on the loop's thread alone.
    let feeder: RTSPFeeder
    let server: UnsafeMutablePointer<GstRTSPServer>
    let log: Logger
    var ticks = 0
    /// Bytes a client may send at once, and a second after that.
    static let burst = 64 * 1024
    static let rate = 4 * 1024
    /// How long a client may stay connected without a session (DESCRIBE and SETUP take a
    /// player milliseconds).
    static let grace = 10_000_000
    static let policingTicks = 5

    init(feeder: RTSPFeeder, server: UnsafeMutablePointer<GstRTSPServer>, log: Logger) {
        self.feeder = feeder
        self.server = server
        self.log = log
    }

    func tick() {
        feeder.tick()
        ticks += 1
        guard ticks % Self.policingTicks == 0 else { return }
        var sentTooMuch: UInt32 = 0
        var idle: UInt32 = 0
        vigil_rtsp_police(server, Self.burst, Self.rate, Self.grace, &sentTooMuch, &idle)
        if sentTooMuch > 0 {
            log.warning(
                "rtsp client hung up: it sent more than a client asks",
                [("clients", .int(Int(sentTooMuch))), ("most_bytes", .int(Self.burst))])
        }
        if idle > 0 {
            log.info(
                "rtsp client hung up: connected without asking for the stream",
                [("clients", .int(Int(idle))), ("after_s", .int(Int(Self.grace / 1_000_000)))])
        }
    }
}

/// A C pointer handed to the loop's thread, which alone uses it.
private struct UncheckedPointer: @unchecked Sendable {
    let value: OpaquePointer
    init(_ value: OpaquePointer) { self.value = value }
}

/// `HOST:PORT`, with an IPv6 address in brackets.
enum HTTPEndpoint {
    static func text(_ address: String, _ port: Int) -> String {
        address.contains(":") ? "[\(address)]:\(port)" : "\(address):\(port)"
    }
}
