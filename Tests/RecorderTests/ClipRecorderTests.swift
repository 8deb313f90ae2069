import Media
import Testing

@testable import Recorder

/// Feeds the recorder as the agent does: for each frame, the state machine's actions first,
/// then the encoder's output, which lags one frame behind (x264 with VFR timing).
@Suite struct ClipRecorderTests {
    struct Clip {
        var info: ClipInfo
        var gops: [GOP] = []
        /// The number of the frame whose arrival sent each GOP.
        var sentAt: [Int] = []
        var audio: [AudioChunk] = []
        /// Where the last GOP ends, and why the clip closed.
        var closing: (Timestamp?, ClipClosing)?
        var video: [EncodedSample] { gops.flatMap(\.samples) }
    }

    /// 30 fps from t = 0, a keyframe every `gop` frames; `actions[i]` come with frame i;
    /// `audio` adds a 10 ms chunk per 10 ms of capture time (8 kHz mono), `audioLead` early.
    func run(
        frames: Int, gop: Int = 30, preRoll: Double = 3, actions: [Int: [EventAction]],
        audio: Bool = false, finishAt: Timestamp? = nil, outsideTriggerAt: Int? = nil
    ) -> (clips: [Clip], stream: [EncodedSample]) {
        var recorder = ClipRecorder(preRoll: .init(seconds: preRoll), maxBytes: 1 << 30)
        var clips: [Clip] = []
        var stream: [EncodedSample] = []
        var frame = 0
        func apply(_ commands: [ClipCommand]) {
            for c in commands {
                switch c {
                case .open(let info):
                    #expect(clips.last?.closing != nil || clips.isEmpty, "a clip opened while another was open")
                    clips.append(Clip(info: info))
                case .video(let gop):
                    // Whole GOPs, each ended where the next one in the clip starts.
                    #expect(gop.samples.first?.isKeyframe == true)
                    if let previous = clips[clips.count - 1].gops.last { #expect(previous.end == gop.start) }
                    clips[clips.count - 1].gops.append(gop)
                    clips[clips.count - 1].sentAt.append(frame)
                case .audio(let a): clips[clips.count - 1].audio.append(a)
                case .close(let closing):
                    #expect(clips.last?.closing == nil)
                    clips[clips.count - 1].closing = (clips[clips.count - 1].gops.last?.end, closing)
                }
            }
        }
        var pending: EncodedSample?
        var audioTime = Timestamp.zero
        for i in 0..<frames {
            frame = i
            let t = time(i)
            if i == outsideTriggerAt { recorder.outsideTriggerTaken() }
            for action in actions[i] ?? [] { apply(recorder.handle(action)) }
            if let s = pending { apply(recorder.handle(s).commands) }
            let sample = EncodedSample(
                data: [UInt8(i & 0xFF), UInt8(i >> 8)], pts: t, dts: t, isKeyframe: i % gop == 0)
            stream.append(sample)
            pending = sample
            while audio && audioTime <= t {
                apply(
                    recorder.handle(
                        AudioChunk(
                            data: [UInt8](repeating: 1, count: 160), time: audioTime, sampleRate: 8000, channels: 1)))
                audioTime = audioTime + .init(seconds: 0.01)
            }
        }
        frame = frames
        if let s = pending { apply(recorder.handle(s).commands) }
        apply(recorder.finish(at: finishAt))
        return (clips, stream)
    }

    func time(_ i: Int) -> Timestamp { Timestamp(frameIndex: Int64(i), rate: Rational(30, 1)) }

    @Test func clipStartsAtThePreRollKeyframeAndEndsAfterTheEvent() {
        // Motion confirmed at frame 300 (10 s), trigger at frame 297; the event ends at 15 s.
        let (clips, stream) = run(
            frames: 600,
            actions: [
                300: [.start(trigger: time(297), confirmedAt: time(300), score: 0.05)],
                452: [.end(at: time(450), lastMotion: time(300), peakScore: 0.07, parts: 1)],
            ])
        #expect(clips.count == 1)
        let clip = clips[0]
        // Newest keyframe at or before 9.9 − 3 = 6.9 s is the one at 6 s (frame 180).
        #expect(clip.info.start == time(180))
        #expect(clip.info.trigger == time(297))
        #expect(clip.video == Array(stream[180...450]))
        #expect(clip.closing?.0 == time(451))
        #expect(clip.closing?.1 == ClipClosing(reason: .eventEnded, peakScore: 0.07))
    }

    @Test func eachGOPGoesToTheWriterAsSoonAsItIsComplete() {
        let (clips, _) = run(
            frames: 600,
            actions: [
                300: [.start(trigger: time(297), confirmedAt: time(300), score: 0.05)],
                452: [.end(at: time(450), lastMotion: time(300), peakScore: 0.07, parts: 1)],
            ])
        let clip = clips[0]
        // The pre-roll's complete GOPs (6 s to 9 s) go at the trigger; the GOP being recorded
        // then (from 9 s) when the keyframe at 10 s arrives (with frame 301: the encoder's
        // output lags a frame), and so on; the last, cut after frame 450, with the close.
        #expect(clip.gops.map(\.start) == [180, 210, 240, 270, 300, 330, 360, 390, 420, 450].map(time))
        #expect(clip.sentAt == [300, 300, 300, 301, 331, 361, 391, 421, 451, 452])
        #expect(clip.gops.last?.samples.count == 1 && clip.gops.last?.end == time(451))
    }

    @Test func splitPartsJoinWithoutLossOrRepeat() {
        // A 40 s event split at 20 s and 30 s (max_clip 10 s from the trigger at 10 s).
        let (clips, stream) = run(
            frames: 1800,
            actions: [
                300: [.start(trigger: time(300), confirmedAt: time(300), score: 0.05)],
                600: [.split(at: time(600), part: 2)],
                905: [.split(at: time(900) + .init(seconds: 0.1), part: 3)],
                1500: [.end(at: time(1499), lastMotion: time(1400), peakScore: 0.1, parts: 3)],
            ])
        #expect(clips.map(\.info.part) == [1, 2, 3])
        #expect(clips[0].video.first?.pts == time(210))
        #expect(clips[1].info.start == time(600))
        #expect(clips[2].info.start == time(930))  // the first keyframe at or after 30.1 s
        #expect(clips.allSatisfy { $0.video.first?.isKeyframe == true })
        #expect(clips[0].closing?.0 == time(600) && clips[0].closing?.1.reason == .split)
        #expect(clips[1].closing?.0 == time(930))
        // Concatenated, the parts are exactly the stream from the first keyframe to the end.
        #expect(clips.flatMap(\.video) == Array(stream[210...1499]))
        #expect(clips.allSatisfy { $0.info.event == 1 && $0.info.trigger == time(300) })
    }

    /// A motion event split at 20 s (part 2 opens at the keyframe of frame 600, which reaches
    /// the recorder with frame 601). An outside trigger taken at frame 601, before that
    /// keyframe, is taken while part 1 is open: both parts say `external`. Taken one frame
    /// later, part 1 is closed and keeps `motion`; part 2 says `external`. Never taken: both
    /// `motion`.
    @Test(arguments: [
        (Int?.none, [TriggerCause.motion, .motion]), (601, [.external, .external]), (602, [.motion, .external]),
    ])
    func anOutsideTriggerMarksTheClipOpenWhenItIsTaken(at frame: Int?, causes: [TriggerCause]) {
        let (clips, _) = run(
            frames: 900,
            actions: [
                300: [.start(trigger: time(300), confirmedAt: time(300), score: 0.05)],
                600: [.split(at: time(600), part: 2)],
                800: [.end(at: time(799), lastMotion: time(700), peakScore: 0.1, parts: 2)],
            ], outsideTriggerAt: frame)
        #expect(clips.map(\.info.part) == [1, 2])
        #expect(clips.compactMap { $0.closing?.1.cause } == causes)
        #expect(clips.map(\.info.cause) == [.motion, frame == 601 ? .external : .motion], "as each part opened")
    }

    @Test func motionBeforeAnyKeyframeWaitsForOne() {
        // Keyframes every 30 frames from frame 0; the ring is empty when the event starts at
        // frame 0 (the encoder has not produced frame 0 yet).
        let (clips, stream) = run(
            frames: 120,
            actions: [
                0: [.start(trigger: time(0), confirmedAt: time(0), score: 0.02)],
                100: [.end(at: time(99), lastMotion: time(40), peakScore: 0.02, parts: 1)],
            ])
        #expect(clips.count == 1)
        #expect(clips[0].video == Array(stream[0...99]))
    }

    @Test func finishClosesTheOpenClip() {
        let (clips, stream) = run(
            frames: 200,
            actions: [
                150: [.start(trigger: time(150), confirmedAt: time(150), score: 0.02)]
            ], finishAt: time(200))
        #expect(clips.count == 1)
        #expect(clips[0].video == Array(stream[60...199]))
        #expect(clips[0].closing?.0 == time(200))
        #expect(clips[0].closing?.1.reason == .finished)
    }

    @Test func twoEventsMakeTwoClipsSharingNoFrame() {
        let (clips, _) = run(
            frames: 900, preRoll: 5,
            actions: [
                200: [.start(trigger: time(200), confirmedAt: time(200), score: 0.02)],
                300: [.end(at: time(299), lastMotion: time(250), peakScore: 0.02, parts: 1)],
                400: [.start(trigger: time(400), confirmedAt: time(400), score: 0.03)],
                500: [.end(at: time(499), lastMotion: time(450), peakScore: 0.03, parts: 1)],
            ])
        #expect(clips.count == 2)
        #expect(clips[0].video.first?.pts == time(30))
        // Each clip carries its own full pre-roll: the second (trigger 13.3 s, pre-roll 5 s)
        // starts at the keyframe at 8 s, inside the first clip's time — each file stands alone.
        #expect(clips[1].video.first?.pts == time(240))
        #expect(clips[1].info.event == 2)
    }

    @Test func soundIsCutAtSplitsAndAtTheEnd() {
        let (clips, _) = run(
            frames: 900,
            actions: [
                300: [.start(trigger: time(300), confirmedAt: time(300), score: 0.05)],
                450: [.split(at: time(450), part: 2)],
                700: [.end(at: time(699), lastMotion: time(600), peakScore: 0.1, parts: 2)],
            ], audio: true)
        #expect(clips.count == 2)
        for clip in clips {
            let first = clip.audio.first?.time ?? .zero
            let last = clip.audio.last?.end ?? .zero
            #expect(first >= clip.info.start, "sound before the clip's first frame")
            if let end = clip.closing?.0 { #expect(last <= end, "sound after the clip's last frame") }
        }
        // Sound is continuous across the split: part 1 ends where part 2 begins.
        #expect(clips[0].audio.last?.end == clips[1].audio.first?.time)
        #expect(clips[1].audio.first?.time == clips[1].info.start)
        // Part 2 carries sound up to the end of the event (699 → 23.3 s).
        #expect((clips[1].audio.last?.end ?? .zero) >= time(699))
    }

    /// One frame as the pipeline hands it over: its events' actions, the detector's run start,
    /// then its sample (zero-latency encoder); the commands it caused.
    struct Frame {
        var seconds: Double
        var keyframe: Bool
        var runStart: Double? = nil
        var actions: [EventAction] = []
    }

    static func feed(_ recorder: inout ClipRecorder, _ frames: [Frame]) -> [ClipCommand] {
        var commands: [ClipCommand] = []
        for f in frames {
            for action in f.actions { commands += recorder.handle(action) }
            recorder.noteFrame(score: 0.05, runStart: f.runStart.map { .s($0) })
            let t = Timestamp.s(f.seconds)
            commands +=
                recorder.handle(
                    EncodedSample(data: [UInt8](repeating: 7, count: 100), pts: t, dts: t, isKeyframe: f.keyframe)
                ).commands
        }
        return commands
    }

    /// 30 fps from 0 to `until` seconds, a keyframe every second.
    static func steady(until: Double) -> [Frame] {
        (0..<Int(until * 30)).map { Frame(seconds: Double($0) / 30, keyframe: $0 % 30 == 0) }
    }

    /// While a clip is recorded, the ring holds the pre-roll for the next event and the GOP
    /// being recorded, not the event so far: with 3 s of pre-roll and 1 s GOPs it spans less
    /// than 4 s all through a 15 s event whose run of motion goes on (18 s by its end when the
    /// run's start held the ring back).
    @Test func aLongEventDoesNotGrowTheRing() {
        var recorder = ClipRecorder(preRoll: .init(seconds: 3), maxBytes: 1 << 30)
        var frames = Self.steady(until: 20)
        for i in 150..<frames.count { frames[i].runStart = 5 }
        frames[151].actions = [.start(trigger: .s(5), confirmedAt: .s(151.0 / 30), score: 0.05)]
        var longest = 0.0
        for (i, frame) in frames.enumerated() {
            let commands = Self.feed(&recorder, [frame])
            if i == 151 {
                // The clip opened with the whole pre-roll before its trigger.
                let first = commands.compactMap { if case .video(let gop) = $0 { gop } else { nil } }.first
                #expect(first?.start == .s(2))
            }
            if i > 151 { longest = max(longest, recorder.ring.span.seconds) }
        }
        #expect(longest < 4, "the ring spanned \(longest) s while the clip was recorded")
    }

    /// A run of motion whose frames straddle gaps (a busy host dropping frames, a process
    /// stopped and continued): begun at 9.9 s, confirmed by its fourth frame 5.7 s later.
    /// The ring keeps what the run's trigger needs — the clip starts a full pre-roll before
    /// it, never after it, however far the newest frame has moved on.
    @Test(arguments: [1 << 30, 250])
    func aRunOfMotionAcrossGapsKeepsItsPreRoll(maxBytes: Int) throws {
        var recorder = ClipRecorder(preRoll: .init(seconds: 3), maxBytes: maxBytes)
        var frames = Self.steady(until: 9.9)
        frames += [
            Frame(seconds: 9.9, keyframe: false, runStart: 9.9),
            Frame(seconds: 12.0, keyframe: true, runStart: 9.9),
            Frame(seconds: 15.2, keyframe: true, runStart: 9.9),
            Frame(
                seconds: 15.6, keyframe: false, runStart: 9.9,
                actions: [.start(trigger: .s(9.9), confirmedAt: .s(15.6), score: 0.05)]),
        ]
        let commands = Self.feed(&recorder, frames)
        let opened = try #require(
            commands.compactMap { if case .open(let info) = $0 { info } else { nil } }.first, "\(commands)")
        #expect(opened.start <= opened.trigger, "the clip starts after its trigger: \(opened)")
        if maxBytes > 1 << 20 {
            #expect(opened.start == .s(6), "a full pre-roll: the keyframe at or before 6.9 s")
        }
    }

    /// The post-roll of one event runs out on the very frame that confirms the next (frames
    /// came after a gap): the first clip is closed at its end and the second opens — the
    /// second event is not lost, and numbered on.
    @Test func anEventThatStartsAsTheLastOneEndsGetsItsOwnClip() throws {
        var recorder = ClipRecorder(preRoll: .init(seconds: 1), maxBytes: 1 << 30, eventsBefore: 4)
        var frames = Self.steady(until: 3.5)
        frames[60].actions = [.start(trigger: .s(2), confirmedAt: .s(2), score: 0.05)]
        frames += [
            Frame(
                seconds: 7, keyframe: true,
                actions: [
                    .end(at: .s(3.5), lastMotion: .s(2.5), peakScore: 0.05, parts: 1),
                    .start(trigger: .s(7), confirmedAt: .s(7), score: 0.06),
                ]),
            Frame(seconds: 7.5, keyframe: false),
        ]
        var commands = Self.feed(&recorder, frames)
        commands += recorder.finish(at: .s(7.6))
        let kinds = commands.map { c -> String in
            switch c {
            case .open(let info): "open \(info.event)"
            case .close(let closing): "close \(closing.reason)"
            case .video, .audio: "media"
            }
        }.filter { $0 != "media" }
        #expect(kinds == ["open 5", "close eventEnded", "open 6", "close finished"], "\(kinds)")
        // The first clip's last GOP ends at its event's end; the second starts a pre-roll
        // before its trigger (the keyframe at 3 s; nothing came between 3.5 s and 7 s).
        let closeIndex = try #require(kinds.firstIndex(of: "close eventEnded"))
        let beforeClose = commands.prefix { if case .close = $0 { false } else { true } }
        if case .video(let last) = beforeClose.last {
            #expect(last.end == .s(3.5))
        } else {
            Issue.record("\(commands)")
        }
        #expect(closeIndex == 1)
        let second = commands.compactMap { if case .open(let info) = $0, info.event == 6 { info } else { nil } }.first
        #expect(second?.start == .s(3))
        #expect(recorder.events == 6)
    }
}
