import Agent
internal import CGStreamer
import Media
import QuickTime
import Synchronization

/// Hands the live feed's GOPs to each RTSP client's `appsrc`, on the server's main loop thread
/// (a tick every `tickMilliseconds`): it reads the feed and never waits, and the pipeline never
/// waits for it — a client that does not keep up loses its oldest picture in its `appsrc`
/// (bounded by bytes), the recording nothing.
///
/// Each client starts at the newest complete GOP (its keyframe first, so its first picture
/// shows at once) and goes on with every GOP published after it, on a timeline of its own that
/// starts at 0. A camera that comes back in the same format goes on under its clients; in
/// another, their streams end, and they ask again.
final class RTSPFeeder: @unchecked Sendable {
    // `@unchecked Sendable`: the clients (their C pointers) are behind `state`'s lock.

    /// One client's media: its source, and where it is in the feed.
    struct Client: @unchecked Sendable {
        var source: UnsafeMutablePointer<GstElement>
        var sequence: UInt64?
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
    }

    struct State {
        var feed: LiveFeed?
        var clients: [Client] = []
    }

    /// How many bytes a client's `appsrc` queues before it drops its oldest: a few GOPs of 1080p
    /// (about 0.7 MB a second); 128 MB for `RTSPSink.clientLimit` clients that all stopped reading.
    static let queuedBytes: UInt = 4 << 20
    static let tickMilliseconds: UInt32 = 20

    private let state = Mutex(State())

    /// The feed to read (the agent's run began).
    func attach(_ feed: LiveFeed) { state.withLock { $0.feed = feed } }

    /// A client's media was made: its source is fed from the next tick on.
    func add(_ source: UnsafeMutablePointer<GstElement>) {
        state.withLock { $0.clients.append(Client(source: source)) }
    }

    /// How many clients are fed now.
    var clientCount: Int { state.withLock { $0.clients.count } }

    /// Feeds every client what is new, and lets go of those whose media is gone.
    func tick() {
        state.withLock { s in
            guard let feed = s.feed else { return }
            let items = feed.items
            guard !items.isEmpty else { return }
            var gone: [Int] = []
            for index in s.clients.indices where !Self.feed(&s.clients[index], items) {
                gone.append(index)
            }
            for index in gone.reversed() {
                gst_object_unref(s.clients[index].source)
                s.clients.remove(at: index)
            }
        }
    }

    /// Lets go of every client (the server stops).
    func removeAll() {
        state.withLock { s in
            for client in s.clients { gst_object_unref(client.source) }
            s.clients = []
            s.feed = nil
        }
    }

    /// Pushes the GOPs of `items` newer than what `client` has; false when its media is gone.
    private static func feed(_ client: inout Client, _ items: [LiveFeed.Item]) -> Bool {
        let new: ArraySlice<LiveFeed.Item>
        if let sequence = client.sequence {
            new = items.drop { $0.sequence <= sequence }
        } else {
            new = items.suffix(1)
        }
        for item in new {
            if let stream = client.stream, stream != item.stream, client.format != item.movie.video {
                // The camera came back in another format (size, profile): the client's stream
                // ends (an RTCP BYE), and it asks again for the new one, whose description
                // says it — a player told one format mid-stream may not take another.
                vigil_rtsp_end(client.source)
                return false
            }
            if client.stream != item.stream {
                let video = item.movie.video
                let record = avcConfiguration(video)
                record.withUnsafeBufferPointer {
                    vigil_rtsp_set_caps(
                        client.source, Int32(video.width), Int32(video.height), $0.baseAddress, $0.count)
                }
                client.base = item.gop.samples[0].dts
                client.offset = client.end
                client.stream = item.stream
                client.format = video
                client.parameterSets =
                    lengthPrefixed(video.sequenceParameterSet) + lengthPrefixed(video.pictureParameterSet)
            }
            let samples = item.gop.samples
            for (index, sample) in samples.enumerated() {
                let next = index + 1 < samples.count ? samples[index + 1].dts : item.gop.end
                let dts = client.offset + (sample.dts - client.base).nanoseconds
                let pts = client.offset + (sample.pts - client.base).nanoseconds
                let duration = next.map { ($0 - sample.dts).nanoseconds } ?? -1
                let prefix = sample.isKeyframe ? client.parameterSets : []
                let result = prefix.withUnsafeBufferPointer { prefix in
                    sample.data.withUnsafeBufferPointer {
                        vigil_rtsp_push(
                            client.source, prefix.baseAddress, prefix.count, $0.baseAddress, $0.count,
                            UInt64(max(0, pts)), UInt64(max(0, dts)), duration > 0 ? UInt64(duration) : UInt64.max,
                            sample.isKeyframe ? 1 : 0)
                    }
                }
                guard result == 0 else { return false }
                client.end = max(client.end, dts + max(duration, 0))
            }
            client.sequence = item.sequence
        }
        return true
    }

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
