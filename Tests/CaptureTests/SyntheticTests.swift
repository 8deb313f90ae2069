import Capture
import Media
import POSIX
import TestSupport
import Testing

func bytes(_ plane: PlaneView) -> [UInt8] {
    (0..<plane.height).flatMap { Array(plane.row($0)) }
}

func picture(_ frame: VideoFrame) -> [[UInt8]] {
    (0..<frame.format.planes.count).map { bytes(frame.plane($0)) }
}

let short = Timestamp.Duration(seconds: 1)

@Suite struct SyntheticSceneTests {
    @Test func sameSeedSameFramesOtherSeedOtherFrames() throws {
        let settings = SyntheticScene(width: 64, height: 48, seed: 42, schedule: .demo(), duration: short)
        let a = try SyntheticSource(scene: settings)
        let b = try SyntheticSource(scene: settings)
        var other = settings
        other.seed = 43
        let c = try SyntheticSource(scene: other)
        for _ in 0..<10 {
            let fa = try #require(try a.nextFrame()), fb = try #require(try b.nextFrame()),
                fc = try #require(try c.nextFrame())
            #expect(picture(fa) == picture(fb))
            #expect(picture(fa) != picture(fc))
        }
        // Any frame can be rendered again, in any order.
        #expect(picture(a.frame(3)) == picture(b.frame(3)))
        // Consecutive frames differ by their noise.
        #expect(picture(a.frame(4)) != picture(a.frame(5)))
    }

    @Test(arguments: [(Rational(30, 1), 30), (Rational(247, 10), 25), (Rational(30000, 1001), 30)])
    func framesTimestampsAndSequence(rate: Rational, count: Int) throws {
        let settings = SyntheticScene(
            width: 32, height: 16, frameRate: rate, schedule: .empty, duration: short,
            startTime: Timestamp(seconds: 100))
        let source = try SyntheticSource(scene: settings)
        var frames: [VideoFrame] = []
        while let f = try source.nextFrame() { frames.append(f) }
        #expect(frames.count == count)
        #expect(settings.frameCount == Int64(count))
        #expect(frames.map(\.sequence) == (0..<count).map { UInt64($0) })
        for (n, f) in frames.enumerated() {
            #expect(
                f.timestamp == Timestamp(seconds: 100)
                    + Timestamp.Duration(nanoseconds: Timestamp(frameIndex: Int64(n), rate: rate).nanoseconds))
        }
        #expect(try source.nextFrame() == nil)
        #expect(source.format.frameRate == rate)
    }

    /// Sensor noise has the requested deviation: the difference of two frames of a still
    /// scene has a deviation of sigma·√2.
    @Test(arguments: [2.0, 5.0])
    func noiseHasTheRequestedSigma(sigma: Double) throws {
        let source = try SyntheticSource(
            scene: SyntheticScene(width: 320, height: 240, noiseSigma: sigma, schedule: .empty, duration: short))
        let a = bytes(source.frame(0).luma), b = bytes(source.frame(1).luma)
        let diffs = zip(a, b).map { Double(Int($0) - Int($1)) }
        let mean = diffs.reduce(0, +) / Double(diffs.count)
        let deviation = (diffs.reduce(0) { $0 + ($1 - mean) * ($1 - mean) } / Double(diffs.count)).squareRoot()
        #expect(abs(mean) < 0.1)
        #expect(abs(deviation - sigma * 2.0.squareRoot()) < 0.1 * sigma * 2.0.squareRoot(), "deviation \(deviation)")
    }

    /// Ground truth: with no noise, a frame differs from the empty scene exactly where, and
    /// exactly when, the schedule says an object is.
    @Test func objectsAreWhereAndWhenTheScheduleSays() throws {
        let s = { (seconds: Double) in Timestamp.Duration(seconds: seconds) }
        let schedule = SceneSchedule(objects: [
            SceneObject(enter: s(0.1), leave: s(0.9), path: .leftToRight(y: 0.5), width: 0.25, height: 0.4),
            SceneObject(
                enter: s(0.3), leave: s(1.1), path: .bottomToTop(x: 0.3), width: 0.2, height: 0.3, brightness: 30),
            SceneObject(enter: s(0.5), leave: s(0.7), path: .still(x: 0.8, y: 0.2)),
            SceneObject(enter: s(0.2), leave: s(0.6), path: .rightToLeft(y: 0.1)),
            SceneObject(enter: s(0.0), leave: s(0.5), path: .topToBottom(x: 0.9)),
        ])
        let settings = SyntheticScene(width: 64, height: 48, noiseSigma: 0, schedule: schedule, duration: s(1.2))
        var empty = settings
        empty.schedule = .empty
        let scene = try SyntheticSource(scene: settings), background = try SyntheticSource(scene: empty)
        var seen = Set<Int>()
        for n in 0..<36 {
            let frame = scene.frame(Int64(n)), plain = background.frame(Int64(n))
            let t = frame.timestamp
            let visible = settings.visibleObjects(at: t)
            seen.formUnion(visible)
            let rects = visible.compactMap { settings.objectRect($0, at: t) }
            for i in schedule.objects.indices {
                let o = schedule.objects[i]
                let inTime = t - settings.startTime >= o.enter && t - settings.startTime < o.leave
                #expect(!visible.contains(i) || inTime, "object \(i) visible at \(t) outside its schedule")
            }
            let y = frame.luma, p = plain.luma
            var changed = 0
            for row in 0..<48 {
                for x in 0..<64 where y.row(row)[x] != p.row(row)[x] {
                    changed += 1
                    #expect(
                        rects.contains { x >= $0.x && x < $0.x + $0.width && row >= $0.y && row < $0.y + $0.height },
                        "frame \(n): pixel (\(x), \(row)) changed outside every object")
                }
            }
            #expect((changed > 0) == !visible.isEmpty, "frame \(n)")
        }
        #expect(seen == Set(schedule.objects.indices))
    }

    /// A moving object's first pixel shows on the first frame at least a pixel's travel
    /// after `enter`, and its last pixel on the last frame before `leave`.
    @Test func enterAndLeaveTimesBoundVisibility() throws {
        let schedule = SceneSchedule(objects: [
            SceneObject(
                enter: Timestamp.Duration(seconds: 0.5), leave: Timestamp.Duration(seconds: 2.5),
                path: .leftToRight(y: 0.5), width: 0.25)
        ])
        let settings = SyntheticScene(
            width: 64, height: 48, schedule: schedule, duration: Timestamp.Duration(seconds: 3))
        let times = (0..<90).map { settings.timestamp(ofFrame: Int64($0)) }
        let shown = times.filter { !settings.visibleObjects(at: $0).isEmpty }
        let first = try #require(shown.first), last = try #require(shown.last)
        let frame = Timestamp.Duration(seconds: 1.0 / 30)
        // 80 pixels of travel in 2 s: one pixel takes 25 ms, less than a frame.
        #expect(first > Timestamp(seconds: 0.5) && first - Timestamp(seconds: 0.5) <= frame + frame)
        #expect(last < Timestamp(seconds: 2.5) && Timestamp(seconds: 2.5) - last <= frame)
        #expect(shown.count == times.filter { $0 >= first && $0 <= last }.count)
        let appearance = try #require(settings.appearances(from: .zero, to: Timestamp(seconds: 3)).first)
        #expect(
            appearance == ObjectAppearance(object: 0, enter: Timestamp(seconds: 0.5), leave: Timestamp(seconds: 2.5)))
    }

    @Test func demoScheduleRepeatsEveryMinute() throws {
        let settings = SyntheticScene(schedule: .demo(), startTime: Timestamp(seconds: 1000))
        let appearances = settings.appearances(from: Timestamp(seconds: 1000), to: Timestamp(seconds: 1130))
        #expect(appearances.map(\.enter.seconds) == [1005, 1025, 1045, 1065, 1085, 1105, 1125])
        #expect(appearances.map(\.object) == [0, 1, 2, 0, 1, 2, 0])
        // An event about every 20 s.
        for (a, b) in zip(appearances, appearances.dropFirst()) {
            #expect(b.enter - a.enter == Timestamp.Duration(seconds: 20))
        }
        let lights = settings.lightChanges(from: Timestamp(seconds: 1000), to: Timestamp(seconds: 1080))
        #expect(
            lights == [
                LightChangeInterval(start: Timestamp(seconds: 1015), end: Timestamp(seconds: 1018), delta: 40),
                LightChangeInterval(start: Timestamp(seconds: 1075), end: Timestamp(seconds: 1078), delta: 40),
            ])
        #expect(settings.visibleObjects(at: Timestamp(seconds: 1067)) == [0])
        #expect(settings.visibleObjects(at: Timestamp(seconds: 1020)) == [])
        #expect(SceneSchedule.demo(lightChange: false).lightChanges.isEmpty)
        try settings.validate()
    }

    @Test func lightChangeShiftsEveryLumaSample() throws {
        let s = { (seconds: Double) in Timestamp.Duration(seconds: seconds) }
        let settings = SyntheticScene(
            width: 64, height: 48, noiseSigma: 0,
            schedule: SceneSchedule(lightChanges: [LightChange(start: s(0.5), end: s(0.8), delta: 30)]),
            duration: s(1))
        let source = try SyntheticSource(scene: settings)
        let before = bytes(source.frame(0).luma), during = bytes(source.frame(20).luma),
            after = bytes(source.frame(25).luma)
        #expect(settings.lightOffset(at: source.frame(20).timestamp) == 30)
        #expect(zip(before, during).allSatisfy { Int($1) == min(Int($0) + 30, 255) })
        #expect(before == after)
        // Chroma is left alone.
        #expect(bytes(source.frame(0).plane(1)) == bytes(source.frame(20).plane(1)))
    }

    /// Padded rows hold the same picture; NV12 and I420 carry the same chroma.
    @Test func stridesAndPixelFormats() throws {
        let tight = try SyntheticSource(
            scene: SyntheticScene(width: 64, height: 48, schedule: .demo(), duration: short))
        let padded = try SyntheticSource(
            scene: SyntheticScene(width: 64, height: 48, bytesPerLine: 77, schedule: .demo(), duration: short))
        let planar = try SyntheticSource(
            scene: SyntheticScene(
                width: 64, height: 48, pixelFormat: .i420, bytesPerLine: 70, schedule: .demo(), duration: short))
        #expect(padded.format.planes.map(\.stride) == [77, 77])
        #expect(planar.format.planes.map(\.stride) == [70, 35, 35])
        let a = tight.frame(2), b = padded.frame(2), c = planar.frame(2)
        #expect(picture(a) == picture(b))
        #expect(bytes(a.luma) == bytes(c.luma))
        let uv = bytes(a.plane(1))
        #expect(bytes(c.plane(1)) + bytes(c.plane(2)) != [])
        #expect(stride(from: 0, to: uv.count, by: 2).map { uv[$0] }.count == bytes(c.plane(1)).count)
    }

    @Test func realtimePacingDeliversNoFrameEarly() throws {
        let source = try SyntheticSource(
            scene: SyntheticScene(
                width: 32, height: 16, frameRate: Rational(20, 1), schedule: .empty,
                duration: Timestamp.Duration(seconds: 0.3)), realtime: true)
        // In real time a frame is stamped with the monotonic time it is due, like a camera's:
        // it must not arrive before that time, and the stamps are one frame interval apart.
        var first: Timestamp?
        while let f = try source.nextFrame() {
            let now = Clock.monotonic.now()
            #expect(now >= f.timestamp, "frame \(f.sequence) came early")
            let origin = first ?? f.timestamp
            first = origin
            #expect(f.timestamp - origin == Timestamp.Duration(nanoseconds: Int64(f.sequence) * 50_000_000))
        }
        #expect(source.nextIndex == 6)
    }

    /// In real time the frames are stamped like a camera's: with the monotonic time they are
    /// delivered, however long ago the scene's start time was taken (the agent takes it before
    /// the source has rendered its background).
    @Test func realtimeFramesCarryTheTimeTheyAreDelivered() throws {
        let scene = SyntheticScene(
            width: 32, height: 16, frameRate: Rational(20, 1), schedule: .empty,
            duration: Timestamp.Duration(seconds: 0.2),
            startTime: Clock.monotonic.now() - Timestamp.Duration(seconds: 5)
        )
        let source = try SyntheticSource(scene: scene, realtime: true)
        var previous: Timestamp?
        while true {
            let before = Clock.monotonic.now()
            guard let f = try source.nextFrame() else { break }
            let after = Clock.monotonic.now()
            if previous == nil { #expect(f.timestamp >= before, "frame 0 is stamped before it was asked for") }
            #expect(f.timestamp <= after, "frame \(f.sequence) is stamped after it was delivered")
            if let previous { #expect(f.timestamp - previous == Timestamp.Duration(seconds: 0.05)) }
            previous = f.timestamp
        }
        #expect(source.nextIndex == 4)
    }

    @Test func framesComeFromAPool() throws {
        let source = try SyntheticSource(
            scene: SyntheticScene(width: 32, height: 16, schedule: .empty, duration: short))
        var addresses = Set<UnsafeMutablePointer<UInt8>>()
        while let f = try source.nextFrame() { addresses.insert(f.buffer.base) }  // each frame dropped at once
        #expect(addresses.count == 1)
    }

    @Test(arguments: [
        (SyntheticScene(width: 0), "width"),
        (SyntheticScene(width: 33), "width"),
        (SyntheticScene(height: 5000), "height"),
        (SyntheticScene(frameRate: Rational(0, 1)), "frame rate"),
        (SyntheticScene(frameRate: Rational(1000, 1)), "frame rate"),
        (SyntheticScene(pixelFormat: .yuyv), "pixel format"),
        (SyntheticScene(width: 64, bytesPerLine: 63), "bytes per line"),
        (SyntheticScene(noiseSigma: 50), "noise"),
        (SyntheticScene(duration: .zero), "duration"),
        (
            SyntheticScene(
                schedule: SceneSchedule(objects: [
                    SceneObject(
                        enter: Timestamp.Duration(seconds: 2), leave: Timestamp.Duration(seconds: 1),
                        path: .still(x: 0.5, y: 0.5))
                ])), "object 0"
        ),
        (
            SyntheticScene(
                schedule: SceneSchedule(
                    objects: [
                        SceneObject(enter: .zero, leave: Timestamp.Duration(seconds: 90), path: .leftToRight(y: 0.5))
                    ], period: Timestamp.Duration(seconds: 60))), "object 0"
        ),
        (
            SyntheticScene(
                schedule: SceneSchedule(objects: [
                    SceneObject(enter: .zero, leave: Timestamp.Duration(seconds: 1), path: .leftToRight(y: 1.5))
                ])), "object 0"
        ),
        (
            SyntheticScene(
                schedule: SceneSchedule(lightChanges: [
                    LightChange(start: .zero, end: Timestamp.Duration(seconds: 1), delta: 300)
                ])), "light change 0"
        ),
    ])
    func invalidSettingsAreNamed(settings: SyntheticScene, setting: String) throws {
        let error = expectError(CaptureError.self) { _ = try SyntheticSource(scene: settings) }
        guard case .invalidSettings(let name, let problem)? = error else {
            Issue.record("\(String(describing: error))")
            return
        }
        #expect(name == "synthetic scene " + setting)
        #expect(!problem.isEmpty)
    }
}

@Suite struct SourceSpecifierTests {
    @Test func parsesSourceNames() throws {
        #expect(try SourceSpecifier(parsing: "synthetic") == .synthetic)
        #expect(try SourceSpecifier(parsing: "file:/srv/yard.y4m") == .file(path: "/srv/yard.y4m"))
        #expect(try SourceSpecifier(parsing: "file:relative.y4m") == .file(path: "relative.y4m"))
        #expect(try SourceSpecifier(parsing: "/dev/video0") == .device(path: "/dev/video0"))
        #expect(SourceSpecifier.file(path: "a.y4m").description == "file:a.y4m")
        for bad in ["file:", "video0", ""] {
            let error = expectError(CaptureError.self) { try SourceSpecifier(parsing: bad) }
            #expect(error?.description.hasPrefix("source: ") == true)
        }
    }
}
