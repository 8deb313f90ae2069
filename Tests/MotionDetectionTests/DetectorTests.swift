import Configuration
import Media
import TestSupport
import Testing

@testable import MotionDetection

@Suite struct DownscaleTests {
    /// The reduced picture equals a plain block average (of every other row for blocks of 4
    /// and more), for even, odd, large and unit block sizes, strides wider than the width,
    /// and sizes that do not divide evenly.
    @Test(arguments: [
        (640, 480, 704, 160),  // b = 4
        (1280, 720, 1280, 160),  // b = 8
        (1920, 1080, 1984, 160),  // b = 12 (generic even path)
        (144, 90, 150, 16),  // b = 9 (odd, every other row)
        (643, 481, 650, 160),  // b = 4, partial blocks dropped
        (99, 50, 101, 32),  // b = 3 (odd path)
        (125, 75, 125, 25),  // b = 5
        (17, 9, 19, 16),  // b = 1
        (34, 20, 40, 16),  // b = 2
        (700, 300, 720, 20),  // b = 35 (odd, large)
        (3200, 400, 3200, 16),  // b = 200 (even, too large for 16-bit pair sums)
        (4096, 300, 4100, 16),  // b = 255 (the largest block)
    ])
    func blockAverage(width: Int, height: Int, stride: Int, detectWidth: Int) throws {
        var random = TestRandom(seed: UInt64(width * 7919 + height))
        let plane = TestPlane(width: width, height: height, stride: stride) { _, _ in
            UInt8(truncatingIfNeeded: random.next())
        }
        var settings = try Settings.defaults().motion
        settings.detectWidth = detectWidth
        var detector = MotionDetector(settings: settings)
        _ = plane.withView { detector.process($0, at: .zero) }
        let b = detector.blockSize
        #expect(b == min(max(1, width / detectWidth), 255))
        #expect(detector.detectWidth == width / b)
        #expect(detector.detectHeight == height / b)
        #expect(detector.detectWidth >= min(detectWidth, width))
        let reduced = detector.reducedPicture
        let step = Downscaler.rowStep(forBlock: b)
        #expect(step == (b >= 4 ? 2 : 1))
        var worst = 0.0
        for by in 0..<detector.detectHeight {
            for bx in 0..<detector.detectWidth {
                var sum = 0
                var count = 0
                for y in Swift.stride(from: by * b, to: by * b + b, by: step) {
                    for x in (bx * b)..<(bx * b + b) {
                        sum += Int(plane[x, y])
                        count += 1
                    }
                }
                let expected = Double(sum) / Double(count)
                worst = max(worst, abs(Double(reduced[by * detector.detectWidth + bx]) - expected))
            }
        }
        #expect(worst < 0.001)
    }

    @Test func emptyPlaneIsHarmless() throws {
        let plane = TestPlane(width: 0, height: 0) { _, _ in 0 }
        var detector = MotionDetector(settings: try Settings.defaults().motion)
        let result = plane.withView { detector.process($0, at: .zero) }
        #expect(result.score == 0)
        #expect(!result.motion)
    }

    @Test func sizeChangeRestartsLearning() throws {
        var detector = MotionDetector(settings: try Settings.defaults().motion)
        let small = TestPlane(width: 320, height: 240) { x, y in UInt8(texture(x, y)) }
        let large = TestPlane(width: 640, height: 480) { x, y in UInt8(texture(x, y)) }
        _ = small.withView { detector.process($0, at: .s(0)) }
        _ = small.withView { detector.process($0, at: .s(0.1)) }
        #expect(detector.detectWidth == 160 && detector.detectHeight == 120)
        let result = large.withView { detector.process($0, at: .s(0.2)) }
        #expect(result.learning)
        #expect(detector.blockSize == 4)
    }
}

/// Feeds `frames` frames of `make(index)` at `fps`, returning every result.
func run(
    _ detector: inout MotionDetector, frames: Int, fps: Double = 15, start: Int = 0,
    _ make: (Int) -> TestPlane
) -> [MotionResult] {
    var results: [MotionResult] = []
    for i in start..<(start + frames) {
        let plane = make(i)
        results.append(plane.withView { detector.process($0, at: .s(Double(i) / fps)) })
    }
    return results
}

@Suite struct NoiseTests {
    /// The noise estimate matches the noise of the reduced picture (σ / block size, since a
    /// block averages b² independent samples), and the derived threshold follows it.
    @Test(arguments: [2.0, 4.0, 6.0])
    func estimateFollowsSensorNoise(sigma: Double) throws {
        var random = TestRandom(seed: UInt64(sigma * 100))
        var detector = MotionDetector(settings: try Settings.defaults().motion)
        let results = run(&detector, frames: 90) { _ in
            TestPlane(width: 320, height: 240) { x, y in
                clampByte(texture(x, y) + Int((sigma * random.gaussian()).rounded()))
            }
        }
        let b = Double(detector.blockSize)  // 2 for 320 wide
        // Rounding the noise to whole grey levels adds 1/12 of a level² of variance.
        let expected = (sigma * sigma + 1.0 / 12).squareRoot() / b
        let last = results[results.count - 1]
        #expect(abs(last.noise - expected) / expected < 0.15, "noise \(last.noise), expected \(expected)")
        // The threshold of a frame comes from the estimate before it.
        let before = results[results.count - 2]
        #expect(last.pixelThreshold == max(MotionDetector.minimumPixelThreshold, 4 * before.noise))
        #expect(results.allSatisfy { !$0.motion && !$0.lightSwitch })
        #expect(results.dropFirst(2).allSatisfy { $0.score == 0 })
    }

    @Test func fixedPixelThresholdIsUsed() throws {
        var settings = try Settings.defaults().motion
        settings.pixelThreshold = 17
        var detector = MotionDetector(settings: settings)
        let results = run(&detector, frames: 3) { _ in
            TestPlane(width: 160, height: 120) { x, y in UInt8(texture(x, y)) }
        }
        #expect(results[2].pixelThreshold == 17)
    }
}

/// A flat, noise-free 320×240 scene (b = 2, 160×120 reduced) with optional bright squares
/// (in reduced pixels: `squares` are (x, y, size)).
func scene(offset: Int = 0, squares: [(Int, Int, Int)] = []) -> TestPlane {
    TestPlane(width: 320, height: 240) { x, y in
        for (sx, sy, size) in squares where x / 2 >= sx && x / 2 < sx + size && y / 2 >= sy && y / 2 < sy + size {
            return 230
        }
        return clampByte(texture(x, y) + offset)
    }
}

@Suite struct DespeckleTests {
    @Test func isolatedPixelsDoNotCount() throws {
        var detector = MotionDetector(settings: try Settings.defaults().motion)
        _ = run(&detector, frames: 5) { _ in scene() }
        // Twenty isolated changed pixels, far apart.
        let speckles = (0..<20).map { ($0 * 7 % 150 + 3, $0 * 5 % 110 + 3, 1) }
        let result = scene(squares: speckles).withView { detector.process($0, at: .s(1)) }
        #expect(result.score == 0)
    }

    @Test func isolatedPixelsCountWithoutDespeckle() throws {
        var settings = try Settings.defaults().motion
        settings.despeckle = 0
        var detector = MotionDetector(settings: settings)
        _ = run(&detector, frames: 5) { _ in scene() }
        let speckles = (0..<20).map { ($0 * 7 % 150 + 3, $0 * 5 % 110 + 3, 1) }
        let result = scene(squares: speckles).withView { detector.process($0, at: .s(1)) }
        #expect(result.score == 20.0 / (160 * 120))
    }

    /// A solid block counts whole (its corners have 3 changed neighbours), also at the edges
    /// and corners of the picture.
    @Test(arguments: [(50, 50), (0, 0), (157, 117), (0, 60)])
    func blocksCountWhole(x: Int, y: Int) throws {
        var detector = MotionDetector(settings: try Settings.defaults().motion)
        _ = run(&detector, frames: 5) { _ in scene() }
        let result = scene(squares: [(x, y, 3)]).withView { detector.process($0, at: .s(1)) }
        #expect(result.score == 9.0 / (160 * 120))
    }

    /// Two changed neighbours are required by default: a pair of pixels does not count, a
    /// line of three counts its middle pixel... and a line of 5 counts its 3 inner pixels.
    @Test func neighbourRule() throws {
        var detector = MotionDetector(settings: try Settings.defaults().motion)
        _ = run(&detector, frames: 5) { _ in scene() }
        let line = (0..<5).map { (40 + $0, 40, 1) }
        let pair = [(100, 100, 1), (101, 100, 1)]
        let result = scene(squares: line + pair).withView { detector.process($0, at: .s(1)) }
        #expect(result.score == 3.0 / (160 * 120))
    }
}

@Suite struct LightSwitchTests {
    @Test(arguments: [40, -50])
    func offsetStepRelearnsInsteadOfTriggering(delta: Int) throws {
        var detector = MotionDetector(settings: try Settings.defaults().motion)
        var results = run(&detector, frames: 20) { _ in scene() }
        results += run(&detector, frames: 30, start: 20) { _ in scene(offset: delta) }
        results += run(&detector, frames: 30, start: 50) { _ in scene() }
        #expect(results[20].lightSwitch)
        #expect(results[50].lightSwitch)
        #expect(results.allSatisfy { !$0.motion })
        // After settling, the new light level is the background.
        #expect(!results[79].learning && results[79].score == 0)
    }

    /// A change of contrast (gain) as well as brightness, as a lamp gives.
    @Test func gainStep() throws {
        var detector = MotionDetector(settings: try Settings.defaults().motion)
        var results = run(&detector, frames: 20) { _ in scene() }
        results += run(&detector, frames: 30, start: 20) { _ in
            TestPlane(width: 320, height: 240) { x, y in clampByte(Int(Double(texture(x, y)) * 1.4) - 10) }
        }
        #expect(results[20].lightSwitch)
        #expect(results.allSatisfy { !$0.motion })
    }

    /// A slow drift of exposure (a cloud, dusk) is compensated, not motion and not a switch.
    @Test func slowDriftIsCompensated() throws {
        var detector = MotionDetector(settings: try Settings.defaults().motion)
        let results = run(&detector, frames: 150) { i in
            let gain = 1 + 0.15 * Double(i) / 150
            return TestPlane(width: 320, height: 240) { x, y in clampByte(Int((Double(texture(x, y)) * gain).rounded()))
            }
        }
        for r in results where r.motion || r.lightSwitch || r.score >= 0.001 {
            Issue.record(
                "at \(r.time): score \(r.score), global change \(r.globalChange), light switch \(r.lightSwitch)")
        }
    }

    /// Motion is seen again once the light has settled.
    @Test func motionAfterLightSwitch() throws {
        var detector = MotionDetector(settings: try Settings.defaults().motion)
        var results = run(&detector, frames: 20) { _ in scene() }
        results += run(&detector, frames: 20, start: 20) { _ in scene(offset: 40) }
        results += run(&detector, frames: 5, start: 40) { i in scene(offset: 40, squares: [(20 + 3 * (i - 40), 30, 20)])
        }
        #expect(results[20].lightSwitch)
        #expect(results[42].motion)
    }
}

@Suite struct MinFramesTests {
    /// Motion needs `min_frames` consecutive frames over the threshold, and the trigger time
    /// is the first of them.
    @Test(arguments: [1, 2, 3, 5])
    func consecutiveFrames(minFrames: Int) throws {
        var settings = try Settings.defaults().motion
        settings.minFrames = minFrames
        var detector = MotionDetector(settings: settings)
        let object = [(30, 30, 20)]  // 400 of 19200 reduced pixels: about 2 %
        var results = run(&detector, frames: 10) { _ in scene() }
        // A blip one frame shorter than min_frames: no motion.
        results += run(&detector, frames: minFrames - 1, start: 10) { _ in scene(squares: object) }
        results += run(&detector, frames: 5, start: 10 + minFrames - 1) { _ in scene() }
        #expect(results.allSatisfy { !$0.motion })
        // Long enough: motion from its min_frames-th frame on.
        let first = 10 + minFrames - 1 + 5
        let moving = run(&detector, frames: minFrames + 2, start: first) { i in
            scene(squares: [(30 + (i - first), 30, 20)])
        }
        for (k, r) in moving.enumerated() {
            #expect(r.score >= settings.threshold)
            #expect(r.motion == (k >= minFrames - 1))
            if r.motion { #expect(r.motionStart == .s(Double(first) / 15)) }
            // The run's start is known from its first frame, before it is confirmed.
            #expect(r.runStart == .s(Double(first) / 15))
        }
    }
}

@Suite struct MaskTests {
    @Test func maskedMotionDoesNotCount() throws {
        // Watch the left half only.
        let mask = try MotionMask(width: 4, height: 2, watched: [true, true, false, false, true, true, false, false])
        var detector = MotionDetector(settings: try Settings.defaults().motion, mask: mask)
        _ = run(&detector, frames: 5) { _ in scene() }
        let right = scene(squares: [(100, 50, 30)]).withView { detector.process($0, at: .s(1)) }
        #expect(right.score == 0)
        let left = scene(squares: [(20, 50, 10)]).withView { detector.process($0, at: .s(1.1)) }
        // The score is a fraction of the watched half.
        #expect(left.score == 100.0 / (80 * 120))
        #expect(detector.watchMap.filter { $0 == 1 }.count == 80 * 120)
    }
}

@Suite struct BackgroundTests {
    /// Something that stays (a parked car) is motion at first, then is learned: after about
    /// `absorbAfter` seconds plus a few for the learning, the score is back to 0.
    @Test func lastingChangeIsLearned() throws {
        var detector = MotionDetector(settings: try Settings.defaults().motion)
        let fps = 5.0
        _ = run(&detector, frames: 10, fps: fps) { _ in scene() }
        let parked = run(&detector, frames: 200, fps: fps, start: 10) { _ in scene(squares: [(60, 40, 25)]) }
        let seconds = { (r: MotionResult) in r.time.seconds - 2 }
        #expect(parked.dropFirst().filter { seconds($0) < MotionDetector.absorbAfter - 1 }.allSatisfy { $0.motion })
        let quiet = parked.first { $0.score == 0 }.map(seconds)
        #expect(
            quiet.map { $0 >= MotionDetector.absorbAfter && $0 <= MotionDetector.absorbAfter + 8 } == true,
            "learned after \(String(describing: quiet)) s")
        #expect(parked.last?.score == 0)
    }

    /// Something that stood still for a while and left leaves no ghost: the background did
    /// not learn it, so the score drops at once.
    @Test func noGhostAfterAStop() throws {
        var detector = MotionDetector(settings: try Settings.defaults().motion)
        let fps = 10.0
        _ = run(&detector, frames: 20, fps: fps) { _ in scene() }
        let standing = run(&detector, frames: 100, fps: fps, start: 20) { _ in scene(squares: [(60, 40, 25)]) }
        #expect(standing.allSatisfy { $0.score > 0.02 })
        let after = run(&detector, frames: 20, fps: fps, start: 120) { _ in scene() }
        #expect(after.allSatisfy { $0.score == 0 && !$0.motion })
    }

    /// A slowly moving object is still seen: it is compared with the background, not with the
    /// previous frame (where it barely moved).
    @Test func slowMovementIsSeen() throws {
        var detector = MotionDetector(settings: try Settings.defaults().motion)
        _ = run(&detector, frames: 20) { _ in scene() }
        // One reduced pixel every 3 frames (0.1 of a block per frame at 320×240).
        let moving = run(&detector, frames: 90, start: 20) { i in scene(squares: [(20 + (i - 20) / 3, 40, 20)]) }
        #expect(moving.dropFirst(1).allSatisfy { $0.motion })
    }
}
