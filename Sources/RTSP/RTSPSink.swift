import Agent
internal import CGStreamer
import Configuration
import Logging
import POSIX
import Synchronization

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
    private var thread: JoinableThread?
    private let finished = Atomic<Bool>(false)
    /// The port it listens on.
    public let port: Int
    /// How many clients are served at once: one more is closed as it connects (each client is a
    /// media of its own, a few threads and up to `RTSPFeeder.queuedBytes` queued).
    public static let clientLimit = 32
    /// The stream's path: `/<camera.name>`.
    public let path: String

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
        var sourceID: UInt32 = 0
        let made: vigil_rtsp_media_made = { context, source in
            guard let context, let source else { return }
            Unmanaged<RTSPFeeder>.fromOpaque(context).takeUnretainedValue().add(source)
        }
        guard
            let server = vigil_rtsp_server_start(
                context, settings.listen, Int32(settings.port), path, RTSPFeeder.queuedBytes, UInt32(Self.clientLimit),
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
        let tickFunction: GSourceFunc = { context in
            Unmanaged<RTSPFeeder>.fromOpaque(context!).takeUnretainedValue().tick()
            return 1
        }
        tick = vigil_rtsp_add_tick(
            context, RTSPFeeder.tickMilliseconds, tickFunction, Unmanaged.passUnretained(feeder).toOpaque())
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
