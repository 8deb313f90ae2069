import Media

/// V4L2 pixel format codes (`V4L2_PIX_FMT_*`) Vigil knows by name.
extension FourCC {
    public static let nv12 = FourCC("NV12")
    /// Planar 4:2:0, Y then U then V (`YU12`, V4L2_PIX_FMT_YUV420).
    public static let yuv420 = FourCC("YU12")
    public static let yuyv = FourCC("YUYV")
    /// Planar 4:2:2 (`422P`, V4L2_PIX_FMT_YUV422P).
    public static let yuv422p = FourCC("422P")
    public static let mjpeg = FourCC("MJPG")
    public static let jpeg = FourCC("JPEG")

    /// The Vigil pixel format with this code's memory layout, or nil when Vigil cannot take it.
    public var pixelFormat: PixelFormat? {
        switch self {
        case .nv12: .nv12
        case .yuv420: .i420
        case .yuyv: .yuyv
        case .yuv422p: .i422
        default: nil
        }
    }
}

/// Frame rates a camera offers at one picture size, as V4L2 frame intervals (seconds per frame).
public enum FrameIntervals: Hashable, Sendable {
    /// A list of intervals (`1/30` is 30 frames per second).
    case discrete([Rational])
    /// Any interval from `shortest` to `longest` in steps of `step` (a step of 0: any value).
    case stepwise(shortest: Rational, longest: Rational, step: Rational)
    /// The driver does not enumerate intervals (it may still take one through S_PARM).
    case unknown
}

/// One picture size a camera offers in a pixel format, with the rates at that size.
public struct FrameSizeDescription: Hashable, Sendable {
    public enum Size: Hashable, Sendable {
        case discrete(width: Int, height: Int)
        /// Widths `minWidth...maxWidth` in steps of `widthStep`, heights likewise.
        case stepwise(minWidth: Int, maxWidth: Int, widthStep: Int, minHeight: Int, maxHeight: Int, heightStep: Int)
    }
    public var size: Size
    /// For a stepwise size: the rates at its largest size.
    public var intervals: FrameIntervals

    public init(size: Size, intervals: FrameIntervals) {
        self.size = size
        self.intervals = intervals
    }

    /// A discrete size with a list of rates in frames per second (for tests and examples).
    public init(width: Int, height: Int, rates: [Rational]) {
        self.init(
            size: .discrete(width: width, height: height),
            intervals: .discrete(rates.map { Rational($0.denominator, $0.numerator) }))
    }
}

/// One pixel format a camera offers (VIDIOC_ENUM_FMT), with its sizes and rates.
public struct CameraFormatDescription: Hashable, Sendable {
    public var fourcc: FourCC
    /// The driver's name for it ("YUYV 4:2:2", "Motion-JPEG").
    public var name: String
    /// Produced by libv4l2's conversion from a format the camera really sends (usually MJPEG).
    public var isEmulated: Bool
    public var isCompressed: Bool
    /// Empty when the driver does not enumerate sizes.
    public var sizes: [FrameSizeDescription]

    public init(
        fourcc: FourCC, name: String, isEmulated: Bool = false, isCompressed: Bool = false,
        sizes: [FrameSizeDescription]
    ) {
        self.fourcc = fourcc
        self.name = name
        self.isEmulated = isEmulated
        self.isCompressed = isCompressed
        self.sizes = sizes
    }

    /// Whether Vigil can record from this format.
    public var isUsable: Bool { fourcc.pixelFormat != nil && !isCompressed }

    /// Lower is better: native 4:2:0 (the encoder takes it as it is; NV12 first, the layout
    /// of most sensors and ISPs), then YUYV (one cheap repack), then planar 4:2:2, then
    /// anything libv4l2 converts (MJPEG decoded on the CPU). Nil when Vigil cannot use it.
    public var preference: Int? {
        guard isUsable, let pixel = fourcc.pixelFormat else { return nil }
        if isEmulated { return 4 }
        switch pixel {
        case .nv12: return 0
        case .i420: return 1
        case .yuyv: return 2
        case .i422: return 3
        }
    }
}

/// What the configuration asks of a camera.
public struct CameraRequest: Hashable, Sendable {
    public var width: Int
    public var height: Int
    public var frameRate: Rational
    /// Only these formats (tests use it to force a path); nil: any usable one.
    public var allowedFormats: [FourCC]?
    /// A row stride to ask the driver for (some drivers honour a wider one); nil lets it choose.
    public var bytesPerLine: Int?

    public init(width: Int, height: Int, frameRate: Rational, allowedFormats: [FourCC]? = nil, bytesPerLine: Int? = nil)
    {
        self.width = width
        self.height = height
        self.frameRate = frameRate
        self.allowedFormats = allowedFormats
        self.bytesPerLine = bytesPerLine
    }

    /// `fps` as a fraction: whole numbers exactly, others to a thousandth (12.5 → 25/2).
    public init(width: Int, height: Int, fps: Double, allowedFormats: [FourCC]? = nil, bytesPerLine: Int? = nil) {
        let rate = fps == fps.rounded() ? Rational(Int64(fps), 1) : Rational(Int64((fps * 1000).rounded()), 1000)
        self.init(
            width: width, height: height, frameRate: rate, allowedFormats: allowedFormats, bytesPerLine: bytesPerLine)
    }
}

/// The format, size and frame interval picked for a request, before the driver confirms them.
public struct CameraFormatChoice: Hashable, Sendable, CustomStringConvertible {
    public var fourcc: FourCC
    public var isEmulated: Bool
    public var width: Int
    public var height: Int
    /// Seconds per frame to ask for; nil when the driver lists no rates (ask for the request's).
    public var interval: Rational?

    public init(fourcc: FourCC, isEmulated: Bool, width: Int, height: Int, interval: Rational?) {
        self.fourcc = fourcc
        self.isEmulated = isEmulated
        self.width = width
        self.height = height
        self.interval = interval
    }

    /// Frames per second of `interval`.
    public var frameRate: Rational? { interval.map { Rational($0.denominator, $0.numerator) } }

    public var description: String {
        "\(fourcc)\(isEmulated ? " (converted by libv4l2)" : "") \(width)x\(height)"
            + (frameRate.map { " at \(DecimalText.rate($0)) fps" } ?? "")
    }
}

/// Picks the camera mode closest to a request.
///
/// Picture size comes first: the exact size; else the smallest size that covers the request
/// (preferring the request's aspect ratio); else the largest smaller one (same preference).
/// Then the rate: a mode that reaches the requested rate beats one that does not, and among
/// those that do not, the faster wins. Only then the pixel format's preference (native
/// NV12, then YU12, then YUYV, then planar 4:2:2, then formats libv4l2 converts such as MJPEG), so
/// a webcam that sends 720p at 30 fps only as MJPEG is used through libv4l2's conversion
/// rather than at 10 fps in YUYV. At a size, the rate chosen is the slowest one at or above
/// the request, else the fastest there is.
public enum CameraFormatChooser {
    /// Rates within this fraction below the request count as reaching it (29.97 for 30).
    static let rateTolerance = 0.005

    public static func choose(
        from formats: [CameraFormatDescription], for request: CameraRequest
    ) -> CameraFormatChoice? {
        var best: (key: Key, choice: CameraFormatChoice)?
        for format in formats {
            guard let preference = format.preference else { continue }
            if let allowed = request.allowedFormats, !allowed.contains(format.fourcc) { continue }
            let sizes =
                format.sizes.isEmpty
                ? [
                    FrameSizeDescription(
                        size: .discrete(width: request.width, height: request.height), intervals: .unknown)
                ]
                : format.sizes
            for size in sizes {
                let (width, height) = nearest(size.size, to: request)
                let interval = chooseInterval(size.intervals, for: request.frameRate)
                let key = Key(
                    size: sizeRank(width: width, height: height, request: request),
                    rate: rateShortfall(interval, request: request.frameRate),
                    preference: preference)
                let choice = CameraFormatChoice(
                    fourcc: format.fourcc, isEmulated: format.isEmulated, width: width, height: height,
                    interval: interval)
                if let current = best, !(key < current.key) { continue }
                best = (key, choice)
            }
        }
        return best?.choice
    }

    /// The interval to ask for at one size: the longest interval that still reaches the
    /// requested rate, else the shortest there is. Nil when the driver lists none.
    public static func chooseInterval(_ intervals: FrameIntervals, for rate: Rational) -> Rational? {
        let wanted = Rational(rate.denominator, rate.numerator)
        switch intervals {
        case .unknown:
            return nil
        case .discrete(let list):
            guard !list.isEmpty else { return nil }
            let reaching = list.filter { reaches($0, rate) }
            if let slowest = reaching.max(by: { less($0, $1) }) { return slowest }
            return list.min(by: { less($0, $1) })
        case .stepwise(let shortest, let longest, let step):
            if less(wanted, shortest) { return shortest }
            if less(longest, wanted) { return longest }
            guard step.numerator > 0 else { return wanted }
            // shortest + k·step, the largest k that still reaches the rate.
            let k = ((wanted.doubleValue - shortest.doubleValue) / step.doubleValue + 1e-9).rounded(.down)
            let n = shortest.numerator * step.denominator + Int64(k) * step.numerator * shortest.denominator
            return Rational(n, shortest.denominator * step.denominator)
        }
    }

    struct Key: Comparable {
        var size: (class: Int, aspect: Int, distance: Int)
        var rate: Double
        var preference: Int
        static func < (a: Key, b: Key) -> Bool {
            if a.size != b.size { return a.size < b.size }
            if a.rate != b.rate { return a.rate < b.rate }
            return a.preference < b.preference
        }
        static func == (a: Key, b: Key) -> Bool { a.size == b.size && a.rate == b.rate && a.preference == b.preference }
    }

    /// (0 exact, 1 covers the request, 2 smaller; 0 same aspect ratio within 1%, else 1; area difference).
    static func sizeRank(width: Int, height: Int, request: CameraRequest) -> (class: Int, aspect: Int, distance: Int) {
        if width == request.width && height == request.height { return (0, 0, 0) }
        let covers = width >= request.width && height >= request.height
        let aspect = Double(width * request.height) / Double(height * request.width)
        let sameAspect = abs(aspect - 1) <= 0.01 ? 0 : 1
        return (covers ? 1 : 2, sameAspect, abs(width * height - request.width * request.height))
    }

    /// 0 when `interval` reaches `rate` (or is unknown); else how many times slower it is.
    static func rateShortfall(_ interval: Rational?, request rate: Rational) -> Double {
        guard let interval else { return 0 }
        if reaches(interval, rate) { return 0 }
        return rate.doubleValue * interval.doubleValue
    }

    static func reaches(_ interval: Rational, _ rate: Rational) -> Bool {
        // 1/interval >= rate·(1 − tolerance)
        interval.denominator.double / interval.numerator.double >= rate.doubleValue * (1 - rateTolerance)
    }

    static func less(_ a: Rational, _ b: Rational) -> Bool {
        a.numerator.magnitude.multipliedFullWidth(by: b.denominator.magnitude)
            < b.numerator.magnitude.multipliedFullWidth(by: a.denominator.magnitude)
    }

    /// The size in a (possibly stepwise) range closest to the request.
    static func nearest(_ size: FrameSizeDescription.Size, to request: CameraRequest) -> (Int, Int) {
        switch size {
        case .discrete(let w, let h):
            return (w, h)
        case .stepwise(let minW, let maxW, let stepW, let minH, let maxH, let stepH):
            func snap(_ wanted: Int, _ low: Int, _ high: Int, _ step: Int) -> Int {
                let clamped = min(max(wanted, low), high)
                guard step > 1 else { return clamped }
                let k = (clamped - low + step / 2) / step
                return min(low + k * step, high - (high - low) % step)
            }
            return (snap(request.width, minW, maxW, stepW), snap(request.height, minH, maxH, stepH))
        }
    }
}

private extension Int64 {
    var double: Double { Double(self) }
}
