import Foundation
import Media
import QuickTime
import TestSupport
import Testing

@testable import Agent
@testable import Web

/// Issue 44, 4: HLS for Safari and native players kept to RFC 8216. Chromium asked for the
/// oldest segment of a playlist it had just read and got 404: a segment went the moment it left
/// the list. §6.2.2: it stays available for its duration and the longest playlist that listed
/// it; a playlist lasts three target durations at least.
@Suite struct LivePlaylistRulesTests {
    /// GOPs of a second (10 frames 100 ms apart) from the test stream's, one after another from
    /// 10 s on: `count` of them.
    static func secondGOPs(_ count: Int) throws -> (movie: LiveMovie, gops: [GOP]) {
        let (movie, made) = try LiveViewTests.stream()
        let samples = made.flatMap(\.samples)
        var all: [EncodedSample] = []
        for k in 0..<count {
            for j in 0..<10 {
                let t = Timestamp(nanoseconds: 10_000_000_000 + Int64(k * 10 + j) * 100_000_000)
                let source = samples[(k % 8) * 10 + j]
                all.append(EncodedSample(data: source.data, pts: t, dts: t, isKeyframe: j == 0))
            }
        }
        return (movie, GOP.grouped(all, end: Timestamp(nanoseconds: 10_000_000_000 + Int64(count) * 1_000_000_000)))
    }

    /// The segments `playlist` lists (their sequence numbers) and how long it lasts.
    static func listed(_ playlist: String) -> (sequences: [UInt64], seconds: Double, target: Int) {
        var sequences: [UInt64] = []
        var seconds = 0.0
        var target = 0
        for line in playlist.split(separator: "\n") {
            if line.hasPrefix("#EXTINF:") { seconds += Double(line.dropFirst(8).dropLast()) ?? 0 }
            if line.hasPrefix("#EXT-X-TARGETDURATION:") { target = Int(line.dropFirst(22)) ?? 0 }
            if line.hasPrefix("live/"), line.hasSuffix(".m4s") {
                sequences.append(UInt64(line.dropFirst(5).dropLast(4)) ?? 0)
            }
        }
        return (sequences, seconds, target)
    }

    @Test func aSegmentThatLeftThePlaylistIsServedForItsDurationAndTheLongestPlaylistThenNot() throws {
        let (movie, gops) = try Self.secondGOPs(40)
        let context = SinkContext()
        let site = WebSite(camera: "yard", version: "test", storage: MemoryStorage(), context: context)
        context.live.open()
        context.live.begin(movie)
        // For each segment: when it was last listed, the longest playlist that listed it, when
        // it was first asked for in vain.
        var lastListed: [UInt64: Double] = [:]
        var longest: [UInt64: Double] = [:]
        var gone: [UInt64: Double] = [:]
        var everListed: Set<UInt64> = []
        for (k, gop) in gops.enumerated() {
            context.live.publish(gop)
            let now = Double(k + 1)  // seconds of GOPs published
            let answer = site.respond(HTTPRequest(method: "GET", path: "/live.m3u8"))
            guard case .bytes(let body) = answer.body else { continue }
            let playlist = Self.listed(String(decoding: body, as: UTF8.self))
            if now >= 4 {
                #expect(
                    playlist.seconds >= Double(3 * playlist.target),
                    "a playlist of \(playlist.seconds) s with a target of \(playlist.target) s")
            }
            for sequence in playlist.sequences {
                everListed.insert(sequence)
                lastListed[sequence] = now
                longest[sequence] = max(longest[sequence] ?? 0, playlist.seconds)
            }
            for sequence in everListed where gone[sequence] == nil {
                if site.respond(HTTPRequest(method: "GET", path: "/live/\(sequence).m4s")).status == 404 {
                    gone[sequence] = now
                }
            }
        }
        #expect(!gone.isEmpty, "segments go at last: \(everListed.count) listed")
        for (sequence, goneAt) in gone.sorted(by: { $0.key < $1.key }) {
            // It left the list at the first publish after it was last listed (1 s later).
            let leftAt = (lastListed[sequence] ?? 0) + 1
            let needed = 1 + (longest[sequence] ?? 0)
            #expect(
                goneAt - leftAt >= needed,
                "segment \(sequence) answered 404 \(goneAt - leftAt) s after it left the playlist; RFC 8216 §6.2.2 asks \(needed) s"
            )
        }
    }
}
