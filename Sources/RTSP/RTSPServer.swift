import Agent
import Logging
import Media
import POSIX
import QuickTime
import Synchronization
import Web

/// Bytes made once and shared by every client they are written to (a frame's packets, a
/// response): memory of its own, so its address holds while a write to any client uses it.
final class SharedBytes: @unchecked Sendable {
    // `@unchecked Sendable`: never changed after `init`.
    let memory: UnsafeMutableRawBufferPointer

    init(_ bytes: [UInt8]) {
        let memory = UnsafeMutableRawBufferPointer.allocate(byteCount: max(1, bytes.count), alignment: 8)
        bytes.withUnsafeBytes { memory.copyMemory(from: $0) }
        self.memory = memory
        count = bytes.count
    }

    let count: Int

    deinit { memory.deallocate() }

    func slice(from offset: Int) -> UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(rebasing: memory[offset..<count])
    }
}

/// One frame of the stream as RTP, made once for every client: the picture's packets, and with
/// a microphone the sound's heard since the frame before.
final class PacketFrame: Sendable {
    let number: UInt64
    let isKeyframe: Bool
    /// The picture's media time (with the server's offset), in nanoseconds.
    let presented: Int64
    let video: PacketRun
    let videoBytes: SharedBytes
    let audio: PacketRun?
    let audioBytes: SharedBytes?

    init(number: UInt64, isKeyframe: Bool, presented: Int64, video: PacketRun, audio: PacketRun?) {
        self.number = number
        self.isKeyframe = isKeyframe
        self.presented = presented
        self.video = video
        videoBytes = SharedBytes(video.bytes)
        self.audio = audio
        audioBytes = audio.map { SharedBytes($0.bytes) }
    }
}

/// The RTSP server (RFC 2326) of `rtsp.enabled`, on one thread of its own (`run`): it reads
/// requests, answers them, and sends the live feed's frames as RTP (RFC 3550, H.264 per RFC
/// 6184, Opus per RFC 7587) to every client that plays — each frame made into packets once
/// and written to each client in one call (over its TCP connection, interleaved) or sent in
/// one call (over UDP). Why not gst-rtsp-server: docs/design/rtsp.md.
final class RTSPServer: @unchecked Sendable {
    // `@unchecked Sendable`: everything but `attached` and `stopping` is used on the server's
    // thread alone (`run`); those two are a lock's and an atomic's.

    /// How many clients are served at once.
    static let clientLimit = 32
    /// Bytes a client may send at once, and a second after that.
    static let burst = 64 * 1024
    static let rate = 4 * 1024
    /// How long a client may stay connected without a session (DESCRIBE and SETUP take a
    /// player milliseconds).
    static let grace = 10.0
    /// How long a DESCRIBE waits for the camera's first frame (the agent just started).
    static let describeWait = 10.0
    /// What a client on TCP may have queued before it loses frames up to the next keyframe.
    static let queueLimit = 2 << 20
    /// A client that took nothing of what was queued for it this long is hung up on.
    static let stalledLimit = 60.0
    /// Sessions on UDP: one whose client sent nothing this long is ended (the session's timeout
    /// says 60 s; players send a keep-alive well before).
    static let sessionTimeout = 60
    /// How often each client is sent a sender report for each of its media.
    static let reportInterval = 5.0
    /// The tick while clients play: how long a frame may wait before it goes out.
    static let tickMilliseconds: Int32 = 20

    let path: String
    let port: Int
    let title: String
    let sound: LiveSound?
    let soundEnabled: Bool
    let signIn: RTSPSignIn?
    let realm: String?
    let log: Logger

    private let listener: FileDescriptor
    private let wake: WakePipe
    /// The UDP senders of the picture and the sound: RTP and RTCP.
    private let videoUDP: (rtp: DatagramSocket, rtcp: DatagramSocket)
    private let audioUDP: (rtp: DatagramSocket, rtcp: DatagramSocket)?
    private let attached = Mutex<LiveFeed?>(nil)
    private let stopping = Atomic<Bool>(false)

    // The loop's own state.
    private var clients: [Client] = []
    private var videoSender: RTPSender
    private var audioSender: RTPSender
    private var generator = SystemRandomNumberGenerator()
    private let videoBase: UInt32
    private let audioBase: UInt32
    /// Where the server is in the feed while clients play (nil: it is not reading it).
    private var cursor: UInt64?
    private var stream: Int?
    private var format: VideoTrackFormat?
    private var soundFormat: AudioTrackFormat?
    /// The GOP in progress as packets, from its keyframe: what a newcomer gets first.
    private var gop: [PacketFrame] = []
    /// Whether the frames of the stream are dropped until its first keyframe.
    private var awaitingKeyframe = true
    /// Added to capture times so that a stream that comes back goes on after the last one.
    private var offset: Int64 = 0
    private var lastTime: Int64 = 0
    /// The wall clock (seconds since 1970) less the media time (with `offset`, in seconds) of
    /// the stream's first frame as it came: what maps RTP times to the wall clock in sender
    /// reports, the same for the picture and the sound, so players keep them in step.
    private var wallOffset: Double?
    private var hungUp = (stalled: 0, idle: 0)

    /// Listens on `listen`:`port` for `rtsp://…/<camera>`; `sound`: with the microphone's sound
    /// (as `LiveSound` encodes it) as a second media.
    init(
        listen: String, port: Int, camera: String, soundEnabled: Bool, signIn: RTSPSignIn?, realm: String?,
        log: Logger
    ) throws(RTSPServerError) {
        path = "/" + camera
        title = "Vigil " + camera
        self.soundEnabled = soundEnabled
        sound = nil
        self.signIn = signIn
        self.realm = realm
        self.log = log
        listener = try Self.listen(listen, port)
        do { self.port = try listener.localPort() } catch {
            throw RTSPServerError(description: "the RTSP server cannot tell its port: \(error)")
        }
        let address = NumericAddress.parse(listen) ?? [127, 0, 0, 1]
        do {
            wake = try WakePipe()
            videoUDP = try Self.udpPair(address)
            audioUDP = soundEnabled ? try Self.udpPair(address) : nil
        } catch {
            throw RTSPServerError(description: "the RTSP server cannot make its sockets: \(error)")
        }
        videoSender = RTPSender(
            payloadType: StreamDescription.videoPayloadType, ssrc: generator.next(), sequence: generator.next(),
            channel: 0)
        audioSender = RTPSender(
            payloadType: StreamDescription.audioPayloadType, ssrc: generator.next(), sequence: generator.next(),
            channel: 2)
        videoBase = generator.next()
        audioBase = generator.next()
    }

    private static func listen(_ address: String, _ port: Int) throws(RTSPServerError) -> FileDescriptor {
        do {
            let socket = try TCPListener.listen(address: address, port: port, backlog: 64)
            try TCPListener.makeNonBlocking(socket)
            return socket
        } catch let error as TCPListener.Failure {
            throw RTSPServerError(description: "\(error) — choose another rtsp.port or rtsp.listen")
        } catch {
            throw RTSPServerError(
                description: "cannot listen on \(TCPListener.endpoint(address, port)): \(error) — choose another rtsp.port or rtsp.listen")
        }
    }

    /// Two UDP sockets, RTP's on an even port and RTCP's on the next when the kernel allows.
    private static func udpPair(_ address: [UInt8]) throws(SystemError) -> (rtp: DatagramSocket, rtcp: DatagramSocket) {
        for _ in 0..<16 {
            let rtp = try DatagramSocket(address: address)
            guard rtp.port % 2 == 0, rtp.port < 65535 else { continue }
            if let rtcp = try? DatagramSocket(address: address, port: rtp.port + 1) { return (rtp, rtcp) }
        }
        return (try DatagramSocket(address: address), try DatagramSocket(address: address))
    }

    private var liveSound: LiveSound?

    /// The feed to serve (the agent's run began), and the sound's encoding for it.
    func attach(_ feed: LiveFeed, sound: LiveSound?) {
        attached.withLock { $0 = feed }
        soundToAttach.withLock { $0 = sound }
    }
    private let soundToAttach = Mutex<LiveSound?>(nil)

    /// Asks `run` to end: every client's stream ends (an RTCP BYE) and its connection closes.
    func stop() {
        stopping.store(true, ordering: .releasing)
        wake.wake()
    }

    // MARK: - The loop

    /// Serves until `stop`.
    func run() {
        var poll = PollSet()
        var lastPolice = now()
        while !stopping.load(ordering: .acquiring) {
            let playing = clients.contains { $0.session?.playing == true || $0.describe != nil }
            poll.entries.removeAll(keepingCapacity: true)
            poll.entries.append(.init(descriptor: listener.rawValue, read: true, write: false))
            poll.entries.append(.init(descriptor: wake.readEnd.rawValue, read: true, write: false))
            poll.entries.append(.init(descriptor: videoUDP.rtcp.socket.rawValue, read: true, write: false))
            if let audioUDP { poll.entries.append(.init(descriptor: audioUDP.rtcp.socket.rawValue, read: true, write: false)) }
            let fixed = poll.entries.count
            for client in clients {
                poll.entries.append(
                    .init(descriptor: client.connection.socket.rawValue, read: true, write: !client.outgoing.isEmpty))
            }
            poll.wait(milliseconds: playing ? Self.tickMilliseconds : 250)
            let time = now()
            if poll.entries[1].canRead { wake.drain() }
            if poll.entries[2].canRead { videoUDP.rtcp.discard() }
            if let audioUDP, poll.entries[3].canRead { audioUDP.rtcp.discard() }
            for (index, client) in clients.enumerated() where poll.entries[fixed + index].canRead {
                read(client, at: time)
            }
            if poll.entries[0].canRead { accept(at: time) }
            if liveSound == nil, let sound = soundToAttach.withLock({ $0 }) { liveSound = sound }
            feed(at: time)
            for client in clients where !client.outgoing.isEmpty && client.closing != .now { flush(client, at: time) }
            if time - lastPolice >= 0.1 {
                lastPolice = time
                police(at: time)
            }
            clients.removeAll { client in
                guard client.closing == .now else { return false }
                ended(client)
                return true
            }
        }
        // The stop: each playing client is told its streams end, and every connection closes.
        for client in clients {
            if let session = client.session, session.playing { goodbye(client, session) }
            if !client.outgoing.isEmpty { flush(client, at: now()) }
        }
        clients = []
    }

    private func now() -> Double { Clock.monotonic.now().seconds }

    // MARK: - Clients

    /// One connection, and its session once it set one up.
    final class Client {
        enum Closing: Equatable {
            case no
            /// After what is queued is written: the sending side is shut, and the connection
            /// closed when the client closes its side or at `deadline`.
            case afterFlush(deadline: Double)
            case now
        }

        let connection: StreamConnection
        let address: String
        let connected: Double
        var reader = RTSPReader()
        var allowance = Double(RTSPServer.burst)
        var allowanceAt: Double
        var outgoing: [(bytes: SharedBytes, offset: Int, media: Bool)] = []
        var outgoingBytes = 0
        var lastProgress: Double
        var lastHeard: Double
        var closing = Closing.no
        var session: Session?
        var nonce: String
        /// A DESCRIBE waiting for the camera's first frame, and until when.
        var describe: (request: RTSPRequest, deadline: Double)?
        /// The picture's format the client was told (DESCRIBE).
        var described: VideoTrackFormat?

        init(connection: StreamConnection, nonce: String, at time: Double) {
            self.connection = connection
            address = NumericAddress.text(connection.peerAddress)
            connected = time
            allowanceAt = time
            lastProgress = time
            lastHeard = time
            self.nonce = nonce
        }
    }

    /// A client's session: the media it set up, how each reaches it, and whether it plays.
    final class Session {
        struct Track {
            /// Over TCP: the channels it chose; over UDP: its ports.
            var channels: (rtp: UInt8, rtcp: UInt8)?
            var peer: (rtp: DatagramSocket.Peer, rtcp: DatagramSocket.Peer)?
            var packets: UInt32 = 0
            var octets: UInt32 = 0
        }

        let id: String
        var video: Track?
        var audio: Track?
        var playing = false
        var started: Double = 0
        /// It gets nothing before the next keyframe (it fell behind, or it played again).
        var awaitingKeyframe = false
        /// Whether it was sent its first sender reports, and when the next are due.
        var reported = false
        var nextReport: Double = 0
        /// The picture's format it was told (DESCRIBE), or nil.
        var described: VideoTrackFormat?

        init(id: String, described: VideoTrackFormat?) {
            self.id = id
            self.described = described
        }

        var tcp: Bool { (video ?? audio)?.channels != nil }
    }

    private func accept(at time: Double) {
        while true {
            let connection: StreamConnection?
            do { connection = try StreamConnection.accept(from: listener) } catch {
                log.warning("rtsp server cannot take a connection", [("error", .string("\(error)"))])
                return
            }
            guard let connection else { return }
            if let signIn, !signIn.admits(connection.peerAddress) { continue }  // closed as it goes
            if clients.filter({ $0.closing != .now }).count >= Self.clientLimit {
                // Places are for players: the client that waited longest without a session
                // makes room, or else the newcomer is turned away.
                guard let oldest = clients.filter({ $0.session == nil && $0.closing != .now }).min(by: { $0.connected < $1.connected }) else {
                    continue
                }
                oldest.closing = .now
                hungUp.idle += 1
            }
            connection.setSendBuffer(256 * 1024)
            let nonce = (0..<16).map { _ in generator.next() as UInt8 }.lowercaseHex
            clients.append(Client(connection: connection, nonce: nonce, at: time))
        }
    }

    /// Reads what `client` sent, within its budget, and answers each request.
    private func read(_ client: Client, at time: Double) {
        guard client.closing != .now else { return }
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        var total = 0
        while total < 256 * 1024 {
            let result = buffer.withUnsafeMutableBytes { client.connection.read(into: $0) }
            switch result {
            case .moved(let n):
                total += n
                client.lastHeard = time
                if case .afterFlush = client.closing { continue }  // read and dropped
                client.allowance = min(
                    Double(Self.burst), client.allowance + (time - client.allowanceAt) * Double(Self.rate))
                client.allowanceAt = time
                client.allowance -= Double(n)
                if client.allowance < 0 {
                    tooMuch(client)
                    return
                }
                buffer.withUnsafeBytes { client.reader.append(UnsafeRawBufferPointer(rebasing: $0[..<n])) }
                handleItems(client, at: time)
                if client.closing != .no { return }
            case .wouldBlock:
                return
            case .ended, .failed:
                if case .afterFlush = client.closing, !client.outgoing.isEmpty { return }
                client.closing = .now
                return
            }
        }
    }

    private func tooMuch(_ client: Client) {
        log.warning(
            "rtsp client hung up: it sent more than a client asks",
            [("address", .string(client.address)), ("most_bytes", .int(Self.burst))])
        client.closing = .now
    }

    private func handleItems(_ client: Client, at time: Double) {
        while client.closing == .no, let item = client.reader.next() {
            switch item {
            case .interleaved:
                // An RTCP receiver report: the client is there.
                break
            case .bad(let status, let overLimit):
                queue(client, RTSPResponse.bytes(status, cseq: nil, [("Connection", "close")]), media: false)
                if overLimit {
                    flush(client, at: time)
                    tooMuch(client)
                } else {
                    client.closing = .afterFlush(deadline: time + 1)
                }
            case .request(let request):
                answer(request, from: client, at: time)
            }
        }
    }

    // MARK: - Requests

    private func answer(_ request: RTSPRequest, from client: Client, at time: Double) {
        let cseq = request.header("CSeq")
        func reply(_ status: Int, _ headers: [(String, String)] = [], body: [UInt8] = []) {
            queue(client, RTSPResponse.bytes(status, cseq: cseq, headers, body: body), media: false)
        }
        guard let cseq, !cseq.isEmpty else {
            reply(400)
            return
        }
        let methods = "OPTIONS, DESCRIBE, SETUP, PLAY, PAUSE, TEARDOWN, GET_PARAMETER, SET_PARAMETER"
        if request.method == "OPTIONS" {
            reply(200, [("Public", methods)])
            return
        }
        guard signedIn(request, client) else {
            if let realm {
                reply(401, [("WWW-Authenticate", "Digest realm=\"\(realm)\", nonce=\"\(client.nonce)\"")])
            }
            return
        }
        let requestPath = request.path
        let track: Int? =
            if requestPath == path || requestPath == path + "/" { nil } else if requestPath == path + "/stream=0" {
                0
            } else if requestPath == path + "/stream=1" && soundEnabled { 1 } else { -1 }
        if let sessionHeader = request.header("Session") {
            let id = sessionHeader.split(separator: ";").first.map { String($0).trimmedSpaces } ?? ""
            guard let session = client.session, session.id == id else {
                reply(454)
                return
            }
        }
        switch request.method {
        case "DESCRIBE":
            guard track == nil else {
                reply(404)
                return
            }
            if !describe(request, client, reply) { client.describe = (request, time + Self.describeWait) }
        case "SETUP":
            guard let track, track >= 0 else {
                reply(404)
                return
            }
            setUp(request, client, track: track, at: time, reply)
        case "PLAY":
            guard track != -1 else {
                reply(404)
                return
            }
            guard let session = client.session, session.video != nil || session.audio != nil else {
                reply(454)
                return
            }
            play(request, client, session, at: time, reply)
        case "PAUSE":
            guard let session = client.session else {
                reply(454)
                return
            }
            session.playing = false
            reply(200, [("Session", session.id)])
        case "TEARDOWN":
            if let session = client.session {
                reply(200, [("Session", session.id)])
                client.session = nil
            } else {
                reply(200)
            }
        case "GET_PARAMETER", "SET_PARAMETER":
            // A keep-alive (a body would name parameters: there are none).
            reply(request.body.isEmpty || request.method == "GET_PARAMETER" ? 200 : 451,
                client.session.map { [("Session", $0.id)] } ?? [])
        case "ANNOUNCE", "RECORD", "REDIRECT":
            reply(405, [("Allow", methods)])
        default:
            reply(501)
        }
    }

    /// Whether `request` may be answered: no password is asked, or its Digest response is right
    /// for a user of the file (RFC 2617, MD5, the connection's nonce).
    private func signedIn(_ request: RTSPRequest, _ client: Client) -> Bool {
        guard let signIn, let realm else { return true }
        guard let header = request.header("Authorization"), let credentials = DigestCredentials(header: header)
        else { return false }
        return signIn.check(
            credentials, realm: realm, nonce: client.nonce, method: request.method,
            address: client.connection.peerAddress)
    }

    /// Answers a DESCRIBE once the stream's format is known; false until then.
    private func describe(
        _ request: RTSPRequest, _ client: Client, _ reply: (Int, [(String, String)], [UInt8]) -> Void
    ) -> Bool {
        if cursor == nil { peekFormat() }
        guard let format else { return false }
        client.described = format
        let channels = soundEnabled ? (soundFormat?.channels ?? 1) : nil
        let sdp = StreamDescription.sdp(
            video: format, soundChannels: channels, session: UInt64(generator.next() as UInt32), title: title)
        var base = request.uri
        if !base.hasSuffix("/") { base += "/" }
        reply(200, [("Content-Type", "application/sdp"), ("Content-Base", base)], Array(sdp.utf8))
        return true
    }

    private func newSessionID() -> String { (0..<8).map { _ in generator.next() as UInt8 }.lowercaseHex }

    private func setUp(
        _ request: RTSPRequest, _ client: Client, track: Int, at time: Double,
        _ reply: (Int, [(String, String)], [UInt8]) -> Void
    ) {
        guard let header = request.header("Transport"), let transport = TransportRequest.parse(header) else {
            reply(461, [], [])
            return
        }
        let session = client.session ?? Session(id: newSessionID(), described: client.described)
        // One way for every media of a session: a player does not mix them.
        if let other = session.video ?? session.audio, (other.channels != nil) != transport.tcp {
            reply(461, [], [])
            return
        }
        var setup = Session.Track()
        let ssrc = track == 0 ? videoSender.ssrc : audioSender.ssrc
        let answer: String
        if transport.tcp {
            let channels = transport.channels ?? (UInt8(track * 2), UInt8(track * 2 + 1))
            setup.channels = channels
            answer = "RTP/AVP/TCP;unicast;interleaved=\(channels.rtp)-\(channels.rtcp)"
        } else {
            // Only ever to the address the request came from.
            guard let ports = transport.clientPorts, let udp = track == 0 ? videoUDP : audioUDP else {
                reply(461, [], [])
                return
            }
            let address = client.connection.peerAddress
            setup.peer = (
                DatagramSocket.Peer(address: address, port: ports.rtp),
                DatagramSocket.Peer(address: address, port: ports.rtcp)
            )
            answer =
                "RTP/AVP;unicast;client_port=\(ports.rtp)-\(ports.rtcp);server_port=\(udp.rtp.port)-\(udp.rtcp.port)"
        }
        if track == 0 { session.video = setup } else { session.audio = setup }
        client.session = session
        let ssrcText = String(ssrc, radix: 16, uppercase: true)
        reply(
            200,
            [
                ("Transport", answer + ";ssrc=\(String(repeating: "0", count: 8 - ssrcText.count) + ssrcText);mode=\"PLAY\""),
                ("Session", "\(session.id);timeout=\(Self.sessionTimeout)"),
            ], [])
    }

    private func play(
        _ request: RTSPRequest, _ client: Client, _ session: Session, at time: Double,
        _ reply: (Int, [(String, String)], [UInt8]) -> Void
    ) {
        if session.playing {
            reply(200, [("Session", session.id), ("Range", "npt=now-")], [])
            return
        }
        // The feed is read from now on, if it was not: the GOP in progress, as packets.
        if cursor == nil { pull(at: time) }
        if let described = session.described, let format, described != format {
            // The camera came back in another format since DESCRIBE: the player must ask again.
            reply(503, [], [])
            client.closing = .afterFlush(deadline: time + 1)
            return
        }
        var base = request.uri
        if base.hasSuffix("/") { base.removeLast() }
        if base.hasSuffix("/stream=0") || base.hasSuffix("/stream=1") { base.removeLast(9) }
        var info: [String] = []
        if session.video != nil, let first = gop.first {
            info.append("url=\(base)/stream=0;seq=\(first.video.firstSequence);rtptime=\(first.video.firstTimestamp)")
        }
        if session.audio != nil, let run = gop.lazy.compactMap(\.audio).first(where: { !$0.isEmpty }) {
            info.append("url=\(base)/stream=1;seq=\(run.firstSequence);rtptime=\(run.firstTimestamp)")
        }
        var headers = [("Session", session.id), ("Range", "npt=now-")]
        if !info.isEmpty { headers.append(("RTP-Info", info.joined(separator: ","))) }
        reply(200, headers, [])
        session.playing = true
        session.started = time
        // Played again after a pause: from the next keyframe (the GOP it had went out once).
        let resumed = session.reported
        session.awaitingKeyframe = resumed
        log.info(
            "rtsp client plays",
            [
                ("address", .string(client.address)), ("transport", .string(session.tcp ? "tcp" : "udp")),
                ("sound", .bool(session.audio != nil)),
            ])
        // The GOP in progress first, from its keyframe: its first picture shows at once.
        if !resumed {
            for frame in gop { send(frame, to: client, session) }
        }
    }

    // MARK: - The feed

    /// Learns the stream's format from the feed without reading it on (nobody plays).
    private func peekFormat() {
        guard let feed = attached.withLock({ $0 }), case .frames(let frames) = feed.frames(after: nil),
            let last = frames.last
        else { return }
        format = last.movie.video
        soundFormat = last.sound ?? soundFormat
    }

    /// What is new in the feed, as packets, to every client that plays; DESCRIBEs that waited
    /// for a first frame are answered; the feed is let go when nobody plays.
    private func feed(at time: Double) {
        let waiting = clients.filter { $0.describe != nil && $0.closing == .no }
        let playing = clients.contains { $0.session?.playing == true && $0.closing == .no }
        if playing {
            pull(at: time)
        } else if cursor != nil {
            cursor = nil
            gop = []
        }
        for client in waiting {
            guard let (request, deadline) = client.describe else { continue }
            let cseq = request.header("CSeq")
            let answered = describe(request, client) { status, headers, body in
                queue(client, RTSPResponse.bytes(status, cseq: cseq, headers, body: body), media: false)
            }
            if answered {
                client.describe = nil
            } else if time >= deadline {
                client.describe = nil
                queue(client, RTSPResponse.bytes(503, cseq: cseq, [("Retry-After", "5")]), media: false)
            }
        }
    }

    /// Reads the feed on from `cursor`.
    private func pull(at time: Double) {
        guard let feed = attached.withLock({ $0 }) else { return }
        switch feed.frames(after: cursor) {
        case .frames(let frames):
            for frame in frames { take(frame, at: time) }
        case .waiting:
            break
        case .closed:
            stopping.store(true, ordering: .releasing)
        }
    }

    /// One frame of the feed: made into packets and sent to every client that plays.
    private func take(_ frame: LiveFeed.Frame, at time: Double) {
        let sample = frame.sample
        if frame.stream != stream {
            let video = frame.movie.video
            if let format, format != video {
                // The camera came back in another format (a size changed by a reload): every
                // client's stream ends (an RTCP BYE) and the player asks again, getting a
                // description of the new one — a player told one size may not take another.
                for client in clients where client.closing == .no {
                    guard let session = client.session else { continue }
                    if session.playing { goodbye(client, session) }
                    client.session = nil
                    client.closing = .afterFlush(deadline: time + 1)
                }
                log.info(
                    "rtsp clients asked to come again: the camera's format changed",
                    [("width", .int(video.width)), ("height", .int(video.height))])
            }
            stream = frame.stream
            format = video
            gop = []
            wallOffset = nil
            awaitingKeyframe = true
            // A stream that comes back goes on after the last one, never before it.
            if lastTime > 0, sample.pts.nanoseconds + offset <= lastTime {
                offset = lastTime + 40_000_000 - sample.pts.nanoseconds
            }
        }
        cursor = frame.number
        if frame.sound != nil { soundFormat = frame.sound }
        if sample.isKeyframe {
            gop = []
            awaitingKeyframe = false
        } else if awaitingKeyframe {
            return
        }
        let presented = sample.pts.nanoseconds + offset
        lastTime = max(lastTime, presented)
        if wallOffset == nil { wallOffset = Self.wallNow() - Double(presented) / 1e9 }
        var video = PacketRun()
        let before = sample.isKeyframe ? [format?.sequenceParameterSet ?? [], format?.pictureParameterSet ?? []] : []
        guard
            H264Packetizer.append(
                sample.data, before: before, timestamp: videoBase &+ Self.ticks(presented, rate: 90_000), to: &video,
                &videoSender)
        else { return }
        var audio: PacketRun?
        if soundEnabled, let liveSound, let run = liveSound.run(for: frame) {
            var packets = PacketRun()
            var start = run.start.nanoseconds + offset
            for packet in run.packets {
                packet.withUnsafeBytes {
                    packets.append(&audioSender, marker: false, timestamp: audioBase &+ Self.ticks(start, rate: 48_000), $0)
                }
                start += 20_000_000
            }
            audio = packets
        }
        let packets = PacketFrame(
            number: frame.number, isKeyframe: sample.isKeyframe, presented: presented, video: video, audio: audio)
        if gop.count < LiveFeed.framesKept { gop.append(packets) }
        for client in clients where client.closing == .no {
            guard let session = client.session, session.playing else { continue }
            send(packets, to: client, session)
        }
    }

    /// `nanoseconds` in ticks of `rate` a second, as RTP's 32-bit timestamps wrap.
    static func ticks(_ nanoseconds: Int64, rate: Int64) -> UInt32 {
        let seconds = nanoseconds / 1_000_000_000
        let rest = nanoseconds % 1_000_000_000
        return UInt32(truncatingIfNeeded: seconds &* rate &+ rest * rate / 1_000_000_000)
    }

    // MARK: - Sending

    /// Queues `frame` for a client on TCP (or sends it, on UDP) — unless the client fell so far
    /// behind that it waits for the next keyframe.
    private func send(_ frame: PacketFrame, to client: Client, _ session: Session) {
        if session.awaitingKeyframe {
            guard frame.isKeyframe else { return }
            session.awaitingKeyframe = false
        }
        if !session.reported {
            // Sender reports before the first packet, mapped at its time: a player puts the
            // picture and the sound on one clock from the first packet on (ffmpeg takes each
            // stream's first packets as time zero until a report comes, then jumps).
            session.reported = true
            session.nextReport = now() + Self.reportInterval
            report(client, session, bye: false, mediaTime: frame.presented)
        }
        if session.tcp {
            if client.outgoingBytes > Self.queueLimit {
                guard frame.isKeyframe else {
                    session.awaitingKeyframe = true
                    return
                }
                // What it has not started on is dropped; the keyframe goes next.
                client.outgoing = client.outgoing.enumerated().filter { $0.offset == 0 || !$0.element.media }.map(\.element)
                client.outgoingBytes = client.outgoing.reduce(0) { $0 + $1.bytes.count - $1.offset }
            }
            if var track = session.video {
                let channel = track.channels!.rtp
                queue(
                    client, channel == videoSender.channel ? frame.videoBytes : SharedBytes(frame.video.onChannel(channel)),
                    media: true)
                track.packets &+= UInt32(truncatingIfNeeded: frame.video.packets.count)
                track.octets &+= UInt32(truncatingIfNeeded: frame.video.payloadBytes)
                session.video = track
            }
            if var track = session.audio, let audio = frame.audio, let bytes = frame.audioBytes, !audio.isEmpty {
                let channel = track.channels!.rtp
                queue(client, channel == audioSender.channel ? bytes : SharedBytes(audio.onChannel(channel)), media: true)
                track.packets &+= UInt32(truncatingIfNeeded: audio.packets.count)
                track.octets &+= UInt32(truncatingIfNeeded: audio.payloadBytes)
                session.audio = track
            }
        } else {
            if var track = session.video, let peer = track.peer {
                videoUDP.rtp.send(UnsafeRawPointer(frame.videoBytes.memory.baseAddress!), frame.video.packets, to: peer.rtp)
                track.packets &+= UInt32(truncatingIfNeeded: frame.video.packets.count)
                track.octets &+= UInt32(truncatingIfNeeded: frame.video.payloadBytes)
                session.video = track
            }
            if var track = session.audio, let peer = track.peer, let audio = frame.audio, let bytes = frame.audioBytes,
                let audioUDP
            {
                audioUDP.rtp.send(UnsafeRawPointer(bytes.memory.baseAddress!), audio.packets, to: peer.rtp)
                track.packets &+= UInt32(truncatingIfNeeded: audio.packets.count)
                track.octets &+= UInt32(truncatingIfNeeded: audio.payloadBytes)
                session.audio = track
            }
        }
    }

    private func queue(_ client: Client, _ bytes: [UInt8], media: Bool) {
        queue(client, SharedBytes(bytes), media: media)
    }

    private func queue(_ client: Client, _ bytes: SharedBytes, media: Bool) {
        guard bytes.count > 0 else { return }
        if client.outgoing.isEmpty { client.lastProgress = now() }
        client.outgoing.append((bytes, 0, media))
        client.outgoingBytes += bytes.count
    }

    /// Writes what is queued for `client`, as much as its socket takes, in one call.
    private func flush(_ client: Client, at time: Double) {
        while !client.outgoing.isEmpty {
            let buffers = client.outgoing.prefix(64).map { $0.bytes.slice(from: $0.offset) }
            switch client.connection.write(buffers) {
            case .moved(var n):
                if n > 0 { client.lastProgress = time }
                client.outgoingBytes -= n
                var done = 0
                while n > 0 {
                    let left = client.outgoing[done].bytes.count - client.outgoing[done].offset
                    if n >= left {
                        n -= left
                        done += 1
                    } else {
                        client.outgoing[done].offset += n
                        n = 0
                    }
                }
                client.outgoing.removeFirst(done)
                if done < buffers.count { return }  // the socket's buffer is full
            case .wouldBlock:
                return
            case .ended, .failed:
                client.closing = .now
                return
            }
        }
        if case .afterFlush = client.closing { client.connection.endSending() }
    }

    /// Sender reports, goodbyes and time limits.
    private func police(at time: Double) {
        var idle = 0
        for client in clients where client.closing != .now {
            if case .afterFlush(let deadline) = client.closing {
                if time >= deadline || (client.outgoing.isEmpty && time - client.lastHeard > 0.5) {
                    client.closing = .now
                }
                continue
            }
            guard let session = client.session else {
                if client.describe == nil && time - client.connected >= Self.grace {
                    client.closing = .now
                    idle += 1
                }
                continue
            }
            if !client.outgoing.isEmpty && time - client.lastProgress >= Self.stalledLimit {
                hungUp.stalled += 1
                log.info(
                    "rtsp client hung up: it stopped reading",
                    [("address", .string(client.address)), ("after_s", .int(Int(Self.stalledLimit)))])
                client.closing = .now
                continue
            }
            if !session.tcp && time - client.lastHeard >= Double(Self.sessionTimeout) + 5 {
                log.info(
                    "rtsp client hung up: its session timed out",
                    [("address", .string(client.address)), ("after_s", .int(Self.sessionTimeout))])
                client.closing = .now
                continue
            }
            if session.playing && time >= session.nextReport {
                session.nextReport = time + Self.reportInterval
                report(client, session, bye: false)
            }
        }
        idle += hungUp.idle
        hungUp.idle = 0
        if idle > 0 {
            log.info(
                "rtsp client hung up: connected without asking for the stream",
                [("clients", .int(idle)), ("after_s", .int(Int(Self.grace)))])
        }
    }

    /// A sender report for each of `session`'s media (and with `bye`, a goodbye), mapping
    /// `mediaTime` (nanoseconds; nil: now) to the wall clock.
    private func report(_ client: Client, _ session: Session, bye: Bool, mediaTime: Int64? = nil) {
        guard let wallOffset else { return }
        let wall = mediaTime.map { Double($0) / 1e9 + wallOffset } ?? Self.wallNow()
        let time = mediaTime ?? Int64((wall - wallOffset) * 1e9)
        let ntp = RTCPPackets.ntp(unixSeconds: wall)
        let media: [(Session.Track?, RTPSender, UInt32, Int64, (rtp: DatagramSocket, rtcp: DatagramSocket)?)] = [
            (session.video, videoSender, videoBase, 90_000, videoUDP),
            (session.audio, audioSender, audioBase, 48_000, audioUDP),
        ]
        for (track, sender, base, rate, udp) in media {
            guard let track else { continue }
            let packet = RTCPPackets.report(
                ssrc: sender.ssrc, ntp: ntp, rtp: base &+ Self.ticks(time, rate: rate), packets: track.packets,
                octets: track.octets, cname: "vigil@\(path)", bye: bye)
            if let channels = track.channels {
                queue(
                    client, [0x24, channels.rtcp, UInt8(packet.count >> 8), UInt8(packet.count & 0xFF)] + packet,
                    media: false)
            } else if let peer = track.peer, let udp {
                packet.withUnsafeBytes { udp.rtcp.send($0.baseAddress!, [0..<packet.count], to: peer.rtcp) }
            }
        }
    }

    /// The wall clock, seconds since 1970.
    static func wallNow() -> Double {
        let wall = WallClock.now()
        return Double(wall.seconds) + Double(wall.nanoseconds) / 1e9
    }

    /// Tells `client` its session's streams end (an RTCP BYE for each).
    private func goodbye(_ client: Client, _ session: Session) {
        report(client, session, bye: true)
        session.playing = false
    }

    /// A client's connection closes.
    private func ended(_ client: Client) {
        if let session = client.session, session.playing {
            log.info(
                "rtsp client left",
                [("address", .string(client.address)), ("watched_s", .int(Int(now() - session.started)))])
        }
    }

    /// How many clients are connected now (tests).
    var clientCount: Int { clients.count }
}
