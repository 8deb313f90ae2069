import Agent
import FoundationEssentials
import Logging
import Media
import ONVIF
import Recorder
import Synchronization

/// What the web server serves: the page of clips and the clip viewer, `/api/clips`, the clips
/// and their pictures, `latest.jpg` and `/metrics`. It answers from the clip catalogue (its own
/// connection), the storage directory and what the agent's run shares with its sinks
/// (`SinkContext`: the live feed, the counters, the uploads; requests go to its `requests`):
/// nothing here waits on the agent. What asks the catalogue is built on the server's work
/// threads (`needsWork`), the rest on its polling thread.
public final class WebSite: Sendable {
    let camera: String
    let version: String
    let files: StorageFiles
    let storage: any ClipStorage
    /// The web server's own connection to the clip catalogue, opened at the first ask.
    let catalogue = Mutex<(any ClipCatalogue)?>(nil)
    /// What the agent's run shares with its sinks.
    let context: SinkContext
    /// Whether a motion event is open, as the sink last heard (the agent keeps no counter of it:
    /// recording and detection are read from the agent itself).
    let motion = Atomic<Bool>(false)
    /// How many live streams (`/live.mp4`, the page's `/live/edge.mp4`) are being sent.
    let viewers = Atomic<Int>(0)
    /// HLS's players: when each (its address and `User-Agent`) last asked for the playlist.
    let hlsPlayers = Mutex<[HLSPlayer: ContinuousClock.Instant]>([:])
    /// How long a player that asked for the playlist counts as watching: three target
    /// durations (a player asks again every target duration at least, RFC 8216 §6.3.4).
    let hlsWatching = Mutex<Duration>(.seconds(3))

    struct HLSPlayer: Hashable {
        var address: [UInt8]
        var agent: String
    }
    /// Whether every request signs in (the server has passwords): only then may clips be
    /// deleted.
    let signIn: Bool
    /// The live stream's sound, encoded for viewers.
    let sound: LiveSound
    /// ONVIF's services, with `onvif.enabled`.
    let onvif: ONVIFEndpoint?

    public init(
        camera: String, version: String, storage: any ClipStorage, context: SinkContext, signIn: Bool = false,
        onvif: ONVIFEndpoint? = nil, log: Logger? = nil
    ) {
        self.onvif = onvif
        sound = LiveSound(feed: context.live, log: log)
        self.camera = camera
        self.version = version
        self.signIn = signIn
        self.storage = storage
        self.context = context
        files = StorageFiles(root: storage.root)
    }

    /// Takes what concerns the pages from the agent's events.
    func take(_ event: AgentEvent) {
        switch event {
        case .motionStarted:
            motion.store(true, ordering: .relaxed)
            if let onvif { onvif.subscriptions.motion(true, at: onvif.wallClock()) }
        case .motionEnded:
            motion.store(false, ordering: .relaxed)
            if let onvif { onvif.subscriptions.motion(false, at: onvif.wallClock()) }
        default: break
        }
    }

    /// Whether the answer to `request` needs work beyond memory, and so is built on one of the
    /// server's work threads rather than its polling thread (which every other client, the live
    /// viewers too, waits on), decided by the address alone:
    /// - the page (`/`), the clip viewer (`/clip`), what the page's script polls (`/api/now`),
    ///   `/api/clips`, the delete question (`/delete`) and `POST /api/clips/delete` ask the clip
    ///   catalogue (a database on an SD card), and the page opens each picture it lists for its
    ///   version: work; so is a thumbnail (`/thumbs/…`: a picture decoded and encoded again);
    /// - everything else answers from memory or opens one file: `/metrics` (the counters),
    ///   the live stream and HLS's pieces (the feed), `POST /api/trigger` (a request to the
    ///   agent), the clips, their pictures and `latest.jpg` (opened, then sent with sendfile by
    ///   the polling thread as the client takes them).
    public static func needsWork(_ request: HTTPRequest) -> Bool {
        switch request.path {
        case "/", "/index.html", "/clip", "/api/now", "/api/clips", "/delete", "/api/clips/delete": true
        default: request.path.hasPrefix("/thumbs/")
        }
    }

    /// The answer to `request`, built on the calling thread.
    public func respond(_ request: HTTPRequest) -> HTTPResponse {
        if request.path == "/api/trigger" { return trigger(request) }
        if request.path == "/api/clips/delete" { return deleteClip(request) }
        if request.path == "/api/detection" { return detection(request) }
        if let onvif, let service = ONVIFService(path: request.path) {
            return onvif.respond(request, service: service, live: context.live.items)
        }
        guard request.method == "GET" || request.method == "HEAD" else {
            return .methodNotAllowed("Only GET and HEAD are served here.", allowed: "GET, HEAD")
        }
        switch request.path {
        case "/", "/index.html":
            let query: PageQuery
            switch PageQuery.parse(request.query) {
            case .success(let asked): query = asked
            case .failure(let problem): return .error(400, problem.description)
            }
            do throws(CatalogueError) {
                return .text(200, try page(query), type: "text/html; charset=utf-8", headers: Self.pageHeaders)
            } catch {
                forgetCatalogue()
                return .error(
                    503, "The clip catalogue cannot be read now (\(error.description)); try again in a moment.")
            }
        case "/clip":
            return viewer(request)
        case "/api/now":
            return now()
        case "/app.js":
            return .text(
                200, PageAssets.script, type: "text/javascript; charset=utf-8", headers: [("Cache-Control", "no-cache")]
            )
        case "/favicon.svg", "/favicon.ico":
            return .text(200, PageAssets.favicon, type: "image/svg+xml", headers: [("Cache-Control", "max-age=86400")])
        case "/delete":
            return deletePage(request)
        case "/api/clips":
            return clipsAPI(request)
        case "/metrics":
            return .text(200, metrics(), type: "text/plain; version=0.0.4; charset=utf-8")
        case "/latest.jpg":
            return file(ClipNaming.latestPicture, request: request, cache: "no-store")
        case "/live.mp4":
            return liveStream(request, timeline: .continuous)
        case "/live/edge.mp4":
            return liveStream(request, timeline: .capture)
        case "/live.m3u8":
            return livePlaylist(request)
        default:
            if request.path.hasPrefix("/live/") { return liveSegment(String(request.path.dropFirst("/live/".count))) }
            if request.path.hasPrefix("/thumbs/") {
                return thumbnail(String(request.path.dropFirst("/thumbs/".count)), request: request)
            }
            if request.path.hasPrefix("/clips/"), request.path.hasSuffix(".jpg") {
                return picture(String(request.path.dropFirst("/clips/".count)), request: request)
            }
            if request.path.hasPrefix("/clips/") {
                return file(
                    String(request.path.dropFirst("/clips/".count)), request: request, cache: "private, max-age=60")
            }
            return .error(404, "Nothing is served at this address.")
        }
    }

    /// `POST /api/trigger`: records now as an outside event, as `vigil trigger` does, for
    /// `{"seconds": N}` (10 unless given) and then the post-roll. Only JSON is taken: a form
    /// another site makes a browser send cannot be (a cross-site JSON request needs the
    /// camera's consent first, which it never gives).
    func trigger(_ request: HTTPRequest) -> HTTPResponse {
        guard request.method == "POST" else {
            return .methodNotAllowed(
                "Ask to record with POST (curl -X POST -H 'Content-Type: application/json' -d '{\"seconds\": 30}' …/api/trigger).",
                allowed: "POST")
        }
        guard request.mediaType == "application/json" else {
            return .error(
                415,
                "Send the request as JSON: Content-Type: application/json, a body such as {\"seconds\": 30} (or {}).")
        }
        struct Asked: Decodable { var seconds: Double? }
        var asked = Asked()
        if !request.body.allSatisfy({ $0 == 0x20 || $0 == 0x0A || $0 == 0x0D || $0 == 0x09 }) {
            guard let decoded = try? JSONDecoder().decode(Asked.self, from: Data(request.body)) else {
                return .error(
                    400, "The body is not a JSON object with \"seconds\" a number: send {\"seconds\": 30}, or {}.")
            }
            asked = decoded
        }
        let seconds: Double
        switch OutsideRequest.seconds(asked.seconds) {
        case .success(let number): seconds = number
        case .failure(let error): return .error(400, "\"seconds\": \(error).")
        }
        if let problem = context.requests.cameraProblem {
            return .error(503, "Not recording: no camera: \(problem).")
        }
        context.requests.ask(.record(seconds: seconds), by: "web")
        return .text(
            202, "{\"recording\":true,\"seconds\":\(DecimalText.short(seconds, 3))}\n", type: "application/json",
            headers: [("Cache-Control", "no-store")])
    }

    static let noLivePicture: HTTPResponse = {
        var response = HTTPResponse.error(
            503,
            "No live picture yet: the camera has not delivered a whole second of video since the web server started.")
        response.headers.append(("Retry-After", "1"))
        return response
    }()

    /// `/live.mp4` and `/live/edge.mp4`: the live stream a frame at a time for one viewer
    /// (`LiveFrameViewer`), from the newest keyframe with the GOP in progress; one that asks
    /// before the first frame waits for it. `?gops=N` ends it after N GOPs (a clip of what is
    /// happening, for a download or a check).
    func liveStream(_ request: HTTPRequest, timeline: LiveFrameViewer.Timeline) -> HTTPResponse {
        var limit: Int?
        if let asked = request.query["gops"] {
            guard let n = Int(asked), (1...3600).contains(n) else {
                return .error(400, "gops=\(asked) is not a number of GOPs from 1 to 3600.")
            }
            limit = n
        }
        viewers.add(1, ordering: .relaxed)
        let viewer = LiveFrameViewer(feed: context.live, sound: sound, limit: limit, timeline: timeline) { [self] in
            viewers.subtract(1, ordering: .relaxed)
        }
        var headers: [(name: String, value: String)] = [("Content-Type", "video/mp4"), ("Cache-Control", "no-store")]
        if timeline == .capture, let zero = context.live.wallAtZero {
            headers.append(("X-Capture-Clock", DecimalText.fixed(zero, 3)))
        }
        return HTTPResponse(status: 200, headers: headers, body: .stream(viewer))
    }

    /// `/live.m3u8`: HLS's playlist (`LivePlaylist`); the player is counted as a viewer.
    func livePlaylist(_ request: HTTPRequest) -> HTTPResponse {
        let items = context.live.items
        guard let playlist = LivePlaylist.playlist(items) else {
            return Self.noLivePicture
        }
        let now = ContinuousClock.now
        let watching = Duration.seconds(3 * LiveFeed.targetDuration(items))
        hlsWatching.withLock { $0 = watching }
        let player = HLSPlayer(address: request.client ?? [], agent: request.header("user-agent") ?? "")
        hlsPlayers.withLock { players in
            players[player] = now
            // Bounded: those that stopped asking go (a thousand addresses at most are kept).
            if players.count > 1000 { players = players.filter { now - $0.value < watching } }
        }
        return .text(200, playlist, type: LivePlaylist.type, headers: [("Cache-Control", "no-store")])
    }

    /// Every live viewer now: the streams being sent and HLS's players that asked for the
    /// playlist within the last three target durations.
    var liveViewers: Int {
        let now = ContinuousClock.now
        let watching = hlsWatching.withLock { $0 }
        let players = hlsPlayers.withLock { $0.values.filter { now - $0 < watching }.count }
        return viewers.load(ordering: .relaxed) + players
    }

    /// `/live/init-STREAM.mp4` and `/live/SEQUENCE.m4s`: HLS's pieces, while the feed keeps them.
    func liveSegment(_ name: String) -> HTTPResponse {
        let items = context.live.items
        let headers: [(name: String, value: String)] = [("Cache-Control", "max-age=60")]
        if name.hasPrefix("init-"), name.hasSuffix(".mp4"), let stream = Int(name.dropFirst(5).dropLast(4)),
            let item = items.first(where: { $0.stream == stream })
        {
            return HTTPResponse(
                status: 200, headers: [("Content-Type", "video/mp4")] + headers,
                body: .bytes(item.movie.initialization()))
        }
        if name.hasSuffix(".m4s"), let sequence = UInt64(name.dropLast(4)),
            let item = items.first(where: { $0.sequence == sequence })
        {
            return HTTPResponse(
                status: 200, headers: [("Content-Type", "video/iso.segment")] + headers,
                body: .bytes(LivePlaylist.segment(item).bytes))
        }
        return .error(404, "No such piece of the live stream: it is older than the last few seconds kept.")
    }

    /// A file of the storage directory, or why not.
    func file(_ relativePath: String, request: HTTPRequest, cache: String) -> HTTPResponse {
        do throws(StorageFiles.Refusal) {
            let opened = try files.open(relativePath)
            var response = HTTPResponse.file(
                opened, type: StorageFiles.contentType(relativePath) ?? "application/octet-stream", request: request)
            response.headers.append(("Cache-Control", cache))
            return response
        } catch {
            switch error {
            case .notServed: return .error(404, "Nothing is served at this address.")
            case .missing: return .error(404, "No such file: retention may have deleted it.")
            case .unreadable(let why): return .error(503, "The file cannot be read now: \(why).")
            }
        }
    }

    /// The upload queue: what is uploaded, what waits, what was set aside — as the upload sink
    /// holds it while uploads run (nil until it has read `uploads.jsonl`), else from the file
    /// (read a piece at a time) when there is one.
    func uploads() -> UploadJournal? {
        switch context.uploadQueue {
        case .read(let queue)?: queue
        case .reading?: nil
        case nil: try? UploadJournal.read(from: storage)
        }
    }

    /// `/metrics`: the agent's counters in Prometheus's text format.
    func metrics() -> String {
        let c = context.counters
        let label = "{camera=\"\(Self.labelValue(camera))\"}"
        var lines: [String] = []
        func add(_ name: String, _ type: String, _ help: String, _ value: String) {
            lines += ["# HELP vigil_\(name) \(help)", "# TYPE vigil_\(name) \(type)", "vigil_\(name)\(label) \(value)"]
        }
        add("frames_total", "counter", "Frames the camera delivered.", "\(c.framesIn)")
        add("frames_encoded_total", "counter", "Frames encoded.", "\(c.framesEncoded)")
        add("frames_lost_at_source_total", "counter", "Frames lost before Vigil saw them.", "\(c.framesLostAtSource)")
        add(
            "frames_dropped_at_capture_total", "counter", "Frames dropped because the pipeline fell behind.",
            "\(c.framesDroppedAtCapture)")
        add(
            "samples_dropped_at_writer_total", "counter", "Encoded samples not written because the disk fell behind.",
            "\(c.samplesDroppedAtWriter)")
        add("clips_total", "counter", "Clips saved.", "\(c.clipsWritten)")
        add("clip_errors_total", "counter", "Clips that could not be written whole.", "\(c.clipErrors)")
        add("encode_seconds_total", "counter", "Seconds spent in the encoder.", Self.number(c.encodeSeconds))
        add("detect_seconds_total", "counter", "Seconds spent detecting motion.", Self.number(c.detectSeconds))
        add("motion_score", "gauge", "The last frame's motion score.", Self.number(c.lastScore))
        add("preroll_seconds", "gauge", "Seconds of video in the pre-roll ring.", Self.number(c.ringSeconds))
        add("preroll_bytes", "gauge", "Bytes in the pre-roll ring.", "\(c.ringBytes)")
        add("disk_free_bytes", "gauge", "Free space where the clips go.", "\(c.diskFreeBytes)")
        add("recording", "gauge", "1 while a clip is being recorded.", c.recording ? "1" : "0")
        add("motion", "gauge", "1 during a motion event.", motion.load(ordering: .relaxed) ? "1" : "0")
        add(
            "detection_enabled", "gauge", "1 while motion detection is on.",
            context.requests.detectionEnabled ? "1" : "0")
        add(
            "live_viewers", "gauge",
            "Live viewers: streams being sent (the page's live view, /live.mp4) and HLS players that asked for the playlist within three target durations.",
            "\(liveViewers)")
        let uploads = context.uploads
        add("upload_waiting", "gauge", "Clips waiting to be uploaded.", "\(uploads.waiting)")
        add("uploads_total", "counter", "Clips uploaded and verified.", "\(uploads.uploaded)")
        add("upload_bytes_total", "counter", "Bytes of the clips uploaded.", "\(uploads.bytes)")
        add(
            "upload_failures_total", "counter", "Upload tries that failed (each is tried again).", "\(uploads.failures)"
        )
        lines += [
            "# HELP vigil_build_info The agent's version.", "# TYPE vigil_build_info gauge",
            "vigil_build_info{camera=\"\(Self.labelValue(camera))\",version=\"\(Self.labelValue(version))\"} 1",
        ]
        return lines.joined(separator: "\n") + "\n"
    }

    /// A label value with `\`, `"` and line ends escaped, as the format asks.
    static func labelValue(_ text: String) -> String {
        text.replacing("\\", with: "\\\\").replacing("\"", with: "\\\"").replacing("\n", with: "\\n")
    }

    static func number(_ value: Double) -> String {
        value.isFinite ? DecimalText.short(value, 6) : "NaN"
    }

    /// The page's headers: nothing from elsewhere, no script but the agent's own (`/app.js`,
    /// which asks only this origin), not framed (the server adds
    /// `nosniff` to every response).
    static let pageHeaders: [(name: String, value: String)] = [
        ("Cache-Control", "no-store"), ("X-Frame-Options", "DENY"),
        (
            "Content-Security-Policy",
            "default-src 'none'; script-src 'self'; connect-src 'self'; img-src 'self'; media-src 'self' blob:; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'"
        ),
    ]
}
