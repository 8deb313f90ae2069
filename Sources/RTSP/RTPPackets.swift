import Media

/// One media's RTP sender (RFC 3550): its payload type, its source identifier, the next
/// sequence number, and the channel its packets carry when interleaved in a client's TCP
/// connection (RFC 2326 §10.12) unless the client chose another.
struct RTPSender: Sendable {
    let payloadType: UInt8
    let ssrc: UInt32
    var sequence: UInt16
    let channel: UInt8
}

/// A frame's RTP packets, made once for every client: each packet preceded by its 4-byte
/// interleaved header (`$`, the sender's channel, the length), one after the other — what a
/// client on TCP is written as it is, in one call; a client on UDP is sent each packet without
/// its header (`packets`: where each RTP packet lies).
struct PacketRun: Sendable {
    var bytes: [UInt8] = []
    var packets: [Range<Int>] = []
    /// The first packet's sequence number and timestamp (RTP-Info), and the RTP payload bytes.
    var firstSequence: UInt16 = 0
    var firstTimestamp: UInt32 = 0
    var payloadBytes = 0

    var isEmpty: Bool { packets.isEmpty }

    /// Appends one packet whose payload is `parts` one after the other.
    mutating func append(
        _ sender: inout RTPSender, marker: Bool, timestamp: UInt32, _ parts: UnsafeRawBufferPointer...
    ) {
        let payload = parts.reduce(0) { $0 + $1.count }
        let length = 12 + payload
        if packets.isEmpty {
            firstSequence = sender.sequence
            firstTimestamp = timestamp
        }
        bytes.reserveCapacity(bytes.count + 4 + length)
        // The interleaved header, then RTP's: version 2, the marker and payload type, the
        // sequence number, the timestamp, the source.
        withUnsafeBytes(of: (UInt8(0x24), sender.channel, UInt16(length).bigEndian)) { bytes.append(contentsOf: $0) }
        let start = bytes.count
        let header = (
            UInt8(0x80), (marker ? 0x80 : 0) | sender.payloadType, sender.sequence.bigEndian, timestamp.bigEndian,
            sender.ssrc.bigEndian
        )
        withUnsafeBytes(of: header) { bytes.append(contentsOf: $0.prefix(12)) }
        for part in parts { bytes.append(contentsOf: part) }
        packets.append(start..<bytes.count)
        payloadBytes += payload
        sender.sequence &+= 1
    }

    /// The same packets with another interleaved channel (a client that chose its own).
    func onChannel(_ channel: UInt8) -> [UInt8] {
        var copy = bytes
        for packet in packets { copy[packet.lowerBound - 3] = channel }
        return copy
    }
}

func bigEndian(_ value: UInt32) -> [UInt8] {
    [UInt8(value >> 24), UInt8((value >> 16) & 0xFF), UInt8((value >> 8) & 0xFF), UInt8(value & 0xFF)]
}

/// H.264 access units as RTP packets (RFC 6184, packetization mode 1): a NAL unit that fits
/// in one packet goes alone, a larger one in fragments (FU-A); the last packet of the access
/// unit has the marker bit.
enum H264Packetizer {
    /// The largest RTP payload: under the usual 1500-byte MTU with IP, UDP and RTP headers.
    static let mostPayload = 1400

    /// Appends the packets of the access unit `data` (length-prefixed NAL units), with `before`
    /// (the SPS and PPS before a keyframe) ahead of its own units; false when `data` is no
    /// access unit.
    @discardableResult
    static func append(
        _ data: [UInt8], before: [[UInt8]], timestamp: UInt32, to run: inout PacketRun, _ sender: inout RTPSender
    ) -> Bool {
        guard let ranges = AVCC.units(data) else { return false }
        var all: [(unit: [UInt8], range: Range<Int>)] = before.filter { !$0.isEmpty }.map { ($0, $0.indices) }
        for range in ranges where data[range.lowerBound] & 0x1F != NALUnitType.accessUnitDelimiter {
            all.append((data, range))
        }
        for (index, item) in all.enumerated() {
            let last = index == all.count - 1
            item.unit.withUnsafeBytes { raw in
                let unit = UnsafeRawBufferPointer(rebasing: raw[item.range])
                if unit.count <= mostPayload {
                    run.append(&sender, marker: last, timestamp: timestamp, unit)
                    return
                }
                let header = unit[0]
                let indicator = (header & 0xE0) | 28
                var at = 1
                while at < unit.count {
                    let end = min(unit.count, at + mostPayload - 2)
                    let first = at == 1
                    let final = end == unit.count
                    let fuHeader = (first ? 0x80 : 0) | (final ? 0x40 : 0) | (header & 0x1F)
                    withUnsafeBytes(of: (indicator, fuHeader)) { fu in
                        run.append(
                            &sender, marker: last && final, timestamp: timestamp, fu,
                            UnsafeRawBufferPointer(rebasing: unit[at..<end]))
                    }
                    at = end
                }
            }
        }
        return true
    }
}

/// RTCP packets (RFC 3550 §6): a sender report with the source's name, which lets a player
/// put the picture and the sound on one clock, and the goodbye that ends a stream.
enum RTCPPackets {
    /// A compound packet: the sender report (`ntp`: seconds since 1900 in 32.32 fixed point;
    /// `rtp`: the media's timestamp at that instant; what was sent to this client), the
    /// source description with its CNAME, and with `bye` a goodbye.
    static func report(
        ssrc: UInt32, ntp: UInt64, rtp: UInt32, packets: UInt32, octets: UInt32, cname: String, bye: Bool
    ) -> [UInt8] {
        var bytes: [UInt8] = [0x80, 200, 0, 6]
        bytes += bigEndian(ssrc) + bigEndian(UInt32(ntp >> 32)) + bigEndian(UInt32(ntp & 0xFFFF_FFFF))
        bytes += bigEndian(rtp) + bigEndian(packets) + bigEndian(octets)
        // SDES: one chunk, the CNAME item, padded with zeros to a 32-bit boundary.
        let name = Array(cname.utf8.prefix(255))
        var chunk = bigEndian(ssrc) + [1, UInt8(name.count)] + name + [0]
        while chunk.count % 4 != 0 { chunk.append(0) }
        bytes += [0x81, 202] + Array(bigEndian(UInt32(chunk.count / 4)).suffix(2)) + chunk
        if bye { bytes += [0x81, 203, 0, 1] + bigEndian(ssrc) }
        return bytes
    }

    /// `seconds` since 1970 as NTP's 32.32 fixed point since 1900.
    static func ntp(unixSeconds seconds: Double) -> UInt64 {
        let since1900 = seconds + 2_208_988_800
        let whole = since1900.rounded(.down)
        return UInt64(whole) << 32 | UInt64((since1900 - whole) * 4_294_967_296) & 0xFFFF_FFFF
    }
}

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
    /// One media's packets: where each lies, and their bytes in memory every write shares.
    struct Media: Sendable {
        let run: PacketRun
        let bytes: SharedBytes
    }

    let isKeyframe: Bool
    /// The picture's media time (with the server's offset), in nanoseconds.
    let presented: Int64
    /// The picture's packets (track 0), and the sound's (track 1) when it has any.
    let media: [Media?]

    init(isKeyframe: Bool, presented: Int64, video: PacketRun, audio: PacketRun?) {
        self.isKeyframe = isKeyframe
        self.presented = presented
        media = [video, audio].map { run in
            run.flatMap { $0.isEmpty ? nil : Media(run: $0, bytes: SharedBytes($0.bytes)) }
        }
    }

    var video: PacketRun? { media[0]?.run }
    var audio: PacketRun? { media[1]?.run }
}
