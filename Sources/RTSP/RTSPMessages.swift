import Media
import QuickTime
import Web

/// One RTSP request (RFC 2326), as a client sent it.
struct RTSPRequest: Equatable, Sendable {
    var method: String
    var uri: String
    /// The header lines, names as sent.
    var headers: [(name: String, value: String)]
    var body: [UInt8] = []

    /// The first header named `name` (any case), its value without spaces around it.
    func header(_ name: String) -> String? {
        headers.first { $0.name.lowercased() == name.lowercased() }?.value
    }

    static func == (a: RTSPRequest, b: RTSPRequest) -> Bool {
        a.method == b.method && a.uri == b.uri && a.body == b.body
            && a.headers.map { "\($0.name): \($0.value)" } == b.headers.map { "\($0.name): \($0.value)" }
    }

    /// The path of `uri` (`rtsp://host:port/path?query` or `/path`), without the query.
    var path: String {
        var rest = Substring(uri)
        if !rest.hasPrefix("/"), let colon = rest.firstIndex(of: ":"),
            rest[colon...].hasPrefix("://")
        {
            rest = rest[rest.index(colon, offsetBy: 3)...]
            rest = rest.firstIndex(of: "/").map { rest[$0...] } ?? "/"
        }
        if let query = rest.firstIndex(of: "?") { rest = rest[..<query] }
        return String(rest)
    }
}

/// Reads what a client sends into requests and interleaved frames (RTCP receiver reports over
/// TCP, `$`, a channel, a 16-bit length), within bounds: a request's head (its line and headers)
/// of `headLimit` bytes at most, a body of `bodyLimit` — a client that sends more is refused
/// and hung up on, holding no more than that.
struct RTSPReader: Sendable {
    static let headLimit = 16 * 1024
    static let bodyLimit = 16 * 1024

    enum Item: Equatable, Sendable {
        case request(RTSPRequest)
        /// An interleaved frame, dropped: its channel and length.
        case interleaved(channel: UInt8, length: Int)
        /// What cannot be read as a request: the status to answer with, and whether the
        /// client sent more than any request holds (it is hung up on at once).
        case bad(status: Int, overLimit: Bool)
    }

    private var buffer: [UInt8] = []
    private var start = 0
    /// Where the search for the head's end goes on.
    private var scanned = 0
    /// A frame's bytes still to drop.
    private var skipping = 0

    /// Bytes held, not yet read into an item.
    var held: Int { buffer.count - start }

    mutating func append(_ bytes: UnsafeRawBufferPointer) {
        if overLimit { return }
        if skipping > 0 {
            let dropped = min(skipping, bytes.count)
            skipping -= dropped
            buffer.append(contentsOf: bytes[dropped...])
        } else {
            buffer.append(contentsOf: bytes)
        }
    }

    /// Whether it read more than a request holds: it reads nothing more.
    private(set) var overLimit = false

    /// The next item, or nil until more comes.
    mutating func next() -> Item? {
        defer { compact() }
        guard !overLimit, start < buffer.count else { return nil }
        if buffer[start] == 0x24 {  // "$"
            guard buffer.count - start >= 4 else { return nil }
            let channel = buffer[start + 1]
            let length = Int(buffer[start + 2]) << 8 | Int(buffer[start + 3])
            let available = buffer.count - start - 4
            if available >= length {
                start += 4 + length
            } else {
                skipping = length - available
                start = buffer.count
            }
            scanned = start
            return .interleaved(channel: channel, length: length)
        }
        // A request's head ends with an empty line.
        var end: Int?
        var index = max(scanned, start)
        while index + 1 < buffer.count {
            if buffer[index] == 0x0A {
                if buffer[index + 1] == 0x0A {
                    end = index + 2
                    break
                }
                if buffer[index + 1] == 0x0D, index + 2 < buffer.count, buffer[index + 2] == 0x0A {
                    end = index + 3
                    break
                }
            }
            index += 1
        }
        guard let end else {
            scanned = max(start, buffer.count - 2)
            guard held > Self.headLimit else { return nil }
            overLimit = true
            return .bad(status: 400, overLimit: true)
        }
        guard end - start <= Self.headLimit else {
            overLimit = true
            return .bad(status: 400, overLimit: true)
        }
        guard let head = Self.head(buffer[start..<end]) else {
            start = end
            scanned = start
            return .bad(status: 400, overLimit: false)
        }
        var length = 0
        if let text = head.header("Content-Length") {
            guard let n = Int(text), n >= 0 else {
                start = end
                scanned = start
                return .bad(status: 400, overLimit: false)
            }
            guard n <= Self.bodyLimit else {
                overLimit = true
                return .bad(status: 413, overLimit: true)
            }
            length = n
        }
        guard buffer.count - end >= length else {
            scanned = end
            return nil
        }
        var request = head
        request.body = Array(buffer[end..<end + length])
        start = end + length
        scanned = start
        return .request(request)
    }

    private mutating func compact() {
        if start == buffer.count {
            buffer.removeAll(keepingCapacity: buffer.capacity <= 65536)
            start = 0
            scanned = 0
        } else if start > 4096 {
            buffer.removeFirst(start)
            scanned -= start
            start = 0
        }
    }

    /// The request line and headers, or nil when they do not read as RTSP.
    static func head(_ bytes: ArraySlice<UInt8>) -> RTSPRequest? {
        // Headers are ASCII, UTF-8 at most; anything else is no request.
        guard let text = String(validating: bytes, as: UTF8.self) else { return nil }
        let lines = text.split(omittingEmptySubsequences: true, whereSeparator: { $0 == "\n" || $0 == "\r\n" })
            .map { $0.hasSuffix("\r") ? $0.dropLast() : $0 }
        guard let first = lines.first else { return nil }
        let parts = first.split(separator: " ", omittingEmptySubsequences: true)
        guard parts.count == 3, parts[2].hasPrefix("RTSP/1."),
            parts[0].allSatisfy({ $0.isASCII && ($0.isUppercase || $0 == "_") }), !parts[0].isEmpty
        else { return nil }
        var headers: [(name: String, value: String)] = []
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { return nil }
            let name = line[..<colon]
            guard !name.isEmpty, name.allSatisfy({ $0.isASCII && !$0.isWhitespace }) else { return nil }
            headers.append((String(name), String(line[line.index(after: colon)...]).trimmingSpaces))
        }
        return RTSPRequest(method: String(parts[0]), uri: String(parts[1]), headers: headers)
    }
}

/// An RTSP response's bytes.
enum RTSPResponse {
    static let reasons: [Int: String] = [
        200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found", 405: "Method Not Allowed",
        413: "Request Entity Too Large", 454: "Session Not Found", 455: "Method Not Valid in This State",
        459: "Aggregate Operation Not Allowed", 461: "Unsupported Transport", 501: "Not Implemented",
        503: "Service Unavailable", 505: "RTSP Version Not Supported",
    ]

    static func bytes(
        _ status: Int, cseq: String?, _ headers: [(String, String)] = [], body: [UInt8] = []
    ) -> [UInt8] {
        var text = "RTSP/1.0 \(status) \(reasons[status] ?? "Error")\r\n"
        // The client's sequence number, unless it is no number (a header line must stay one).
        if let cseq, !cseq.isEmpty, cseq.count <= 16, cseq.allSatisfy(\.isNumber) { text += "CSeq: \(cseq)\r\n" }
        text += "Server: Vigil\r\n"
        for (name, value) in headers { text += "\(name): \(value)\r\n" }
        if !body.isEmpty { text += "Content-Length: \(body.count)\r\n" }
        text += "\r\n"
        return Array(text.utf8) + body
    }
}

/// What a client asks for in SETUP's `Transport` header: RTP over its TCP connection
/// (interleaved, on two channels) or over UDP to two of its ports.
struct TransportRequest: Equatable, Sendable {
    var tcp: Bool
    var channels: (rtp: UInt8, rtcp: UInt8)?
    var clientPorts: (rtp: Int, rtcp: Int)?

    static func == (a: TransportRequest, b: TransportRequest) -> Bool {
        a.tcp == b.tcp && a.channels?.rtp == b.channels?.rtp && a.channels?.rtcp == b.channels?.rtcp
            && a.clientPorts?.rtp == b.clientPorts?.rtp && a.clientPorts?.rtcp == b.clientPorts?.rtcp
    }

    /// The first of the header's choices this server can serve (unicast RTP/AVP over TCP, or
    /// over UDP with the client's ports); nil when there is none.
    static func parse(_ header: String) -> TransportRequest? {
        for choice in header.split(separator: ",") {
            let parameters = choice.split(separator: ";").map { String($0).trimmingSpaces }
            guard let profile = parameters.first?.uppercased() else { continue }
            let tcp: Bool
            switch profile {
            case "RTP/AVP/TCP": tcp = true
            case "RTP/AVP", "RTP/AVP/UDP": tcp = false
            default: continue
            }
            if parameters.contains(where: { $0.lowercased() == "multicast" }) { continue }
            var request = TransportRequest(tcp: tcp)
            var usable = true
            for parameter in parameters.dropFirst() {
                let pair = parameter.split(separator: "=", maxSplits: 1).map(String.init)
                guard pair.count == 2 else { continue }
                switch pair[0].lowercased() {
                case "interleaved":
                    guard let range = Self.range(pair[1]), range.0 <= 255, range.1 <= 255 else {
                        usable = false
                        break
                    }
                    request.channels = (UInt8(range.0), UInt8(range.1))
                case "client_port":
                    guard let range = Self.range(pair[1]), (1...65535).contains(range.0), (1...65535).contains(range.1)
                    else {
                        usable = false
                        break
                    }
                    request.clientPorts = (range.0, range.1)
                default: break
                }
            }
            guard usable, tcp || request.clientPorts != nil else { continue }
            return request
        }
        return nil
    }

    /// `a-b` or `a` (then b is a + 1).
    private static func range(_ text: String) -> (Int, Int)? {
        let parts = text.split(separator: "-", maxSplits: 1)
        guard let a = parts.first.flatMap({ Int($0) }), a >= 0 else { return nil }
        if parts.count == 1 { return (a, a + 1) }
        guard let b = Int(parts[1]), b >= 0 else { return nil }
        return (a, b)
    }
}

/// The stream's description (SDP, RFC 8866) as DESCRIBE answers it: H.264 (RFC 6184,
/// packetization mode 1, the SPS and PPS in `sprop-parameter-sets`) as track 0, and with a
/// microphone Opus (RFC 7587) as track 1.
enum StreamDescription {
    static let videoPayloadType: UInt8 = 96
    static let audioPayloadType: UInt8 = 97

    static func sdp(video: VideoTrackFormat, soundChannels: Int?, session: UInt64, title: String) -> String {
        let sps = video.sequenceParameterSet
        let profile = sps.count >= 4 ? Array(sps[1...3]).lowercaseHex : "42001e"
        var lines = [
            "v=0",
            "o=- \(session) 1 IN IP4 0.0.0.0",
            "s=\(title.filter { $0 != "\r" && $0 != "\n" })",
            "c=IN IP4 0.0.0.0",
            "t=0 0",
            "a=tool:Vigil",
            "a=type:broadcast",
            "a=control:*",
            "a=range:npt=now-",
            "m=video 0 RTP/AVP \(videoPayloadType)",
            "a=rtpmap:\(videoPayloadType) H264/90000",
            "a=fmtp:\(videoPayloadType) packetization-mode=1;profile-level-id=\(profile);sprop-parameter-sets="
                + Base64.encode(sps) + "," + Base64.encode(video.pictureParameterSet),
            "a=framesize:\(videoPayloadType) \(video.width)-\(video.height)",
            "a=control:stream=0",
        ]
        if let soundChannels {
            lines += [
                "m=audio 0 RTP/AVP \(audioPayloadType)",
                "a=rtpmap:\(audioPayloadType) opus/48000/2",
                "a=fmtp:\(audioPayloadType) sprop-stereo=\(soundChannels > 1 ? 1 : 0)",
                "a=control:stream=1",
            ]
        }
        return lines.joined(separator: "\r\n") + "\r\n"
    }
}
