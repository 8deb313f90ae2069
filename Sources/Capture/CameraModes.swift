internal import CV4L2
internal import Glibc
import Media
import V4L2

/// A camera's modes: its formats, sizes and rates, as `vigil probe` and the format chooser
/// read them.
extension V4L2Device {
    /// The pixel formats of single-planar capture, with sizes and rates for those Vigil can
    /// use (`detailsFor` decides which), in the driver's order.
    func formats(
        detailsFor wanted: (CameraFormatDescription) -> Bool = { $0.isUsable }
    ) throws(V4L2Error) -> [CameraFormatDescription] {
        var result: [CameraFormatDescription] = []
        for offered in try formats(of: .capture) {
            var format = CameraFormatDescription(
                fourcc: offered.fourcc, name: offered.name, isEmulated: offered.isEmulated,
                isCompressed: offered.isCompressed, sizes: [])
            if wanted(format) { format.sizes = try sizes(of: format.fourcc) }
            result.append(format)
        }
        return result
    }

    /// The sizes of one format, each with its rates; empty when the driver does not list them.
    func sizes(of fourcc: FourCC) throws(V4L2Error) -> [FrameSizeDescription] {
        var result: [FrameSizeDescription] = []
        // ENOTTY: the driver does not list sizes.
        try enumerate(
            CV4L2_VIDIOC_ENUM_FRAMESIZES, .enumerateSizes, unlistedIsEmpty: true,
            entry: { v4l2_frmsizeenum(entry: $0, of: fourcc) }
        ) { (size) throws(V4L2Error) in
            switch size.type {
            case V4L2_FRMSIZE_TYPE_DISCRETE.rawValue:
                let w = Int(size.discrete.width), h = Int(size.discrete.height)
                result.append(
                    FrameSizeDescription(
                        size: .discrete(width: w, height: h), intervals: try intervals(of: fourcc, width: w, height: h))
                )
                return true
            default:
                // Stepwise or continuous: one entry, the whole range (continuous has step 1).
                let s = size.stepwise
                let range = FrameSizeDescription.Size.stepwise(
                    minWidth: Int(s.min_width), maxWidth: Int(s.max_width), widthStep: max(1, Int(s.step_width)),
                    minHeight: Int(s.min_height), maxHeight: Int(s.max_height), heightStep: max(1, Int(s.step_height)))
                result.append(
                    FrameSizeDescription(
                        size: range,
                        intervals: try intervals(of: fourcc, width: Int(s.max_width), height: Int(s.max_height))))
                return false
            }
        }
        return result
    }

    /// The frame intervals of one format at one size.
    func intervals(of fourcc: FourCC, width: Int, height: Int) throws(V4L2Error) -> FrameIntervals {
        var list: [Rational] = []
        // Stepwise or continuous intervals come as one entry, the whole range.
        var range: FrameIntervals?
        try enumerate(
            CV4L2_VIDIOC_ENUM_FRAMEINTERVALS, .enumerateIntervals, unlistedIsEmpty: true,
            entry: { index in
                var interval = v4l2_frmivalenum(entry: index, of: fourcc)
                interval.width = UInt32(clamping: width)
                interval.height = UInt32(clamping: height)
                return interval
            }
        ) { interval in
            switch interval.type {
            case V4L2_FRMIVAL_TYPE_DISCRETE.rawValue:
                let d = interval.discrete
                if d.numerator > 0 && d.denominator > 0 {
                    list.append(Rational(Int64(d.numerator), Int64(d.denominator)))
                }
                return true
            default:
                let s = interval.stepwise
                guard s.min.numerator > 0, s.min.denominator > 0, s.max.numerator > 0, s.max.denominator > 0 else {
                    range = .unknown
                    return false
                }
                let step =
                    s.step.numerator > 0 && s.step.denominator > 0
                    ? Rational(Int64(s.step.numerator), Int64(s.step.denominator)) : Rational(0, 1)
                range = .stepwise(
                    shortest: Rational(Int64(s.min.numerator), Int64(s.min.denominator)),
                    longest: Rational(Int64(s.max.numerator), Int64(s.max.denominator)),
                    step: interval.type == V4L2_FRMIVAL_TYPE_CONTINUOUS.rawValue ? Rational(0, 1) : step)
                return false
            }
        }
        return range ?? (list.isEmpty ? .unknown : .discrete(list))
    }
}

/// The request for entry `index` of one of a format's lists (`VIDIOC_ENUM_FRAMESIZES`,
/// `VIDIOC_ENUM_FRAMEINTERVALS`).
protocol FormatListEntry {
    init()
    var index: UInt32 { get set }
    var pixel_format: UInt32 { get set }
}

extension FormatListEntry {
    init(entry index: UInt32, of fourcc: FourCC) {
        self.init()
        self.index = index
        pixel_format = fourcc.littleEndianValue
    }
}

extension v4l2_frmsizeenum: FormatListEntry {}
extension v4l2_frmivalenum: FormatListEntry {}
