import Agent
import Logging
import Media
import POSIX
import QuickTime
import Synchronization
import Web

// The requests a client sends, and their answers.
extension RTSPServer {
    func answer(_ request: RTSPRequest, from client: Client, at time: Double) {
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
            let id = sessionHeader.split(separator: ";").first.map { String($0).trimmingSpaces } ?? ""
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
            reply(
                request.body.isEmpty || request.method == "GET_PARAMETER" ? 200 : 451,
                client.session.map { [("Session", $0.id)] } ?? [])
        case "ANNOUNCE", "RECORD", "REDIRECT":
            reply(405, [("Allow", methods)])
        default:
            reply(501)
        }
    }

    /// Whether `request` may be answered: no password is asked, or its Digest response is right
    /// for a user of the file (RFC 2617, MD5, the connection's nonce).
    func signedIn(_ request: RTSPRequest, _ client: Client) -> Bool {
        guard let signIn, let realm else { return true }
        guard let header = request.header("Authorization"), let credentials = DigestCredentials(header: header)
        else { return false }
        return signIn.check(
            credentials, realm: realm, nonce: client.nonce, method: request.method,
            address: client.connection.peerAddress)
    }

    /// Answers a DESCRIBE once the stream's format is known; false until then.
    func describe(
        _ request: RTSPRequest, _ client: Client, _ reply: (Int, [(String, String)], [UInt8]) -> Void
    ) -> Bool {
        if cursor == nil { peekFormat() }
        guard let format else { return false }
        client.described = format
        let channels = soundEnabled ? (soundFormat?.channels ?? 1) : nil
        let sdp = StreamDescription.sdp(
            video: format, soundChannels: channels, session: UInt64(generator.next() as UInt32),
            title: "Vigil " + path.dropFirst())
        var base = request.uri
        if !base.hasSuffix("/") { base += "/" }
        reply(200, [("Content-Type", "application/sdp"), ("Content-Base", base)], Array(sdp.utf8))
        return true
    }

    func newSessionID() -> String { (0..<8).map { _ in generator.next() as UInt8 }.lowercaseHex }

    func setUp(
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
                (
                    "Transport",
                    answer + ";ssrc=\(String(repeating: "0", count: 8 - ssrcText.count) + ssrcText);mode=\"PLAY\""
                ),
                ("Session", "\(session.id);timeout=\(Self.sessionTimeout)"),
            ], [])
    }

    func play(
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
        if session.video != nil, let first = gop.first?.video {
            info.append("url=\(base)/stream=0;seq=\(first.firstSequence);rtptime=\(first.firstTimestamp)")
        }
        if session.audio != nil, let run = gop.lazy.compactMap(\.audio).first {
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
}
