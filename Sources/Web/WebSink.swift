import Agent
import Configuration
import Logging
import ONVIF
import Recorder
import Synchronization

/// The web server as one of the agent's sinks: it starts with the agent (`web.enabled`),
/// serves `WebSite` on its own threads (the pages that read the journal on its work threads:
/// `WebSite.needsWork`), follows the agent's events, and stops with it. A server
/// that cannot start (the port taken) is said, and the agent records without it.
public final class WebSink: EventSink {
    let server: HTTPServer
    /// What the server serves, made when the agent's run starts (`start`): until then (the
    /// moment between the server's start and the agent's) a request is answered 503.
    let served: Served
    let makeSite: @Sendable (SinkContext) -> WebSite

    final class Served: Sendable {
        let site = Mutex<WebSite?>(nil)
    }

    /// Starts the server `settings` describe for the agent whose clips `storage` holds; with
    /// `onvif`, it answers ONVIF's device and media services for that camera too.
    public init(
        settings: Settings.Web, camera: String, version: String, storage: any ClipStorage, onvif: ONVIFDevice? = nil,
        onvifPasswords: ONVIFPasswords? = nil, log: Logger
    ) throws(HTTPServerError) {
        let signIn = settings.passwords != nil
        let served = Served()
        server = try HTTPServer(
            address: settings.listen, port: settings.port, passwords: settings.passwords, tls: settings.tls,
            names: settings.urlHost.map { [$0] } ?? [], metricsToken: settings.metricsToken, log: log,
            signInInBody: onvif == nil ? [] : ONVIFEndpoint.paths, needsWork: WebSite.needsWork
        ) {
            served.site.withLock { $0 }?.respond($0) ?? WebSink.starting
        }
        let listening = HTTPServer.endpoint(settings.listen, server.port)
        let endpoint = onvif.map {
            ONVIFEndpoint(
                device: $0, passwords: settings.passwords, clear: onvifPasswords, listening: listening)
        }
        makeSite = { context in
            WebSite(
                camera: camera, version: version, storage: storage, context: context, signIn: signIn,
                onvif: endpoint, log: log)
        }
        self.served = served
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

    /// The agent's run begins: the site is served with what it shares, and the live feed kept.
    public func start(_ context: SinkContext) {
        let site = makeSite(context)
        context.live.open()
        served.site.withLock { $0 = site }
    }

    /// What it serves, once the run started.
    var site: WebSite? { served.site.withLock { $0 } }

    public func handle(_ event: AgentEvent) { site?.take(event) }

    /// Ends the live streams and stops the server: within a second and a few milliseconds,
    /// however many clients are slow or stalled (viewers that read get the end of their stream).
    public func finish() {
        site?.context.live.close()
        server.stop()
    }

    /// The answer before the agent's run starts.
    static let starting: HTTPResponse = {
        var response = HTTPResponse.error(503, "The agent is starting: ask again in a moment.")
        response.headers.append(("Retry-After", "1"))
        return response
    }()
}
