import Capture
import Media
import Testing

/// The format choice as a pure function of what a driver enumerates.
@Suite struct CameraFormatChoiceTests {
    static func r(_ n: Int64) -> Rational { Rational(n, 1) }

    /// The chooser's answer for a request of `width`×`height` at `fps` from `formats`.
    static func choose(
        _ formats: [CameraFormatDescription], _ width: Int, _ height: Int, _ fps: Double
    ) -> CameraFormatChoice? {
        CameraFormatChooser.choose(from: formats, for: CameraRequest(width: width, height: height, fps: fps))
    }

    /// A driver that offers one format, in one size.
    static func oneFormat(_ fourcc: FourCC, _ size: FrameSizeDescription) -> [CameraFormatDescription] {
        [CameraFormatDescription(fourcc: fourcc, name: fourcc.description, sizes: [size])]
    }

    /// A USB webcam as they come: YUYV is slow at large sizes (USB 2 bandwidth), MJPEG is
    /// fast everywhere, and libv4l2 offers the MJPEG sizes again as emulated YU12.
    static let webcam: [CameraFormatDescription] = [
        CameraFormatDescription(
            fourcc: .yuyv, name: "YUYV 4:2:2",
            sizes: [
                FrameSizeDescription(width: 640, height: 480, rates: [r(30), r(15)]),
                FrameSizeDescription(width: 1280, height: 720, rates: [r(10), r(5)]),
                FrameSizeDescription(width: 1920, height: 1080, rates: [r(5)]),
            ]),
        CameraFormatDescription(
            fourcc: .mjpeg, name: "Motion-JPEG", isCompressed: true,
            sizes: [
                FrameSizeDescription(width: 640, height: 480, rates: [r(30)]),
                FrameSizeDescription(width: 1280, height: 720, rates: [r(30)]),
                FrameSizeDescription(width: 1920, height: 1080, rates: [r(30)]),
            ]),
        CameraFormatDescription(
            fourcc: .yuv420, name: "Planar YUV 4:2:0", isEmulated: true,
            sizes: [
                FrameSizeDescription(width: 640, height: 480, rates: [r(30), r(15)]),
                FrameSizeDescription(width: 1280, height: 720, rates: [r(30), r(10), r(5)]),
                FrameSizeDescription(width: 1920, height: 1080, rates: [r(30), r(5)]),
            ]),
        CameraFormatDescription(fourcc: FourCC("RGB3"), name: "RGB3", isEmulated: true, sizes: []),
    ]

    /// vivid's webcam input: the same sizes and rates in every format, native NV12 among them.
    static let vivid: [CameraFormatDescription] = {
        let sizes = [
            FrameSizeDescription(
                width: 320, height: 180, rates: [r(60), r(50), r(30), r(25), r(15), Rational(25, 2), r(10), r(5)]),
            FrameSizeDescription(
                width: 640, height: 360, rates: [r(40), r(30), r(25), r(15), Rational(25, 2), r(10), r(5)]),
            FrameSizeDescription(width: 640, height: 480, rates: [r(25), Rational(25, 2), r(10), r(5)]),
            FrameSizeDescription(width: 1280, height: 720, rates: [Rational(25, 2), r(10), r(5)]),
            FrameSizeDescription(width: 1920, height: 1080, rates: [r(5), r(4), r(2), r(1)]),
        ]
        return [
            CameraFormatDescription(fourcc: .yuyv, name: "YUYV 4:2:2", sizes: sizes),
            CameraFormatDescription(fourcc: FourCC("UYVY"), name: "UYVY 4:2:2", sizes: sizes),
            CameraFormatDescription(fourcc: .yuv422p, name: "Planar YUV 4:2:2", sizes: sizes),
            CameraFormatDescription(fourcc: .yuv420, name: "Planar YUV 4:2:0", sizes: sizes),
            CameraFormatDescription(fourcc: .nv12, name: "Y/UV 4:2:0", sizes: sizes),
        ]
    }()

    @Test(arguments: [
        // (width, height, fps, expected fourcc, emulated, width, height, fps)
        (640, 480, 30.0, FourCC.yuyv, false, 640, 480, Rational(30, 1)),
        // 720p30 exists only as MJPEG: libv4l2's conversion beats YUYV at 10 fps.
        (1280, 720, 30.0, FourCC.yuv420, true, 1280, 720, Rational(30, 1)),
        // At 10 fps YUYV reaches the rate and needs no JPEG decoding.
        (1280, 720, 10.0, FourCC.yuyv, false, 1280, 720, Rational(10, 1)),
        // 7 fps: the slowest rate that still reaches it.
        (1280, 720, 7.0, FourCC.yuyv, false, 1280, 720, Rational(10, 1)),
        (1920, 1080, 30.0, FourCC.yuv420, true, 1920, 1080, Rational(30, 1)),
        // An unknown size: the smallest that covers it, with the same aspect ratio first.
        (1024, 576, 30.0, FourCC.yuv420, true, 1280, 720, Rational(30, 1)),
        // Larger than anything: the largest with the same aspect.
        (3840, 2160, 30.0, FourCC.yuv420, true, 1920, 1080, Rational(30, 1)),
    ])
    func webcamChoices(
        width: Int, height: Int, fps: Double, fourcc: FourCC, emulated: Bool, w: Int, h: Int, rate: Rational
    ) throws {
        let choice = try #require(
            Self.choose(Self.webcam, width, height, fps))
        #expect(choice.fourcc == fourcc)
        #expect(choice.isEmulated == emulated)
        #expect(choice.width == w && choice.height == h)
        #expect(choice.frameRate == rate)
    }

    /// vivid: NV12 is native and first in preference; the rate is capped by the size.
    @Test(arguments: [
        (640, 480, 30.0, 640, 480, Rational(25, 1)),
        (640, 480, 25.0, 640, 480, Rational(25, 1)),
        (1280, 720, 30.0, 1280, 720, Rational(25, 2)),
        (1280, 720, 12.5, 1280, 720, Rational(25, 2)),
        (1280, 720, 11.0, 1280, 720, Rational(25, 2)),
        (1280, 720, 8.0, 1280, 720, Rational(10, 1)),
        (640, 360, 30.0, 640, 360, Rational(30, 1)),
    ])
    func vividChoices(width: Int, height: Int, fps: Double, w: Int, h: Int, rate: Rational) throws {
        let choice = try #require(
            Self.choose(Self.vivid, width, height, fps))
        #expect(choice.fourcc == .nv12)
        #expect(!choice.isEmulated)
        #expect(choice.width == w && choice.height == h)
        #expect(choice.frameRate == rate)
    }

    @Test func allowedFormatsRestrictTheChoice() throws {
        let yuyv = try #require(
            CameraFormatChooser.choose(
                from: Self.vivid, for: CameraRequest(width: 640, height: 480, fps: 25, allowedFormats: [.yuyv])))
        #expect(yuyv.fourcc == .yuyv)
        let planar = try #require(
            CameraFormatChooser.choose(
                from: Self.vivid, for: CameraRequest(width: 640, height: 480, fps: 25, allowedFormats: [.yuv422p])))
        #expect(planar.fourcc == .yuv422p)
        #expect(
            CameraFormatChooser.choose(
                from: Self.vivid, for: CameraRequest(width: 640, height: 480, fps: 25, allowedFormats: [FourCC("UYVY")])
            ) == nil)
    }

    @Test func preferenceOrderAtTheSameSizeAndRate() throws {
        let size = [FrameSizeDescription(width: 640, height: 480, rates: [Rational(30, 1)])]
        let all: [CameraFormatDescription] = [
            CameraFormatDescription(fourcc: .yuv420, name: "emulated", isEmulated: true, sizes: size),
            CameraFormatDescription(fourcc: .yuv422p, name: "422P", sizes: size),
            CameraFormatDescription(fourcc: .yuyv, name: "YUYV", sizes: size),
            CameraFormatDescription(fourcc: .yuv420, name: "YU12", sizes: size),
        ]
        let request = CameraRequest(width: 640, height: 480, fps: 30)
        var remaining = all
        var order: [String] = []
        while let choice = CameraFormatChooser.choose(from: remaining, for: request) {
            let index = try #require(
                remaining.firstIndex { $0.fourcc == choice.fourcc && $0.isEmulated == choice.isEmulated })
            order.append(remaining.remove(at: index).name)
        }
        #expect(order == ["YU12", "YUYV", "422P", "emulated"])
    }

    @Test func compressedAndUnknownFormatsAreNeverChosen() {
        let only: [CameraFormatDescription] = [
            CameraFormatDescription(
                fourcc: .mjpeg, name: "Motion-JPEG", isCompressed: true,
                sizes: [FrameSizeDescription(width: 640, height: 480, rates: [Rational(30, 1)])]),
            CameraFormatDescription(
                fourcc: FourCC("BA81"), name: "Bayer",
                sizes: [FrameSizeDescription(width: 640, height: 480, rates: [Rational(30, 1)])]),
        ]
        #expect(Self.choose(only, 640, 480, 30) == nil)
        #expect(Self.choose([], 640, 480, 30) == nil)
    }

    /// A sensor with a stepwise size range and continuous intervals (libcamera, some ISPs).
    @Test func stepwiseSizesAndIntervals() throws {
        let sensor = Self.oneFormat(
            .nv12,
            FrameSizeDescription(
                size: .stepwise(
                    minWidth: 64, maxWidth: 2592, widthStep: 16, minHeight: 64, maxHeight: 1944, heightStep: 2),
                intervals: .stepwise(shortest: Rational(1, 60), longest: Rational(1, 1), step: Rational(0, 1))))
        let exact = try #require(
            Self.choose(sensor, 1280, 720, 30))
        #expect(exact.width == 1280 && exact.height == 720)
        #expect(exact.frameRate == Rational(30, 1))
        // 1000 is not a multiple of 16 from 64: the nearest step.
        let snapped = try #require(
            Self.choose(sensor, 1000, 563, 90))
        #expect(snapped.width == 992 || snapped.width == 1008)
        #expect(snapped.height == 562 || snapped.height == 564)
        #expect(snapped.frameRate == Rational(60, 1))
        let huge = try #require(
            Self.choose(sensor, 4000, 3000, 0.5))
        #expect(huge.width == 2592 && huge.height == 1944)
        #expect(huge.frameRate == Rational(1, 1))
    }

    @Test func stepwiseIntervalsSnapToTheStep() {
        // 1/30 to 1/5 s in steps of 1/30 s: 30, 15, 10, 7.5, 6, 5 fps.
        let intervals = FrameIntervals.stepwise(
            shortest: Rational(1, 30), longest: Rational(1, 5), step: Rational(1, 30))
        #expect(CameraFormatChooser.chooseInterval(intervals, for: Rational(12, 1)) == Rational(1, 15))
        #expect(CameraFormatChooser.chooseInterval(intervals, for: Rational(15, 1)) == Rational(1, 15))
        #expect(CameraFormatChooser.chooseInterval(intervals, for: Rational(60, 1)) == Rational(1, 30))
        #expect(CameraFormatChooser.chooseInterval(intervals, for: Rational(1, 1)) == Rational(1, 5))
    }

    /// A driver that lists no sizes: the request is passed to S_FMT as it is.
    @Test func unlistedSizesTakeTheRequest() throws {
        let bare = [CameraFormatDescription(fourcc: .yuyv, name: "YUYV", sizes: [])]
        let choice = try #require(
            Self.choose(bare, 800, 600, 20))
        #expect(choice.width == 800 && choice.height == 600)
        #expect(choice.interval == nil)
    }

    @Test func ntscRatesCountAsReachingTheRoundRate() throws {
        let camera = Self.oneFormat(
            .yuyv, FrameSizeDescription(width: 640, height: 480, rates: [Rational(30000, 1001), Rational(15000, 1001)]))
        let choice = try #require(
            Self.choose(camera, 640, 480, 30))
        #expect(choice.frameRate == Rational(30000, 1001))
    }

    @Test func requestRates() {
        #expect(CameraRequest(width: 2, height: 2, fps: 30).frameRate == Rational(30, 1))
        #expect(CameraRequest(width: 2, height: 2, fps: 12.5).frameRate == Rational(25, 2))
        #expect(CameraRequest(width: 2, height: 2, fps: 29.97).frameRate == Rational(2997, 100))
    }

    @Test func fourccs() {
        #expect(FourCC.yuyv.littleEndianValue == 0x5659_5559)  // v4l2_fourcc('Y','U','Y','V')
        #expect(FourCC.nv12.description == "NV12")
        #expect(FourCC.yuv420.pixelFormat == .i420)
        #expect(FourCC.nv12.pixelFormat == .nv12)
        #expect(FourCC.yuyv.pixelFormat == .yuyv)
        #expect(FourCC.yuv422p.pixelFormat == .i422)
        #expect(FourCC.mjpeg.pixelFormat == nil)
    }
}
