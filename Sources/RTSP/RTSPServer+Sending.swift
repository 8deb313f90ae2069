import Agent
import Logging
import Media
import POSIX
import QuickTime
import Synchronization
import Web

// The live feed made into packets, and the packets to each client that plays.
extension RTSPServer {
    /// Learns the stream's format from the feed without reading it on (nobody plays).
    func peekFormat() {
        guard let feed = attached.withLock({ $0?.feed }), case .frames(let frames) = feed.frames(after: nil),
            let last = frames.last
        else { return }
        format = last.movie.video
        soundFormat = last.sound ?? soundFormat
    }

    /// What is new in the feed, as packets, to every client that plays; DESCRIBEs that waited
    /// for a first frame are answered; the feed is let go when nobody plays.
    func feed(at time: Double) {
        let playing = clients.contains { $0.session?.playing == true && $0.closing == .no }
        if playing {
            pull(at: time)
        } else if cursor != nil {
            cursor = nil
            gop = []
        }
        for client in clients where client.closing == .no {
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
    func pull(at time: Double) {
        guard let (feed, sound) = attached.withLock({ $0 }) else { return }
        // Nothing new: the feed wakes the loop at its next frame (once armed, until it does).
        let wake = self.wake
        let next =
            wakeArmed
            ? feed.frames(after: cursor)
            : feed.frames(after: cursor, sleep: { wakeArmed = true }, wake: { wake.wake() })
        switch next {
        case .frames(let frames):
            for frame in frames { take(frame, sound: sound, at: time) }
        case .waiting:
            break
        case .closed:
            stopping.store(true, ordering: .releasing)
        }
    }

    /// One frame of the feed: made into packets (its sound encoded by `sound`) and sent to
    /// every client that plays.
    func take(_ frame: LiveFeed.Frame, sound: LiveSound?, at time: Double) {
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
        if soundEnabled, let sound, let run = sound.run(for: frame) {
            var packets = PacketRun()
            var start = run.start.nanoseconds + offset
            for packet in run.packets {
                packet.withUnsafeBytes {
                    packets.append(
                        &audioSender, marker: false, timestamp: audioBase &+ Self.ticks(start, rate: 48_000), $0)
                }
                start += 20_000_000
            }
            audio = packets
        }
        let packets = PacketFrame(
            isKeyframe: sample.isKeyframe, presented: presented, video: video, audio: audio)
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
    func send(_ frame: PacketFrame, to client: Client, _ session: Session) {
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
        if session.tcp, client.outgoingBytes > Self.queueLimit {
            guard frame.isKeyframe else {
                session.awaitingKeyframe = true
                return
            }
            // What it has not started on is dropped; the keyframe goes next.
            client.outgoing = client.outgoing.enumerated().filter { $0.offset == 0 || !$0.element.media }.map(
                \.element)
            client.outgoingBytes = client.outgoing.reduce(0) { $0 + $1.bytes.count - $1.offset }
        }
        // Each media the client set up: written in its TCP connection on its channel (the
        // frame's own bytes when it is the usual one), or sent to its UDP port.
        for index in 0..<2 {
            guard var track = index == 0 ? session.video : session.audio, let media = frame.media[index] else {
                continue
            }
            if let channels = track.channels {
                let usual = index == 0 ? videoSender.channel : audioSender.channel
                queue(
                    client, channels.rtp == usual ? media.bytes : SharedBytes(media.run.onChannel(channels.rtp)),
                    media: true)
            } else if let peer = track.peer, let udp = index == 0 ? videoUDP : audioUDP {
                udp.rtp.send(UnsafeRawPointer(media.bytes.memory.baseAddress!), media.run.packets, to: peer.rtp)
            }
            track.packets &+= UInt32(truncatingIfNeeded: media.run.packets.count)
            track.octets &+= UInt32(truncatingIfNeeded: media.run.payloadBytes)
            if index == 0 { session.video = track } else { session.audio = track }
        }
    }

    func queue(_ client: Client, _ bytes: [UInt8], media: Bool) {
        queue(client, SharedBytes(bytes), media: media)
    }

    func queue(_ client: Client, _ bytes: SharedBytes, media: Bool) {
        guard bytes.count > 0 else { return }
        if client.outgoing.isEmpty { client.lastProgress = now() }
        client.outgoing.append((bytes, 0, media))
        client.outgoingBytes += bytes.count
    }

    /// Writes what is queued for `client`, as much as its socket takes, in one call.
    func flush(_ client: Client, at time: Double) {
        while !client.outgoing.isEmpty {
            let buffers = client.outgoing.prefix(StreamConnection.mostBuffers).map { $0.bytes.slice(from: $0.offset) }
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
    func police(at time: Double) {
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
        idle += pushedOut
        pushedOut = 0
        if idle > 0 {
            log.info(
                "rtsp client hung up: connected without asking for the stream",
                [("clients", .int(idle)), ("after_s", .int(Int(Self.grace)))])
        }
    }

    /// A sender report for each of `session`'s media (and with `bye`, a goodbye), mapping
    /// `mediaTime` (nanoseconds; nil: now) to the wall clock.
    func report(_ client: Client, _ session: Session, bye: Bool, mediaTime: Int64? = nil) {
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
    func goodbye(_ client: Client, _ session: Session) {
        report(client, session, bye: true)
        session.playing = false
    }

    /// A client's connection closes.
    func ended(_ client: Client) {
        if let session = client.session, session.playing {
            log.info(
                "rtsp client left",
                [("address", .string(client.address)), ("watched_s", .int(Int(now() - session.started)))])
        }
    }

    /// How many clients are connected now (tests).
    var clientCount: Int { clients.count }
}
