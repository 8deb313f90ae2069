import Agent
import Logging
import Media
import POSIX
import QuickTime
import Synchronization
import Web

/// The RTSP server (RFC 2326) of `rtsp.enabled`, on one thread of its own (`run`): it reads
/// requests, answers them, and sends the live feed's frames as RTP (RFC 3550, H.264 per RFC
/// 6184, Opus per RFC 7587) to every client that plays — each frame made into packets once
/// and written to each client in one call (over its TCP connection, interleaved) or sent in
/// one call (over UDP). Why not gst-rtsp-server: docs/design/rtsp.md.
final class RTSPServer: @unchecked Sendable {
    // `@unchecked Sendable`: everything but `attached` and `stopping` is used on the server's
    // thread alone (`run`); those two are a lock's and an atomic's.

    /// The stream's path (`/<camera.name>`) and the port the server listens on.
    let path: String
    let port: Int
    /// Whether the stream has the microphone's sound as a second media.
    let soundEnabled: Bool
    /// With a password file: its users' sign-in, and its realm.
    let signIn: RTSPSignIn?
    let realm: String?
    let log: Logger

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

    let listener: FileDescriptor
    let wake: WakePipe
    /// The UDP senders of the picture and the sound: RTP and RTCP.
    let videoUDP: (rtp: DatagramSocket, rtcp: DatagramSocket)
    let audioUDP: (rtp: DatagramSocket, rtcp: DatagramSocket)?
    /// The feed served, and the sound's encoding for it (set when the agent's run begins).
    let attached = Mutex<(feed: LiveFeed, sound: LiveSound?)?>(nil)
    let stopping = Atomic<Bool>(false)

    // The loop's own state.
    var clients: [Client] = []
    var videoSender: RTPSender
    var audioSender: RTPSender
    var generator = SystemRandomNumberGenerator()
    let videoBase: UInt32
    let audioBase: UInt32
    /// Where the server is in the feed while clients play (nil: it is not reading it).
    var cursor: UInt64?
    var stream: Int?
    var format: VideoTrackFormat?
    var soundFormat: AudioTrackFormat?
    /// The GOP in progress as packets, from its keyframe: what a newcomer gets first.
    var gop: [PacketFrame] = []
    /// Whether the frames of the stream are dropped until its first keyframe.
    var awaitingKeyframe = true
    /// Added to capture times so that a stream that comes back goes on after the last one.
    var offset: Int64 = 0
    var lastTime: Int64 = 0
    /// The wall clock (seconds since 1970) less the media time (with `offset`, in seconds) of
    /// the stream's first frame as it came: what maps RTP times to the wall clock in sender
    /// reports, the same for the picture and the sound, so players keep them in step.
    var wallOffset: Double?
    /// Clients without a session pushed out by newcomers since the last count was logged.
    var pushedOut = 0
    /// Whether the feed will wake the loop at its next frame.
    var wakeArmed = false
    /// What reads go into.
    var readBuffer = [UInt8](repeating: 0, count: 16 * 1024)

    /// Listens on `listen`:`port` for `rtsp://…/<camera>`; `sound`: with the microphone's sound
    /// (as `LiveSound` encodes it) as a second media.
    init(
        listen: String, port: Int, camera: String, soundEnabled: Bool, signIn: RTSPSignIn?, realm: String?,
        log: Logger
    ) throws(RTSPServerError) {
        path = "/" + camera
        self.soundEnabled = soundEnabled
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

    static func listen(_ address: String, _ port: Int) throws(RTSPServerError) -> FileDescriptor {
        // The descriptor crosses the `do` as a number: Swift 6.0.3's optimizer crashed
        // (CopyPropagation) on a non-copyable value returned from a `do` with two `catch`es.
        let raw: Int32
        do { raw = try TCPListener.listen(address: address, port: port, backlog: 64).release() } catch {
            throw RTSPServerError(description: "\(error) — choose another rtsp.port or rtsp.listen")
        }
        let socket = FileDescriptor(adopting: raw)
        do { try TCPListener.makeNonBlocking(socket) } catch {
            throw RTSPServerError(
                description: "cannot listen on \(TCPListener.endpoint(address, port)): \(error) — try again")
        }
        return socket
    }

    /// Two UDP sockets, RTP's on an even port and RTCP's on the next when the kernel allows.
    static func udpPair(_ address: [UInt8]) throws(SystemError) -> (rtp: DatagramSocket, rtcp: DatagramSocket) {
        for _ in 0..<16 {
            let rtp = try DatagramSocket(address: address)
            guard rtp.port % 2 == 0, rtp.port < 65535 else { continue }
            if let rtcp = try? DatagramSocket(address: address, port: rtp.port + 1) { return (rtp, rtcp) }
        }
        return (try DatagramSocket(address: address), try DatagramSocket(address: address))
    }

    /// The feed to serve (the agent's run began), and the sound's encoding for it.
    func attach(_ feed: LiveFeed, sound: LiveSound?) {
        attached.withLock { $0 = (feed, sound) }
    }

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
            if let audioUDP {
                poll.entries.append(.init(descriptor: audioUDP.rtcp.socket.rawValue, read: true, write: false))
            }
            let fixed = poll.entries.count
            for client in clients {
                poll.entries.append(
                    .init(descriptor: client.connection.socket.rawValue, read: true, write: !client.outgoing.isEmpty))
            }
            // Woken by the feed when a frame comes (`pull` arms it), by a client, or for the
            // time limits.
            poll.wait(milliseconds: playing ? 100 : 250)
            let time = now()
            if poll.entries[1].canRead {
                wake.drain()
                wakeArmed = false
            }
            if poll.entries[2].canRead { videoUDP.rtcp.discard() }
            if let audioUDP, poll.entries[3].canRead { audioUDP.rtcp.discard() }
            for (index, client) in clients.enumerated() where poll.entries[fixed + index].canRead {
                read(client, at: time)
            }
            if poll.entries[0].canRead { accept(at: time) }
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

    func now() -> Double { Clock.monotonic.now().seconds }

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

    func accept(at time: Double) {
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
                guard
                    let oldest = clients.filter({ $0.session == nil && $0.closing != .now }).min(by: {
                        $0.connected < $1.connected
                    })
                else {
                    continue
                }
                oldest.closing = .now
                pushedOut += 1
            }
            connection.setSendBuffer(256 * 1024)
            let nonce = (0..<16).map { _ in generator.next() as UInt8 }.lowercaseHex
            clients.append(Client(connection: connection, nonce: nonce, at: time))
        }
    }

    /// Reads what `client` sent, within its budget, and answers each request.
    func read(_ client: Client, at time: Double) {
        guard client.closing != .now else { return }
        var total = 0
        while total < 256 * 1024 {
            let result = readBuffer.withUnsafeMutableBytes { client.connection.read(into: $0) }
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
                readBuffer.withUnsafeBytes { client.reader.append(UnsafeRawBufferPointer(rebasing: $0[..<n])) }
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

    func tooMuch(_ client: Client) {
        log.warning(
            "rtsp client hung up: it sent more than a client asks",
            [("address", .string(client.address)), ("most_bytes", .int(Self.burst))])
        client.closing = .now
    }

    func handleItems(_ client: Client, at time: Double) {
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
}
