import Agent
internal import CGStreamer
import Media
import QuickTime
import Synchronization
import Web

/// Hands the live feed's access units to each RTSP client's `appsrc`, frame by frame as the
/// encoder makes them, on the server's main loop thread (a tick every `tickMilliseconds`): it
/// reads the feed and never waits, and the pipeline never waits for it — a client that does
/// not keep up loses its oldest picture in its `appsrc` (bounded by bytes), the recording
/// nothing.
///
/// Each client starts with the GOP in progress, its keyframe first (so its first picture shows
/// at once), then every frame published after it, on a timeline of its own that starts at 0; a
/// client that fell so far behind that a keyframe came since goes on from the newest one. With
/// a microphone, the sound heard with each frame goes to the client's `audio` source as Opus
/// (`LiveSound`: encoded once for every client, only while there are any). A camera that comes
/// back in the same format goes on under its clients; in another, their streams end, and they
/// ask again.
final class RTSPFeeder: @unchecked Sendable {
    // `@unchecked Sendable`: the clients (their C pointers) are behind `state`'s lock.

    /// One client's media: its sources, and where it is in the feed.
    struct Client: @unchecked Sendable {
        var source: UnsafeMutablePointer<GstElement>
        var audio: UnsafeMutablePointer<GstElement>?
        var number: UInt64?
        var stream: Int?
        /// The feed's time of this client's timeline's zero, and the timeline's time of the
        /// current stream's zero (a new stream goes on where the last one ended).
        var base = Timestamp.zero
        var offset: Int64 = 0
        var end: Int64 = 0
        /// The stream's SPS and PPS, length-prefixed: what goes before each keyframe.
        var parameterSets: [UInt8] = []
        /// The format the client was told (its description, the caps).
        var format: VideoTrackFormat?
        /// The sound's format its `audio` source was given.
        var soundFormat: AudioTrackFormat?
    }

    struct State {
        var feed: LiveFeed?
        var sound: LiveSound?
        var clients: [Client] = []
    }

    /// How many bytes a client's `appsrc` queues before it drops its oldest: a few GOPs of 1080p
    /// (about 0.7 MB a second); 128 MB for `RTSPSink.clientLimit` clients that all stopped reading.
    static let queuedBytes: UInt = 4 << 20
    static let tickMilliseconds: UInt32 = 20

    private let state = Mutex(State())

    /// The feed to read (the agent's run began), and the sound's encoding for it.
    func attach(_ feed: LiveFeed, sound: LiveSound?) {
        state.withLock {
            $0.feed = feed
            $0.sound = sound
        }
    }

    /// A client's media was made: its sources are fed from the next tick on.
    func add(_ source: UnsafeMutablePointer<GstElement>, audio: UnsafeMutablePointer<GstElement>?) {
        state.withLock { $0.clients.append(Client(source: source, audio: audio)) }
    }

    /// How many clients are fed now.
    var clientCount: Int { state.withLock { $0.clients.count } }

    /// Feeds every client what is new, and lets go of those whose media is gone.
    func tick() {
        state.withLock { s in
            guard let feed = s.feed else { return }
            var gone: [Int] = []
            for index in s.clients.indices {
                guard case .frames(let frames) = feed.frames(after: s.clients[index].number) else { continue }
                if !Self.feed(&s.clients[index], frames, sound: s.sound) { gone.append(index) }
            }
            for index in gone.reversed() {
                gst_object_unref(s.clients[index].source)
                if let audio = s.clients[index].audio { gst_object_unref(audio) }
                s.clients.remove(at: index)
            }
        }
    }

    /// Lets go of every client (the server stops).
    func removeAll() {
        state.withLock { s in
            for client in s.clients {
                gst_object_unref(client.source)
                if let audio = client.audio { gst_object_unref(audio) }
            }
            s.clients = []
            s.feed = nil
            s.sound = nil
        }
    }

    /// Pushes `frames` (those after what `client` has); false when its media is gone or its
    /// stream ended.
    private static func feed(_ client: inout Client, _ frames: [LiveFeed.Frame], sound: LiveSound?) -> Bool {
        for frame in frames {
            let sample = frame.sample
            if let stream = client.stream, stream != frame.stream {
                if client.format != frame.movie.video {
                    // The camera came back in another format (size, profile): the client's
                    // stream ends (an RTCP BYE), and it asks again for the new one, whose
                    // description says it — a player told one format mid-stream may not take
                    // another.
                    vigil_rtsp_end(client.source)
                    if let audio = client.audio { vigil_rtsp_end(audio) }
                    return false
                }
                // The same format again: its first frame must be a keyframe.
                guard sample.isKeyframe else { continue }
            }
            if client.stream != frame.stream {
                let video = frame.movie.video
                let record = avcConfiguration(video)
                record.withUnsafeBufferPointer {
                    vigil_rtsp_set_caps(
                        client.source, Int32(video.width), Int32(video.height), $0.baseAddress, $0.count)
                }
                client.base = sample.dts
                client.offset = client.end
                client.stream = frame.stream
                client.format = video
                client.parameterSets =
                    lengthPrefixed(video.sequenceParameterSet) + lengthPrefixed(video.pictureParameterSet)
            }
            let dts = client.offset + (sample.dts - client.base).nanoseconds
            let pts = client.offset + (sample.pts - client.base).nanoseconds
            let prefix = sample.isKeyframe ? client.parameterSets : []
            let result = prefix.withUnsafeBufferPointer { prefix in
                sample.data.withUnsafeBufferPointer {
                    vigil_rtsp_push(
                        client.source, prefix.baseAddress, prefix.count, $0.baseAddress, $0.count,
                        UInt64(max(0, pts)), UInt64(max(0, dts)), UInt64.max, sample.isKeyframe ? 1 : 0)
                }
            }
            guard result == 0 else { return false }
            client.end = max(client.end, dts)
            client.number = frame.number
            if let audio = client.audio, let sound, let format = frame.sound, let run = sound.run(for: frame) {
                if client.soundFormat != format {
                    vigil_rtsp_set_opus_caps(audio, Int32(format.channels))
                    client.soundFormat = format
                }
                var time = client.offset + (run.start - client.base).nanoseconds
                for packet in run.packets {
                    let result = packet.withUnsafeBufferPointer {
                        vigil_rtsp_push(
                            audio, nil, 0, $0.baseAddress, $0.count, UInt64(max(0, time)), UInt64(max(0, time)),
                            UInt64(Self.opusFrame), 1)
                    }
                    guard result == 0 else { return false }
                    time += Self.opusFrame
                }
            }
        }
        return true
    }

    /// An Opus packet's length (LiveSound encodes 20 ms frames), in nanoseconds.
    static let opusFrame: Int64 = 20_000_000

    /// A NAL unit with its 4-byte length before it.
    static func lengthPrefixed(_ unit: [UInt8]) -> [UInt8] {
        let n = unit.count
        return [
            UInt8(truncatingIfNeeded: n >> 24), UInt8(truncatingIfNeeded: n >> 16), UInt8(truncatingIfNeeded: n >> 8),
            UInt8(truncatingIfNeeded: n),
        ] + unit
    }

    /// The `avcC` record (ISO/IEC 14496-15) of a stream with one SPS and one PPS: the caps'
    /// codec_data.
    static func avcConfiguration(_ video: VideoTrackFormat) -> [UInt8] {
        let sps = video.sequenceParameterSet
        let pps = video.pictureParameterSet
        var record: [UInt8] = [
            1, sps.count > 1 ? sps[1] : 0x42, sps.count > 2 ? sps[2] : 0, sps.count > 3 ? sps[3] : 0x1e,
        ]
        record += [0xFF, 0xE1, UInt8(sps.count >> 8), UInt8(sps.count & 0xFF)] + sps
        record += [1, UInt8(pps.count >> 8), UInt8(pps.count & 0xFF)] + pps
        return record
    }
}
