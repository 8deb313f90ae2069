import Agent
import Configuration
import Logging
import POSIX
import Synchronization
import Web

/// Why the RTSP server cannot start.
public struct RTSPServerError: Error, CustomStringConvertible, Sendable {
    public let description: String
}

/// The RTSP server as one of the agent's sinks (`rtsp.enabled`): `RTSPServer` on the `rtsp`
/// thread serves `rtsp://HOST:PORT/<camera.name>` from the frames the agent encoded for its
/// clips (the live feed: nothing is encoded again). It starts with the agent, keeps the live
/// feed open while it runs, and stops with it (step 5: the sinks finish), ending every
/// client's stream.
public final class RTSPSink: EventSink, Sendable {
    private let server: RTSPServer
    private let thread = Mutex<JoinableThread?>(nil)
    private let finished = Atomic<Bool>(false)
    /// The port it listens on.
    public var port: Int { server.port }
    /// How many clients are served at once.
    public static let clientLimit = RTSPServer.clientLimit
    /// The stream's path: `/<camera.name>`.
    public var path: String { server.path }
    private let sound: Bool
    private let log: Logger

    /// Starts the server `settings` describe for the camera named `camera`; `sound`: with the
    /// microphone's sound (`audio.enabled`) as a second media.
    public init(settings: Settings.RTSP, camera: String, sound: Bool = false, log: Logger) throws(RTSPServerError) {
        self.sound = sound
        self.log = log
        let signIn = settings.realm == nil ? nil : settings.passwords.map { RTSPSignIn(passwords: $0, log: log) }
        server = try RTSPServer(
            listen: settings.listen, port: settings.port, camera: camera, soundEnabled: sound, signIn: signIn,
            realm: signIn == nil ? nil : settings.realm, log: log)
        let server = server
        thread.withLock { $0 = startThread("rtsp") { server.run() } }
        log.info(
            "rtsp server listening",
            [
                ("address", .string(TCPListener.endpoint(settings.listen, server.port))),
                ("url", .string("rtsp://\(TCPListener.endpoint(settings.listen, server.port))\(server.path)")),
                ("sign_in", .string(signIn == nil ? "none: this machine only" : "web.password_file (Digest)")),
            ])
    }

    /// The agent's run begins: the live feed is kept, and clients are served from it.
    public func start(_ context: SinkContext) {
        context.live.open()
        server.attach(context.live, sound: sound ? LiveSound(feed: context.live, log: log) : nil)
    }

    public func handle(_ event: AgentEvent) {}

    /// Ends every client's stream and stops the server's thread.
    public func finish() {
        guard !finished.exchange(true, ordering: .acquiringAndReleasing) else { return }
        server.stop()
        _ = thread.withLock { $0.take() }?.join(timeout: 2)
    }
}
