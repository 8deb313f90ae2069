import QuickTime
import Testing

@testable import RTSP

/// The RTSP server's own reading and writing of the protocols: requests within bounds, the
/// transports a player asks for, H.264 and RTCP packets as RFC 6184 and RFC 3550 lay them out.
@Suite struct RTSPProtocolTests {
    static func items(_ reader: inout RTSPReader, _ text: String) -> [RTSPReader.Item] {
        Array(text.utf8).withUnsafeBytes { reader.append($0) }
        var items: [RTSPReader.Item] = []
        while let item = reader.next() { items.append(item) }
        return items
    }

    @Test func requestsAreReadAcrossPiecesAndBetweenInterleavedFrames() throws {
        var reader = RTSPReader()
        #expect(Self.items(&reader, "OPTIONS rtsp://h/cam RTSP/1.0\r\nCSe").isEmpty)
        let first = Self.items(&reader, "q: 1\r\n\r\n")
        guard case .request(let options) = try #require(first.first) else {
            Issue.record("\(first)")
            return
        }
        #expect(options.method == "OPTIONS" && options.header("cseq") == "1" && options.path == "/cam")
        // An RTCP receiver report of 8 bytes in two pieces, then a request with a body.
        var bytes: [UInt8] = [0x24, 1, 0, 8, 1, 2, 3]
        bytes.withUnsafeBytes { reader.append($0) }
        #expect(reader.next() == .interleaved(channel: 1, length: 8))
        bytes = [4, 5, 6, 7, 8] + Array("SET_PARAMETER /cam RTSP/1.0\r\nCSeq: 2\r\nContent-Length: 3\r\n\r\nabc".utf8)
        bytes.withUnsafeBytes { reader.append($0) }
        guard case .request(let set) = reader.next() else {
            Issue.record("no request after the frame")
            return
        }
        #expect(set.method == "SET_PARAMETER" && set.body == Array("abc".utf8) && set.header("CSeq") == "2")
        #expect(reader.next() == nil && reader.held == 0)
    }

    @Test func whatIsNoRequestIsRefusedAndWhatIsTooLongHangsUp() {
        var reader = RTSPReader()
        #expect(Self.items(&reader, "\u{1}\u{2}garbage\r\n\r\n") == [.bad(status: 400, overLimit: false)])
        // Read on after it: the next request is read.
        let next = Self.items(&reader, "OPTIONS * RTSP/1.0\r\nCSeq: 3\r\n\r\n")
        #expect(next.count == 1)
        var long = RTSPReader()
        let line = "OPTIONS * RTSP/1.0\r\nX: " + String(repeating: "A", count: RTSPReader.headLimit)
        #expect(Self.items(&long, line) == [.bad(status: 400, overLimit: true)])
        var body = RTSPReader()
        #expect(
            Self.items(&body, "SET_PARAMETER * RTSP/1.0\r\nCSeq: 1\r\nContent-Length: 2000000000\r\n\r\n")
                == [.bad(status: 413, overLimit: true)])
        // An HTTP request is no RTSP request.
        var http = RTSPReader()
        #expect(Self.items(&http, "GET / HTTP/1.1\r\nHost: x\r\n\r\n") == [.bad(status: 400, overLimit: false)])
    }

    @Test func theTransportsPlayersAskFor() {
        #expect(
            TransportRequest.parse("RTP/AVP/TCP;unicast;interleaved=2-3")
                == TransportRequest(tcp: true, channels: (2, 3)))
        #expect(
            TransportRequest.parse("RTP/AVP;unicast;client_port=5000-5001")
                == TransportRequest(tcp: false, clientPorts: (5000, 5001)))
        // The first one it can serve, past a multicast one.
        #expect(
            TransportRequest.parse("RTP/AVP;multicast;port=6000-6001,RTP/AVP/UDP;unicast;client_port=7000-7001")
                == TransportRequest(tcp: false, clientPorts: (7000, 7001)))
        #expect(TransportRequest.parse("RTP/AVP;unicast") == nil)
        #expect(TransportRequest.parse("RTP/SAVP;unicast;client_port=1-2") == nil)
        #expect(TransportRequest.parse("RTP/AVP/TCP;interleaved=300-301") == nil)
    }

    /// The NAL units the packets carry, put together again as a player does (RFC 6184 §5.8).
    static func depacketized(_ run: PacketRun) -> (units: [[UInt8]], markers: [Bool], sequences: [UInt16]) {
        var units: [[UInt8]] = []
        var markers: [Bool] = []
        var sequences: [UInt16] = []
        var fragment: [UInt8]?
        for range in run.packets {
            let packet = Array(run.bytes[range])
            markers.append(packet[1] & 0x80 != 0)
            sequences.append(UInt16(packet[2]) << 8 | UInt16(packet[3]))
            let payload = Array(packet[12...])
            if payload[0] & 0x1F == 28 {
                let start = payload[1] & 0x80 != 0
                let end = payload[1] & 0x40 != 0
                if start { fragment = [(payload[0] & 0xE0) | (payload[1] & 0x1F)] }
                fragment? += payload[2...]
                if end, let whole = fragment {
                    units.append(whole)
                    fragment = nil
                }
            } else {
                units.append(payload)
            }
        }
        return (units, markers, sequences)
    }

    @Test func anAccessUnitBecomesPacketsAPlayerPutsTogetherAgain() {
        let sps: [UInt8] = [0x67, 0x42, 0xC0, 0x1E, 1, 2]
        let pps: [UInt8] = [0x68, 0xCE, 0x3C, 0x80]
        let delimiter: [UInt8] = [0x09, 0xF0]
        let small: [UInt8] = [0x06] + Array(repeating: 7, count: 20)
        let large: [UInt8] = [0x65] + (0..<5000).map { UInt8(truncatingIfNeeded: $0) }
        func prefixed(_ unit: [UInt8]) -> [UInt8] { bigEndian(UInt32(unit.count)) + unit }
        let data = prefixed(delimiter) + prefixed(small) + prefixed(large)
        var sender = RTPSender(payloadType: 96, ssrc: 0x1234_5678, sequence: 65534, channel: 0)
        var run = PacketRun()
        #expect(H264Packetizer.append(data, before: [sps, pps], timestamp: 90_000, to: &run, &sender))
        let (units, markers, sequences) = Self.depacketized(run)
        // The delimiter is left out; the SPS and PPS go first.
        #expect(units == [sps, pps, small, large])
        #expect(markers.last == true && markers.dropLast().allSatisfy { !$0 })
        #expect(sequences.first == 65534 && sequences == (0..<sequences.count).map { 65534 &+ UInt16($0) })
        #expect(run.firstSequence == 65534 && run.firstTimestamp == 90_000)
        #expect(run.packets.allSatisfy { $0.count - 12 <= H264Packetizer.mostPayload })
        // Each packet's interleaved header says its channel and length.
        for packet in run.packets {
            #expect(run.bytes[packet.lowerBound - 4] == 0x24 && run.bytes[packet.lowerBound - 3] == 0)
            #expect(Int(run.bytes[packet.lowerBound - 2]) << 8 | Int(run.bytes[packet.lowerBound - 1]) == packet.count)
        }
        let moved = run.onChannel(6)
        #expect(run.packets.allSatisfy { moved[$0.lowerBound - 3] == 6 })
        // Lengths that do not add up are no access unit.
        var other = PacketRun()
        #expect(!H264Packetizer.append([0, 0, 0, 9, 0x65], before: [], timestamp: 0, to: &other, &sender))
        #expect(other.isEmpty)
    }

    @Test func aSenderReportIsACompoundPacketOfWholeWords() {
        for bye in [false, true] {
            let bytes = RTCPPackets.report(
                ssrc: 7, ntp: RTCPPackets.ntp(unixSeconds: 1_700_000_000.5), rtp: 1234, packets: 10, octets: 999,
                cname: "vigil@/yard", bye: bye)
            var at = 0
            var types: [UInt8] = []
            while at < bytes.count {
                #expect(bytes[at] >> 6 == 2)
                types.append(bytes[at + 1])
                at += (Int(bytes[at + 2]) << 8 | Int(bytes[at + 3]) + 1) * 4
            }
            #expect(at == bytes.count)
            #expect(types == (bye ? [200, 202, 203] : [200, 202]))
        }
        // NTP: seconds since 1900, and the half second as half of 2³².
        let ntp = RTCPPackets.ntp(unixSeconds: 1.5)
        #expect(ntp >> 32 == 2_208_988_801 && ntp & 0xFFFF_FFFF == 0x8000_0000)
        #expect(RTSPServer.ticks(1_500_000_000, rate: 90_000) == 135_000)
    }

    @Test func theDescriptionNamesBothMedia() {
        let video = VideoTrackFormat(
            width: 320, height: 240, sequenceParameterSet: [0x67, 0x42, 0xC0, 0x1E],
            pictureParameterSet: [0x68, 0xCE, 0x3C, 0x80])
        let sdp = StreamDescription.sdp(video: video, soundChannels: 1, session: 1, title: "Vigil yard")
        #expect(sdp.contains("m=video 0 RTP/AVP 96\r\na=rtpmap:96 H264/90000\r\n"))
        #expect(sdp.contains("packetization-mode=1;profile-level-id=42c01e;sprop-parameter-sets=Z0LAHg==,aM48gA=="))
        #expect(sdp.contains("m=audio 0 RTP/AVP 97\r\na=rtpmap:97 opus/48000/2\r\na=fmtp:97 sprop-stereo=0"))
        #expect(
            StreamDescription.sdp(video: video, soundChannels: nil, session: 1, title: "x").contains("m=audio") == false
        )
    }

    @Test func pathsOfRequests() {
        func path(_ uri: String) -> String { RTSPRequest(method: "OPTIONS", uri: uri, headers: []).path }
        #expect(path("rtsp://127.0.0.1:8554/yard") == "/yard")
        #expect(path("rtsp://[::1]:8554/yard/stream=1?x=1") == "/yard/stream=1")
        #expect(path("rtsp://host") == "/")
        #expect(path("/yard/") == "/yard/")
    }
}
