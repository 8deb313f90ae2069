import Agent
import Configuration
import Logging
import Recorder

/// The web server as one of the agent's sinks: it starts with the agent (`web.enabled`),
/// serves `WebSite` on its own thread, follows the agent's events, and stops with it. A server
/// that cannot start (the port taken) is said, and the agent records without it.
public final class WebSink: EventSink {
    let server: HTTPServer
    let site: WebSite

    /// Starts the server `settings` describe for the agent whose clips `storage` holds.
    public init(
        settings: Settings.Web, camera: String, version: String, storage: any ClipStorage, control: AgentControl,
        log: Logger
    ) throws(HTTPServerError) {
        let site = WebSite(
            camera: camera, version: version, storage: storage, control: control, signIn: settings.passwords != nil,
            log: log)
        control.live.open()
        server = try HTTPServer(
            address: settings.listen, port: settings.port, passwords: settings.passwords, tls: settings.tls,
            names: settings.urlHost.map { [$0] } ?? [], metricsToken: settings.metricsToken, log: log
        ) {
            site.respond($0)
        }
        self.site = site
        if let openFiles = server.openFileLimit {
            log.warning(
                "web server takes fewer connections: the agent may not open enough files — raise its limit (LimitNOFILE= in a drop-in: systemctl edit vigil), then restart",
                [
                    ("open_files", .integer(Int64(openFiles))),
                    ("needs", .integer(Int64(HTTPServer.Limits().descriptors))),
                    ("connections", .integer(Int64(server.limits.connections))),
                    ("asked", .integer(Int64(HTTPServer.Limits().connections))),
                    ("live_viewers", .integer(Int64(server.limits.streams))),
                ])
        }
        log.info(
            "web server listening",
            [
                ("address", .string(HTTPServer.endpoint(settings.listen, server.port))),
                ("url", .string("\(settings.scheme)://\(HTTPServer.endpoint(settings.listen, server.port))/")),
                (
                    "sign_in",
                    .string(settings.passwords.map { "\($0.users.count) user(s)" } ?? "none: this machine only")
                ),
            ])
    }

    /// The port it listens on.
    public var port: Int { server.port }

    public func handle(_ event: AgentEvent) { site.take(event) }

    /// Ends the live streams and stops the server: within a second and a few milliseconds,
    /// however many clients are slow or stalled (viewers that read get the end of their stream).
    public func finish() {
        site.control.live.close()
        server.stop()
    }
}
