// The difference histogram and the noise statistics: from a rotating sample of about 500
// reduced pixels per frame, the picture's global change of light and the sensor noise, both
// robust to moving objects, and how much of the sample differs from the background at all.

/// Per frame, a histogram of picture − background over a sample of the reduced pixels, split
/// into the dark and the bright half of the background, and what it says: the noise, the
/// global brightness and contrast change, and (`sampledChange`) the fraction of the watched
/// sampled pixels that differ. Keeps its fixed-size buffers between frames.
struct DifferenceStatistics: Sendable {
    /// How many reduced pixels per frame feed the noise and brightness statistics.
    static let sampleCount = 512
    /// Statistics histogram: differences from −16 to +16 grey levels in steps of 1/32.
    static let histogramRange: Float = 16
    static let histogramBinsPerLevel: Float = 32
    static let histogramBins = 2 * 16 * 32 + 1

    private var histogram: [Int32]  // two halves: dark and bright background
    private var watchedSamples: [Float]  // |picture − background| of the watched sampled pixels
    private var watchedSampleCount = 0
    private var samplePhase = 0
    /// The mean background level, which splits the sample into its dark and bright half:
    /// measured with each sample, and set when the background is learned afresh.
    var backgroundMean: Float = 128

    init() {
        histogram = [Int32](repeating: 0, count: 2 * Self.histogramBins)
        watchedSamples = [Float](repeating: 0, count: Self.sampleCount + 1)
    }

    /// Starts the sample's rotation again (new frame size).
    mutating func restart() {
        samplePhase = 0
    }

    /// What one frame's sample says.
    struct Measurement {
        /// Standard deviation of picture − background, in grey levels.
        var noise: Double
        /// The global change of light: picture ≈ background × gain + offset.
        var gain: Float
        var offset: Float
    }

    /// From a rotating sample of reduced pixels: the global brightness change (difference ≈
    /// offset + (gain − 1) × background, fitted through the medians of the dark and the bright
    /// half of the picture, so moving objects barely move it) and the noise (1.4826 × the
    /// median absolute deviation of the difference around those medians).
    mutating func measure(_ current: [Float], background: [Float], watch: [UInt8]) -> Measurement {
        let n = current.count
        let samples = min(n, Self.sampleCount)
        let step = max(1, n / samples)
        let phase = samplePhase % step
        samplePhase &+= 1
        let bins = Self.histogramBins
        let split = backgroundMean
        var counts = (0, 0)
        var backgroundSums: (Double, Double) = (0, 0)
        var watchedTaken = 0
        histogram.withUnsafeMutableBufferPointer { h in
            for i in h.indices { h[i] = 0 }
            current.withUnsafeBufferPointer { cur in
                background.withUnsafeBufferPointer { bg in
                    watch.withUnsafeBufferPointer { watched in
                        watchedSamples.withUnsafeMutableBufferPointer { taken in
                            var i = phase
                            while i < n {
                                let b = bg[i]
                                let d = cur[i] - b
                                if watched[i] != 0 && watchedTaken < taken.count {
                                    taken[watchedTaken] = abs(d)
                                    watchedTaken += 1
                                }
                                let position = (d + Self.histogramRange) * Self.histogramBinsPerLevel
                                let bin = Int(max(0, min(position, Float(bins - 1))))
                                if b < split {
                                    h[bin] &+= 1
                                    counts.0 += 1
                                    backgroundSums.0 += Double(b)
                                } else {
                                    h[bins + bin] &+= 1
                                    counts.1 += 1
                                    backgroundSums.1 += Double(b)
                                }
                                i += step
                            }
                        }
                    }
                }
            }
        }
        watchedSampleCount = watchedTaken
        if counts.0 + counts.1 > 0 {
            backgroundMean = Float((backgroundSums.0 + backgroundSums.1) / Double(counts.0 + counts.1))
        }
        return histogram.withUnsafeBufferPointer { h -> Measurement in
            let dark = UnsafeBufferPointer(rebasing: h[0..<bins])
            let bright = UnsafeBufferPointer(rebasing: h[bins..<(2 * bins)])
            let darkMedian = Self.median(dark, count: counts.0)
            let brightMedian = Self.median(bright, count: counts.1)
            let darkMAD = Self.medianAbsoluteDeviation(dark, count: counts.0, around: darkMedian)
            let brightMAD = Self.medianAbsoluteDeviation(bright, count: counts.1, around: brightMedian)
            let total = counts.0 + counts.1
            let mad = total > 0 ? (darkMAD * Double(counts.0) + brightMAD * Double(counts.1)) / Double(total) : 0
            var gain: Float = 1
            var offset: Float
            let minimum = max(16, samples / 16)
            if counts.0 >= minimum && counts.1 >= minimum {
                let darkLevel = backgroundSums.0 / Double(counts.0)
                let brightLevel = backgroundSums.1 / Double(counts.1)
                if brightLevel - darkLevel >= 8 {
                    let slope = min(max((brightMedian - darkMedian) / (brightLevel - darkLevel), -0.6), 1.5)
                    gain = Float(1 + slope)
                    offset = Float(darkMedian - slope * darkLevel)
                } else {
                    offset = Float((darkMedian * Double(counts.0) + brightMedian * Double(counts.1)) / Double(total))
                }
            } else {
                offset = Float(counts.0 >= counts.1 ? darkMedian : brightMedian)
            }
            return Measurement(noise: 1.4826 * mad, gain: gain, offset: offset)
        }
    }

    static func binValue(_ position: Double) -> Double {
        position / Double(histogramBinsPerLevel) - Double(histogramRange)
    }

    /// The median of the histogrammed differences, interpolated within its bin.
    static func median(_ h: UnsafeBufferPointer<Int32>, count: Int) -> Double {
        guard count > 0 else { return 0 }
        // Find the bin holding the middle sample in integers, then interpolate.
        let doubled = Int32(count)
        var cumulative: Int32 = 0
        for k in h.indices {
            let next = cumulative &+ h[k]
            if 2 &* next >= doubled {
                let c = Double(h[k])
                return binValue(Double(k) + (Double(count) / 2 - Double(cumulative)) / max(c, 1))
            }
            cumulative = next
        }
        return binValue(Double(h.count))
    }

    /// The median of |difference − center|, from the histogram, in grey levels.
    static func medianAbsoluteDeviation(_ h: UnsafeBufferPointer<Int32>, count: Int, around center: Double) -> Double {
        guard count > 0 else { return 0 }
        let position = (center + Double(histogramRange)) * Double(histogramBinsPerLevel)
        let k = min(max(Int(position), 0), h.count - 1)
        let target = Double(count) / 2
        var cumulative = Double(h[k])
        if cumulative >= target {
            return 0.5 * (target / cumulative) / Double(histogramBinsPerLevel)
        }
        var j = 1
        while k - j >= 0 || k + j < h.count {
            let ring = Double(k - j >= 0 ? h[k - j] : 0) + Double(k + j < h.count ? h[k + j] : 0)
            if ring > 0 && cumulative + ring >= target {
                let fraction = (target - cumulative) / ring
                return (Double(j) - 0.5 + fraction) / Double(histogramBinsPerLevel)
            }
            cumulative += ring
            j += 1
        }
        return Double(histogramRange)
    }

    /// The fraction of the watched sampled pixels that differ from the background by more
    /// than `threshold` (no compensation): what the light-switch rule compares.
    func sampledChange(threshold: Float) -> Double {
        guard watchedSampleCount > 0 else { return 0 }
        var over: Int32 = 0
        watchedSamples.withUnsafeBufferPointer { d in
            for i in 0..<watchedSampleCount { over &+= d[i] > threshold ? 1 : 0 }
        }
        return Double(over) / Double(watchedSampleCount)
    }
}
