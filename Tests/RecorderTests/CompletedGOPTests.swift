import Media
import TestSupport
import Testing

@testable import Recorder

/// The end of a GOP is found once, where the ring groups the samples: each sample says which
/// GOP it completed (its keyframe ended the one before), and the clip takes its GOPs from
/// there — the live view too (`Pipeline`), so the two never disagree on where a GOP ends.
@Suite struct CompletedGOPTests {
    /// 30 fps from 0 for `frames` frames, a keyframe every second; an event from 4 s (the
    /// pre-roll's GOPs go to the clip with the start), its post-roll over at 7 s; what each
    /// sample completed, and the GOPs each sample sent to the clip.
    func run(frames: Int) -> (completed: [(frame: Int, gop: GOP)], sent: [(frame: Int, gop: GOP)]) {
        var recorder = ClipRecorder(preRoll: .s(2), maxBytes: 1 << 30)
        var completed: [(frame: Int, gop: GOP)] = []
        var sent: [(frame: Int, gop: GOP)] = []
        for i in 0..<frames {
            let t = Timestamp(frameIndex: Int64(i), rate: Rational(30, 1))
            if i == 120 { _ = recorder.handle(.start(trigger: t, confirmedAt: t, score: 0.1)) }
            if i == 210 { _ = recorder.handle(.end(at: t, lastMotion: .s(5), peakScore: 0.1, parts: 1)) }
            recorder.noteFrame(score: 0.1, runStart: nil)
            let result = recorder.handle(
                EncodedSample(data: [UInt8(i & 0xFF), 1, 2], pts: t, dts: t, isKeyframe: i % 30 == 0))
            if let gop = result.completedGOP { completed.append((i, gop)) }
            for case .video(let gop) in result.commands { sent.append((i, gop)) }
        }
        return (completed, sent)
    }

    @Test func eachGOPIsReportedOnceWhenTheNextKeyframeComes() {
        let (completed, _) = run(frames: 300)
        // Every GOP but the last (still being recorded), at the keyframe after it, ended there.
        #expect(completed.map(\.frame) == Array(stride(from: 30, to: 300, by: 30)))
        #expect(completed.map(\.gop.start.nanoseconds) == completed.map { Int64($0.frame - 30) * 1_000_000_000 / 30 })
        #expect(completed.allSatisfy { $0.gop.end?.nanoseconds == Int64($0.frame) * 1_000_000_000 / 30 })
        #expect(completed.allSatisfy { $0.gop.count == 30 })
    }

    @Test func theClipTakesItsWholeGOPsFromWhatTheSamplesCompleted() {
        let (completed, sent) = run(frames: 300)
        // From the start on, each GOP as it completes — the very GOP the sample reported; the
        // last is cut where the event ends (the frame after it is no keyframe), with the close.
        #expect(sent.map(\.frame) == [120, 150, 180, 210, 211])
        for (frame, gop) in sent.dropLast() {
            #expect(completed.first { $0.frame == frame }?.gop == gop)
        }
        #expect(sent.last?.gop.count == 1 && completed.first { $0.frame == 211 } == nil)
    }
}
